package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

func keyOfMsg(m msg) string { return m.Key }

func waitStatus(t *testing.T, ctx context.Context, op string, what string, cond func(SubtaskStatus) bool) SubtaskStatus {
	t.Helper()
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		ss := Status(qctx, op)
		cancel()
		if len(ss) == 1 && cond(ss[0]) {
			return ss[0]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; status %+v", what, ctx.Err(), ss)
		case <-time.After(time.Millisecond):
		}
	}
}

func hasValue(v string) func([]recEvent[string]) bool {
	return func(evs []recEvent[string]) bool {
		return slices.ContainsFunc(evs, func(e recEvent[string]) bool { return !e.wm && e.v == v })
	}
}

func hasWatermark(ts int64) func([]recEvent[string]) bool {
	return func(evs []recEvent[string]) bool {
		return slices.ContainsFunc(evs, func(e recEvent[string]) bool { return e.wm && e.ts == ts })
	}
}

func render(evs []recEvent[string]) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, e.String())
	}
	return strings.Join(parts, " ")
}

// TestWatermarkWaitsOnlyForEarlierInput: A1 (slow), B1, WM1, A2.
// WM1 may leave only once A1 has finished, and must not wait for A2, which
// arrived after it.
func TestWatermarkWaitsOnlyForEarlierInput(t *testing.T) {
	ctx := testCtx(t)
	m := newGatedModel()
	openA1 := m.gate("A1")
	openA2 := m.gate("A2")
	end := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(
		rec(msg{Key: "A", Text: "A1"}, 1),
		rec(msg{Key: "B", Text: "B1"}, 2),
		wmark[msg](2),
		rec(msg{Key: "A", Text: "A2"}, 3),
		pause[msg](end),
	), watermark.NoWatermarks[msg]())
	out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "walkthrough", chatAgent(m), Options{})
	rc := record(out)
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { openA1(); openA2(); job.Cancel(); job.Wait() }()

	m.waitEntered(t, ctx, "A1")
	rc.waitFor(t, ctx, "B1's output", hasValue("re:B1"))
	st := waitStatus(t, ctx, "walkthrough", "WM1 held", func(s SubtaskStatus) bool { return s.HeldWatermarks == 1 })
	if st.OldestHeldWatermark != 2 || !slices.Equal(st.OldestHeldBy, []HeldKey{{Key: "A", Inputs: 1}}) || st.OldestHeldByCount != 1 {
		t.Fatalf("status while A1 runs: %+v; want WM 2 held by A (1 input)", st)
	}
	if st.RunningKeys != 1 || st.InFlightInputs != 2 || st.WaitingInputs != 1 {
		t.Fatalf("status while A1 runs: %+v; want key A running with A2 waiting", st)
	}
	if evs, _ := rc.snapshot(); hasWatermark(2)(evs) {
		t.Fatalf("WM1 left before A1 finished: %s", render(evs))
	}
	if n := m.calls.Load(); n != 2 {
		t.Fatalf("%d model calls while A1 runs; A2 must wait for A1", n)
	}

	openA1()
	m.waitEntered(t, ctx, "A2")
	evs := rc.waitFor(t, ctx, "WM1", hasWatermark(2))
	if got, want := render(evs), "re:B1@2 re:A1@1 WM(2)"; got != want {
		t.Fatalf("after A1 finished: %s, want %s (A2 still running)", got, want)
	}
	openA2()
	close(end)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	evs, _ = rc.snapshot()
	if got, want := render(evs), fmt.Sprintf("re:B1@2 re:A1@1 WM(2) re:A2@3 WM(%d)", watermark.Max); got != want {
		t.Fatalf("final: %s, want %s", got, want)
	}
}

// TestRandomizedLatencies runs many keys with random model latencies and
// frequent watermarks through two agent subtasks and checks, at the sink,
// that no output arrives behind a watermark already forwarded, that every
// key's outputs keep input order, that every input produced exactly one
// output, and that different keys ran concurrently.
func TestRandomizedLatencies(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"default", Options{}},
		{"tight limits", Options{MaxConcurrentKeys: 3, MaxBufferedInputs: 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			const keys, n = 37, 2000
			m := newGatedModel()
			m.latency = func(p string) time.Duration {
				h := uint32(2166136261)
				for i := 0; i < len(p); i++ {
					h = (h ^ uint32(p[i])) * 16777619
				}
				return time.Duration(h%400) * time.Microsecond
			}
			var steps []step[msg]
			for i := range n {
				k := fmt.Sprintf("k%d", (i*7)%keys)
				steps = append(steps, rec(msg{Key: k, Text: fmt.Sprintf("%s/%d", k, i), N: i}, int64(i)))
				if i%10 == 9 {
					steps = append(steps, wmark[msg](int64(i)))
				}
			}
			env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128})
			src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]())
			out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", chatAgent(m), c.opts).Parallelism(2)
			rc := record(out)
			if err := env.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			evs, _ := rc.snapshot()
			var lastWM int64 = -1 << 62
			last := map[string]int{}
			outputs, wms := 0, 0
			for i, e := range evs {
				if e.wm {
					if e.ts < lastWM {
						t.Fatalf("event %d: watermark %d after %d", i, e.ts, lastWM)
					}
					lastWM = e.ts
					wms++
					continue
				}
				outputs++
				if e.ts <= lastWM {
					t.Fatalf("event %d: output %s with timestamp %d arrived after watermark %d", i, e.v, e.ts, lastWM)
				}
				var k string
				var seq int
				if _, err := fmt.Sscanf(strings.TrimPrefix(e.v, "re:"), "k%d/%d", new(int), &seq); err != nil {
					t.Fatalf("bad output %q", e.v)
				}
				k = strings.SplitN(strings.TrimPrefix(e.v, "re:"), "/", 2)[0]
				if int64(seq) != e.ts {
					t.Fatalf("output %s carries timestamp %d, not its input's", e.v, e.ts)
				}
				if p, ok := last[k]; ok && p >= seq {
					t.Fatalf("key %s: output of input %d after that of input %d", k, seq, p)
				}
				last[k] = seq
			}
			if outputs != n {
				t.Fatalf("%d outputs for %d inputs", outputs, n)
			}
			if wms < 10 {
				t.Fatalf("only %d watermarks reached the sink", wms)
			}
			if max := m.maxSeen.Load(); max < 2 {
				t.Fatalf("at most %d model calls ran at once; keys must overlap", max)
			} else if c.opts.MaxConcurrentKeys > 0 && max > int64(2*c.opts.MaxConcurrentKeys) {
				t.Fatalf("%d calls ran at once with 2 subtasks of at most %d keys each", max, c.opts.MaxConcurrentKeys)
			}
			t.Logf("%d outputs, %d watermarks, max %d concurrent calls", outputs, wms, m.maxSeen.Load())
		})
	}
}
