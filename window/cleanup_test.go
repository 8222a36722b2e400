package window_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/weirtest"
	"github.com/weirproject/weir/window"
)

// statsAt collects what window operators report after a given watermark.
type statsAt struct {
	mu sync.Mutex
	at map[string]window.Stats // "op/subtask" -> stats
}

// watchWatermark installs the hook for watermark wm until the test ends.
func watchWatermark(t *testing.T, wm int64) *statsAt {
	s := &statsAt{at: map[string]window.Stats{}}
	window.SetWatermarkHook(func(op string, sub int, w int64, st window.Stats) {
		if w == wm {
			s.mu.Lock()
			s.at[fmt.Sprintf("%s/%d", op, sub)] = st
			s.mu.Unlock()
		}
	})
	t.Cleanup(func() { window.SetWatermarkHook(nil) })
	return s
}

func (s *statsAt) get(key string) (window.Stats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.at[key]
	return st, ok
}

// TestStateCleanup: once the watermark passes a window's cleanup time, its
// contents, timers and session entry are gone (I5), while the job keeps
// running; what remains is exactly the state of the windows still open.
func TestStateCleanup(t *testing.T) {
	const far = 100_000
	for _, lateness := range []time.Duration{0, 700 * time.Millisecond} {
		for _, c := range []struct {
			name    string
			a       window.Assigner
			windows int // windows the records at far, far+1 occupy (and the one at far+2)
		}{
			{"tumbling", window.Tumbling(time.Second), 1},
			{"sliding", window.Sliding(2*time.Second, 500*time.Millisecond), 4},
			{"session", window.Session(300 * time.Millisecond), 1},
		} {
			t.Run(fmt.Sprintf("%s/lateness=%v", c.name, lateness), func(t *testing.T) {
				stats := watchWatermark(t, far+1)
				f := newFeed[ev]()
				env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
				src := weir.FromSource(env, "feed", runtime.Source[ev](f), eagerBounded(0))
				sinkTo(window.Process(weir.KeyBy(src, evKey), "win", c.a, func(string, window.Window, []ev, func(int)) error { return nil },
					window.AllowedLateness(lateness)))
				_, stop := weirtest.Start(t, env)
				defer stop()
				rng := rand.New(rand.NewPCG(3, 4))
				for range 500 {
					f.push(rec(string(rune('a'+rng.IntN(5))), rng.Int64N(5000), 1))
				}
				// y's record moves the watermark to far+1 (B = 0); both of
				// z's records are in by then (for sessions: merged), while
				// y's may or may not be, depending on whether a source
				// emits a record or the watermark it causes first.
				f.push(rec("z", far, 1), rec("z", far+1, 1), rec("y", far+2, 1))
				var st window.Stats
				weirtest.Eventually(t, "watermark", func() bool {
					var ok bool
					st, ok = stats.get("win/0")
					return ok
				})
				timersPer := 1
				if lateness > 0 {
					timersPer = 2 // trigger and cleanup
				}
				sessions := 0
				if c.a.IsMerging() {
					sessions = 1
				}
				withY := st.Contents() == 2*c.windows
				if withY && sessions > 0 {
					sessions++
				}
				if (st.Contents() != c.windows && !withY) || st.EventTimers() != st.Contents()*timersPer ||
					st.SessionKeys() != sessions || st.ProcTimers() != 0 {
					t.Fatalf("after the watermark: %d contents, %d event timers, %d session keys, %d processing timers; want %d (or %d), %d per window, %d, 0",
						st.Contents(), st.EventTimers(), st.SessionKeys(), st.ProcTimers(), c.windows, 2*c.windows, timersPer, sessions)
				}
			})
		}
	}
}

// TestNothingLeftAtEnd: the final watermark of a bounded input leaves no
// state and no timers in any subtask (I5, I8), for every kind of window,
// with and without triggers (I12: trigger state goes with its window).
func TestNothingLeftAtEnd(t *testing.T) {
	stats := watchWatermark(t, math.MaxInt64)
	rng := rand.New(rand.NewPCG(5, 6))
	var in []ev
	for range 2000 {
		in = append(in, ev{Key: string(rune('a' + rng.IntN(20))), TS: rng.Int64N(20_000) - 10_000, N: 1})
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, AutoWatermarkInterval: -1})
	ks := weir.KeyBy(weir.FromSlice(env, "src", in, eagerBounded(3*time.Second)).Parallelism(1), evKey)
	late := window.AllowedLateness(2 * time.Second)
	weir.Collect(window.Reduce(ks, "tumbling", window.Tumbling(time.Second), sumEv, late))
	weir.Collect(window.Reduce(ks, "sliding", window.Sliding(3*time.Second, time.Second), sumEv, late))
	weir.Collect(window.Reduce(ks, "session", window.Session(200*time.Millisecond), sumEv, late))
	weir.Collect(window.Process(ks, "process", window.Session(200*time.Millisecond), func(string, window.Window, []ev, func(int)) error { return nil }))
	// With triggers holding state and timers, and an evictor.
	weir.Collect(window.Reduce(ks, "count-trigger", window.Sliding(3*time.Second, time.Second), sumEv, late,
		window.WithTrigger(window.CountTrigger(3))))
	weir.Collect(window.Reduce(ks, "continuous-session", window.Session(200*time.Millisecond), sumEv, late,
		window.WithTrigger(window.ContinuousEventTimeTrigger(50*time.Millisecond)), window.WithEvictor(window.CountEvictor(2))))
	run(t, env)
	for _, op := range []string{"tumbling", "sliding", "session", "process", "count-trigger", "continuous-session"} {
		for sub := range 2 {
			st, ok := stats.get(fmt.Sprintf("%s/%d", op, sub))
			if !ok {
				t.Fatalf("%s/%d: no final watermark", op, sub)
			}
			if st != (window.Stats{}) {
				t.Fatalf("%s/%d: left %+v", op, sub, st)
			}
		}
	}
}
