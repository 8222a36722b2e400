package agent

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/watermark"
)

// TestRateLimitBackPressures runs an agent whose model is limited to 5
// calls per second, 3 at once, and answers every 7th call with a 429
// asking for a 3 s wait, in virtual time (testing/synctest: the job's
// clock and the limiter's waits are the bubble's). The job does not fail:
// every input gets its answer, each key's answers in input order; and
// counted in virtual time, no window of one second holds more than 5
// calls, no call starts while a 429's wait runs, and never more than 3
// calls run at once. Nothing measures wall-clock time.
func TestRateLimitBackPressures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const inputs, keys = 60, 6
		lim := model.MustLimiter(model.RateLimit{Requests: 5, Interval: time.Second, MaxConcurrent: 3})
		var mu sync.Mutex
		var starts []time.Time
		var pauses [][2]time.Time // [429 answered, wait over)
		inFlight, maxInFlight := 0, 0
		raw := model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
			mu.Lock()
			now := time.Now()
			starts = append(starts, now)
			n := len(starts)
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond) // virtual
			mu.Lock()
			inFlight--
			mu.Unlock()
			if n%7 == 0 {
				mu.Lock()
				pauses = append(pauses, [2]time.Time{time.Now(), time.Now().Add(3 * time.Second)})
				mu.Unlock()
				return nil, &model.APIError{StatusCode: 429, RetryAfter: 3 * time.Second}
			}
			return &model.Response{Message: model.Assistant("re:" + lastUser(req))}, nil
		})
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: 50 * time.Millisecond})
		src := weir.Generate(env, "inputs", inputs, func(i int64) weir.Record[msg] {
			return weir.Record[msg]{Value: msg{Key: "k" + strconv.Itoa(int(i%keys)), Text: strconv.Itoa(int(i)), N: int(i)}, Timestamp: i}
		}, watermark.ForMonotonous[msg]())
		out := Apply[string, msg, string](weir.KeyBy(src, func(m msg) string { return m.Key }), "agent",
			chatAgent(model.WithRateLimit(raw, lim)), Options{MaxConcurrentKeys: keys, MaxBufferedInputs: 2})
		rc := record(out)
		if err := env.Execute(context.Background()); err != nil {
			t.Fatalf("the job failed: %v", err)
		}

		evs, _ := rc.snapshot()
		perKey := map[string][]int{}
		n := 0
		for _, e := range evs {
			if e.wm || e.idle {
				continue
			}
			n++
			i, _ := strconv.Atoi(strings.TrimPrefix(e.v, "re:"))
			k := "k" + strconv.Itoa(i%keys)
			perKey[k] = append(perKey[k], i)
		}
		if n != inputs {
			t.Fatalf("%d answers for %d inputs", n, inputs)
		}
		for k, is := range perKey {
			if !slices.IsSorted(is) {
				t.Errorf("key %s answered out of order: %v", k, is)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if want := inputs + inputs/6; len(starts) < inputs || len(starts) > want+1 {
			t.Fatalf("%d calls for %d inputs", len(starts), inputs)
		}
		for i, s := range starts {
			in := 0
			for _, u := range starts[i:] {
				if u.Sub(s) < time.Second {
					in++
				}
			}
			if in > 5 {
				t.Fatalf("%d calls within one second from call %d", in, i)
			}
			for _, p := range pauses {
				if s.After(p[0]) && s.Before(p[1]) {
					t.Fatalf("call %d started inside the wait a 429 asked for (%v after it)", i, s.Sub(p[0]))
				}
			}
		}
		if maxInFlight > 3 {
			t.Fatalf("%d calls at once, the limit is 3", maxInFlight)
		}
		if s := lim.Stats(); s.RateLimited != int64(len(pauses)) || s.Waited == 0 {
			t.Fatalf("limiter stats %+v, %d 429s", s, len(pauses))
		}
		t.Logf("%d calls, %d 429s, limiter %+v", len(starts), len(pauses), fmt.Sprint(lim.Stats()))
	})
}
