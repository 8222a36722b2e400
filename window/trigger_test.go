package window_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
	"github.com/weirproject/weir/window"
)

type step = weirtest.Step[ev]

// r is a scripted record of key with timestamp ts and value n.
func r(key string, ts, n int64) step { return weirtest.Rec(0, ev{Key: key, TS: ts, N: n}, ts) }

// wm is a scripted watermark.
func wm(ts int64) step { return weirtest.WM[ev](0, ts) }

// fmtWin prints GlobalWindow as G.
func fmtWin(w window.Window) string {
	if w == window.GlobalWindow {
		return "G"
	}
	return w.String()
}

// listFn emits key, window and the values of the records a firing sees.
func listFn(k string, w window.Window, es []ev, emit func(string)) error {
	ns := make([]string, len(es))
	for i, e := range es {
		ns[i] = fmt.Sprint(e.N)
	}
	emit(fmt.Sprintf("%s%s[%s]", k, fmtWin(w), strings.Join(ns, " ")))
	return nil
}

// runSteps runs steps through a Process window that lists each firing's
// records, with one subtask, and returns the firings in order, each with
// its timestamp ("@max" for math.MaxInt64-1, the global window's).
func runSteps(t *testing.T, steps []step, a window.Assigner, opts ...window.Option) []string {
	t.Helper()
	return runStepsOn(t, state.BackendMemory, steps, a, opts...)
}

// runStepsOn is runSteps with the given state backend.
func runStepsOn(t *testing.T, backend string, steps []step, a window.Assigner, opts ...window.Option) []string {
	t.Helper()
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, StateBackend: runtime.StateBackendConfig{Kind: backend}})
	src := weir.FromSource(env, "script", weirtest.Script([][]step{steps}), watermark.NoWatermarks[ev]())
	out := sinkTo(window.Process(weir.KeyBy(src, evKey), "w", a, listFn, opts...))
	run(t, env)
	var got []string
	for _, rec := range out.records() {
		ts := fmt.Sprint(rec.Timestamp)
		if rec.Timestamp == math.MaxInt64-1 {
			ts = "max"
		}
		got = append(got, rec.Value+"@"+ts)
	}
	return got
}

// TestBuiltinTriggersAndEvictors: each built-in trigger and evictor against
// the behaviour Flink documents for it, on scripted records and
// watermarks, with the memory and the Pebble state backend.
func TestBuiltinTriggersAndEvictors(t *testing.T) {
	tum10 := window.Tumbling(10 * time.Millisecond)
	for _, c := range []struct {
		name  string
		a     window.Assigner
		opts  []window.Option
		steps []step
		want  []string
	}{{
		name:  "EventTimeTrigger fires at the window's end",
		a:     tum10,
		opts:  []window.Option{window.WithTrigger(window.EventTimeTrigger())},
		steps: []step{r("a", 1, 1), r("a", 5, 2), wm(8), r("a", 12, 3), wm(9), wm(19)},
		want:  []string{"a[0, 10)[1 2]@9", "a[10, 20)[3]@19"},
	}, {
		name: "EventTimeTrigger re-fires for a record within the allowed lateness",
		a:    tum10,
		opts: []window.Option{window.WithTrigger(window.EventTimeTrigger()), window.AllowedLateness(10 * time.Millisecond)},
		steps: []step{r("a", 1, 1), wm(9), r("a", 2, 2), wm(18),
			r("a", 3, 3)}, // cleanup time 19 not reached: fires again
		want: []string{"a[0, 10)[1]@9", "a[0, 10)[1 2]@9", "a[0, 10)[1 2 3]@9"},
	}, {
		name:  "CountTrigger fires every n records and keeps the contents",
		a:     tum10,
		opts:  []window.Option{window.WithTrigger(window.CountTrigger(2))},
		steps: []step{r("a", 1, 1), r("b", 1, 10), r("a", 2, 2), r("a", 3, 3), r("a", 4, 4), r("a", 5, 5), wm(100)},
		// b's one record and a's fifth never reach a count of 2; the
		// window's end does not fire it (CountTrigger ignores time).
		want: []string{"a[0, 10)[1 2]@9", "a[0, 10)[1 2 3 4]@9"},
	}, {
		name:  "CountTrigger's count ends with its window",
		a:     tum10,
		opts:  []window.Option{window.WithTrigger(window.CountTrigger(2))},
		steps: []step{r("a", 1, 1), wm(9), r("a", 11, 2), r("a", 12, 3)},
		want:  []string{"a[10, 20)[2 3]@19"},
	}, {
		name:  "PurgingTrigger(CountTrigger) emits disjoint batches",
		a:     tum10,
		opts:  []window.Option{window.WithTrigger(window.PurgingTrigger(window.CountTrigger(2)))},
		steps: []step{r("a", 1, 1), r("a", 2, 2), r("a", 3, 3), r("a", 4, 4), r("a", 5, 5)},
		want:  []string{"a[0, 10)[1 2]@9", "a[0, 10)[3 4]@9"},
	}, {
		name:  "PurgingTrigger(EventTimeTrigger) purges at the end, a late record starts over",
		a:     tum10,
		opts:  []window.Option{window.WithTrigger(window.PurgingTrigger(window.EventTimeTrigger())), window.AllowedLateness(5 * time.Millisecond)},
		steps: []step{r("a", 1, 1), r("a", 2, 2), wm(9), r("a", 3, 3)},
		want:  []string{"a[0, 10)[1 2]@9", "a[0, 10)[3]@9"},
	}, {
		name: "ContinuousEventTimeTrigger fires every interval and at the end",
		a:    tum10,
		opts: []window.Option{window.WithTrigger(window.ContinuousEventTimeTrigger(3 * time.Millisecond))},
		// First record at 1: firings at 3, 6, then 9 (capped at the end).
		steps: []step{r("a", 1, 1), wm(2), r("a", 2, 2), wm(3), r("a", 4, 3), wm(7), r("a", 8, 4), wm(9)},
		want:  []string{"a[0, 10)[1 2]@9", "a[0, 10)[1 2 3]@9", "a[0, 10)[1 2 3 4]@9"},
	}, {
		name: "ContinuousEventTimeTrigger aligns its first firing to the interval",
		a:    window.Tumbling(50 * time.Millisecond),
		opts: []window.Option{window.WithTrigger(window.ContinuousEventTimeTrigger(10 * time.Millisecond))},
		// First record at 17: 17 rounds down to 10, so firings at 20, 30,
		// 40, and 49 (the end); a watermark jump fires every one passed.
		steps: []step{r("a", 17, 1), wm(19), r("a", 18, 2), wm(20), wm(35), wm(49)},
		want:  []string{"a[0, 50)[1 2]@49", "a[0, 50)[1 2]@49", "a[0, 50)[1 2]@49", "a[0, 50)[1 2]@49"},
	}, {
		name:  "PurgingTrigger(ContinuousEventTimeTrigger) emits what each interval added",
		a:     tum10,
		opts:  []window.Option{window.WithTrigger(window.PurgingTrigger(window.ContinuousEventTimeTrigger(3 * time.Millisecond)))},
		steps: []step{r("a", 1, 1), r("a", 2, 2), wm(3), r("a", 4, 3), wm(7), r("a", 8, 4), wm(9)},
		want:  []string{"a[0, 10)[1 2]@9", "a[0, 10)[3]@9", "a[0, 10)[4]@9"},
	}, {
		name:  "Global windows never fire by default",
		a:     window.Global(),
		steps: []step{r("a", 1, 1), r("a", 2, 2), wm(100)},
		want:  nil,
	}, {
		name:  "Global with CountTrigger",
		a:     window.Global(),
		opts:  []window.Option{window.WithTrigger(window.CountTrigger(3))},
		steps: []step{r("a", 1, 1), r("a", 2, 2), r("a", 3, 3), r("a", 4, 4), r("a", 5, 5), r("a", 6, 6), r("a", 7, 7)},
		want:  []string{"aG[1 2 3]@max", "aG[1 2 3 4 5 6]@max"},
	}, {
		name: "Global with ContinuousEventTimeTrigger fires every interval and at the end of input",
		a:    window.Global(),
		opts: []window.Option{window.WithTrigger(window.PurgingTrigger(window.ContinuousEventTimeTrigger(10 * time.Millisecond)))},
		steps: []step{r("a", 5, 1), r("a", 9, 2), wm(10), r("a", 15, 3), wm(20),
			r("a", 25, 4)}, // the final watermark fires at 30, then the window's end
		want: []string{"aG[1 2]@max", "aG[3]@max", "aG[4]@max"},
	}, {
		name: "CountTumbling: countWindow(n)",
		a:    window.CountTumbling(3),
		steps: []step{r("a", 1, 1), r("b", 1, 10), r("a", 2, 2), r("a", 3, 3), r("a", 4, 4), r("b", 2, 20),
			r("a", 5, 5), r("a", 6, 6), r("b", 3, 30), r("a", 7, 7)},
		// The incomplete last windows (a's 7, nothing of b's after 30) are
		// not emitted, as in Flink.
		want: []string{"aG[1 2 3]@max", "aG[4 5 6]@max", "bG[10 20 30]@max"},
	}, {
		name:  "CountSliding: countWindow(size, slide)",
		a:     window.CountSliding(3, 2),
		steps: []step{r("a", 1, 1), r("a", 2, 2), r("a", 3, 3), r("a", 4, 4), r("a", 5, 5), r("a", 6, 6), r("a", 7, 7)},
		want:  []string{"aG[1 2]@max", "aG[2 3 4]@max", "aG[4 5 6]@max"},
	}, {
		name:  "CountEvictor keeps the last n before the function",
		a:     tum10,
		opts:  []window.Option{window.WithEvictor(window.CountEvictor(2))},
		steps: []step{r("a", 1, 1), r("a", 2, 2), r("a", 3, 3), r("a", 4, 4), r("a", 12, 5)},
		want:  []string{"a[0, 10)[3 4]@9", "a[10, 20)[5]@19"},
	}, {
		name: "CountEvictorAfter evicts after the function; a later firing sees the rest",
		a:    tum10,
		opts: []window.Option{window.WithEvictor(window.CountEvictorAfter(2)), window.AllowedLateness(10 * time.Millisecond)},
		steps: []step{r("a", 1, 1), r("a", 2, 2), r("a", 3, 3), wm(9),
			r("a", 4, 4)}, // allowed-late: fires again
		want: []string{"a[0, 10)[1 2 3]@9", "a[0, 10)[2 3 4]@9"},
	}, {
		name:  "TimeEvictor keeps the records within size of the latest",
		a:     window.Tumbling(100 * time.Millisecond),
		opts:  []window.Option{window.WithEvictor(window.TimeEvictor(3 * time.Millisecond))},
		steps: []step{r("a", 1, 1), r("a", 6, 4), r("a", 2, 2), r("a", 3, 3), r("a", 5, 5)},
		// max 6, cutoff 3: timestamps <= 3 go.
		want: []string{"a[0, 100)[4 5]@99"},
	}, {
		name:  "TimeEvictorAfter",
		a:     window.Tumbling(100 * time.Millisecond),
		opts:  []window.Option{window.WithEvictor(window.TimeEvictorAfter(3 * time.Millisecond)), window.WithTrigger(window.CountTrigger(2))},
		steps: []step{r("a", 1, 1), r("a", 6, 2), r("a", 7, 3), r("a", 8, 4)},
		want:  []string{"a[0, 100)[1 2]@99", "a[0, 100)[2 3 4]@99"},
	}, {
		name: "DeltaEvictor drops records too far from the last",
		a:    tum10,
		opts: []window.Option{window.WithEvictor(window.DeltaEvictor(10, func(a, b ev) float64 {
			return math.Abs(float64(a.N - b.N))
		}))},
		steps: []step{r("a", 1, 1), r("a", 2, 20), r("a", 3, 15), r("a", 4, 18)},
		want:  []string{"a[0, 10)[20 15 18]@9"},
	}, {
		name: "a custom evictor reads the watermark from its context",
		a:    window.Tumbling(100 * time.Millisecond),
		opts: []window.Option{window.WithTrigger(window.CountTrigger(2)), window.WithEvictor(behindWatermark{5})},
		// The second firing, by the count at watermark 50: records before
		// 45 go.
		steps: []step{r("a", 1, 1), r("a", 47, 2), wm(50), r("a", 60, 3), r("a", 70, 4)},
		want:  []string{"a[0, 100)[1 2]@99", "a[0, 100)[2 3 4]@99"},
	}, {
		name: "Session with CountTrigger: counts of merged sessions add up",
		a:    window.Session(5 * time.Millisecond),
		opts: []window.Option{window.WithTrigger(window.CountTrigger(3))},
		// [0,5) and [10,15), then 5 joins both: 1 + 1 + 1 = 3 fires.
		steps: []step{r("a", 0, 1), r("a", 10, 2), wm(3), r("a", 5, 3), r("a", 11, 4)},
		want:  []string{"a[0, 15)[1 2 3]@14"},
	}, {
		name: "Session with CountEvictor: merged sessions' records, then the last n",
		a:    window.Session(5 * time.Millisecond),
		opts: []window.Option{window.WithEvictor(window.CountEvictor(2))},
		// [0,5) and [10,15) merge through 5 into [0,15): records 1 2 3 in
		// merge order, of which the last two stay.
		steps: []step{r("a", 0, 1), r("a", 10, 2), r("a", 5, 3), r("a", 30, 4)},
		want:  []string{"a[0, 15)[2 3]@14", "a[30, 35)[4]@34"},
	}, {
		name: "Session with ContinuousEventTimeTrigger keeps firing after merges",
		a:    window.Session(10 * time.Millisecond),
		opts: []window.Option{window.WithTrigger(window.ContinuousEventTimeTrigger(5 * time.Millisecond))},
		// [1,11): next firing 5; [8,18) merges into [1,18): next firing
		// stays 5; at 5 it fires and schedules 10; at 10 again, then 15,
		// then 17 (the end).
		steps: []step{r("a", 1, 1), r("a", 8, 2), wm(5), wm(12), wm(20)},
		want:  []string{"a[1, 18)[1 2]@17", "a[1, 18)[1 2]@17", "a[1, 18)[1 2]@17", "a[1, 18)[1 2]@17"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			for _, backend := range []string{state.BackendMemory, state.BackendPebble} {
				got := runStepsOn(t, backend, c.steps, c.a, c.opts...)
				if !slices.Equal(got, c.want) {
					t.Fatalf("%s backend:\ngot  %q\nwant %q", backend, got, c.want)
				}
			}
		})
	}
}

// TestEvictorWithReduceAndAggregate: with an evictor, Reduce and
// Aggregate run over the records the evictor leaves.
func TestEvictorWithReduceAndAggregate(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	var steps []step
	for i := range int64(7) {
		steps = append(steps, r("a", i, i+1))
	}
	src := weir.FromSource(env, "script", weirtest.Script([][]step{steps}), watermark.NoWatermarks[ev]())
	ks := weir.KeyBy(src, evKey)
	sums := weir.Collect(window.Reduce(ks, "sum", window.CountSliding(3, 2), sumEv))
	counts := weir.Collect(window.Aggregate(ks, "count", window.Tumbling(time.Second), window.Count[ev](),
		window.WithEvictor(window.CountEvictor(4))))
	run(t, env)
	var got []int64
	for _, e := range sums.Values() {
		got = append(got, e.N)
	}
	if want := []int64{1 + 2, 2 + 3 + 4, 4 + 5 + 6}; !slices.Equal(got, want) {
		t.Fatalf("sliding count sums %v, want %v", got, want)
	}
	if got := counts.Values(); !slices.Equal(got, []int64{4}) {
		t.Fatalf("evicted count %v, want [4]", got)
	}
}

// neverMerges is a trigger that cannot merge.
type neverMerges struct{ window.Trigger }

func (neverMerges) CanMerge() bool { return false }

// TestTriggerBuildChecks: triggers that cannot serve the assigner fail
// the job build with a message naming the problem.
func TestTriggerBuildChecks(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{})
	ks := weir.KeyBy(weir.FromSlice(env, "src", []ev{}, eagerBounded(0)), evKey)
	unmergeable := window.NewTriggerState("x", nil)
	for _, c := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"session with a non-merging trigger", func() {
			window.Reduce(ks, "w", window.Session(time.Second), sumEv, window.WithTrigger(neverMerges{window.CountTrigger(2)}))
		}, "cannot merge windows"},
		{"session with a state without merge", func() {
			window.Reduce(ks, "w", window.Session(time.Second), sumEv, window.WithTrigger(statesTrigger{window.CountTrigger(2), []*window.TriggerState{unmergeable}}))
		}, `state "x" has no merge function`},
		{"duplicate state names", func() {
			window.Reduce(ks, "w", window.Tumbling(time.Second), sumEv, window.WithTrigger(statesTrigger{window.CountTrigger(2),
				[]*window.TriggerState{window.NewTriggerState("n", nil), window.NewTriggerState("n", nil)}}))
		}, `declares state "n" twice`},
		{"delta evictor of another type", func() {
			window.Reduce(ks, "w", window.Tumbling(time.Second), sumEv, window.WithEvictor(window.DeltaEvictor(1, func(a, b int) float64 { return 0 })))
		}, "evictor"},
		{"count trigger 0", func() { window.CountTrigger(0) }, "at least 1"},
		{"count sliding 0", func() { window.CountSliding(3, 0) }, "at least 1"},
		{"nil trigger", func() { window.WithTrigger(nil) }, "nil trigger"},
		{"continuous interval", func() { window.ContinuousEventTimeTrigger(0) }, "interval must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				s, _ := recover().(string)
				if !strings.Contains(s, c.msg) {
					t.Fatalf("panic %q, want %q", s, c.msg)
				}
			}()
			c.f()
		})
	}
}

// statesTrigger is a trigger declaring other states.
type statesTrigger struct {
	window.Trigger
	states []*window.TriggerState
}

func (s statesTrigger) States() []*window.TriggerState { return s.states }

// TestEventTimeTriggerPathMatchesDefault: setting EventTimeTrigger
// explicitly (the general trigger path) gives exactly the output of the
// default path, with lateness and sessions; runtime.Record timestamps
// included.
func TestEventTimeTriggerPathMatchesDefault(t *testing.T) {
	var steps []step
	for i := range int64(400) {
		ts := (i*7)%113 + i/3 // disorder within a rising trend
		steps = append(steps, r(string(rune('a'+i%5)), ts, i))
		if i%9 == 0 {
			steps = append(steps, wm(i/3+40))
		}
	}
	for _, a := range []window.Assigner{window.Tumbling(20 * time.Millisecond), window.Sliding(30*time.Millisecond, 10*time.Millisecond), window.Session(6 * time.Millisecond)} {
		lateness := window.AllowedLateness(25 * time.Millisecond)
		def := runSteps(t, steps, a, lateness)
		trig := runSteps(t, steps, a, lateness, window.WithTrigger(window.EventTimeTrigger()))
		if len(def) == 0 || !slices.Equal(def, trig) {
			t.Fatalf("%v: default path %d firings, trigger path %d:\n%q\n%q", a, len(def), len(trig), def, trig)
		}
	}
}

// TestContinuousProcessingTimeTrigger drives processing time with a
// manual clock: a processing-time window fires every interval of the
// clock (aligned to multiples of it) and last at its end, when it is
// cleaned up; a Global window's continuous firing ends with the input
// (one last firing of the pending timer, no endless re-registration).
func TestContinuousProcessingTimeTrigger(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(100_000))
	f := newFeed[ev]()
	// Unchained, so that the window operator's recordsIn counter tells
	// when the records are in.
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk, DisableChaining: true})
	src := weir.FromSource(env, "feed", runtime.Source[ev](f), watermark.NoWatermarks[ev]())
	ks := weir.KeyBy(src, evKey)
	out := sinkTo(window.Process(ks, "win", window.TumblingProcessing(10*time.Second), listFn,
		window.WithTrigger(window.ContinuousProcessingTimeTrigger(2*time.Second))))
	glob := sinkTo(window.Process(ks, "global", window.Global(), listFn,
		window.WithTrigger(window.PurgingTrigger(window.ContinuousProcessingTimeTrigger(4*time.Second)))))
	job, stop := weirtest.Start(t, env)
	defer stop()
	processed := func(n int64) func() bool {
		return func() bool {
			return env.Metrics().Sum("win", "recordsIn") >= n && env.Metrics().Sum("global", "recordsIn") >= n
		}
	}
	values := func(l *logSink[string]) []string {
		var vs []string
		for _, r := range l.records() {
			vs = append(vs, r.Value)
		}
		return vs
	}
	f.push(rec("a", 0, 1), rec("b", 0, 2))
	weirtest.Eventually(t, "2 records in", processed(2))
	clk.Advance(2 * time.Second) // 102000: the first firing of both keys
	weirtest.Eventually(t, "2 firings", func() bool { return len(out.records()) == 2 })
	f.push(rec("a", 0, 3))
	weirtest.Eventually(t, "3 records in", processed(3))
	clk.Advance(2 * time.Second) // 104000: the next; Global's first (100000 + 4000)
	weirtest.Eventually(t, "4 firings", func() bool { return len(out.records()) == 4 })
	weirtest.Eventually(t, "2 global firings", func() bool { return len(glob.records()) == 2 })
	got := values(out)
	slices.Sort(got[:2])
	slices.Sort(got[2:])
	w := "[100000, 110000)"
	if want := []string{"a" + w + "[1]", "b" + w + "[2]", "a" + w + "[1 3]", "b" + w + "[2]"}; !slices.Equal(got, want) {
		t.Fatalf("firings %q, want %q", got, want)
	}
	for _, r := range out.records() {
		if r.Timestamp != 109_999 {
			t.Fatalf("firing %v has timestamp %d, want the window's MaxTimestamp 109999", r.Value, r.Timestamp)
		}
	}
	// To the window's end: firings at 106000, 108000 and 109999 (capped),
	// two keys each; then the window is cleaned up.
	clk.Advance(6 * time.Second)
	weirtest.Eventually(t, "10 firings", func() bool { return len(out.records()) == 10 })
	// Global: a record after its firing at 108000 (the third, of nothing:
	// purged); the input ends before the clock reaches the next firing
	// (112000), which fires then.
	f.push(rec("a", 0, 4))
	weirtest.Eventually(t, "4 records in", processed(4))
	f.close()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	g := values(glob)
	slices.Sort(g[:2])
	if want := []string{"aG[1 3]", "bG[2]", "aG[4]"}; !slices.Equal(g, want) {
		t.Fatalf("global firings %q, want %q", g, want)
	}
	// The record at 110000 opened [110000, 120000); at the end of input
	// processing time runs to its end (I8): firings at 112000, 114000,
	// 116000, 118000 and 119999.
	last := values(out)[10:]
	want := slices.Repeat([]string{"a[110000, 120000)[4]"}, 5)
	if !slices.Equal(last, want) {
		t.Fatalf("firings after the first window %q, want %q", last, want)
	}
}

// behindWatermark evicts, before the function, the records more than d
// behind the current watermark.
type behindWatermark struct{ d int64 }

func (b behindWatermark) EvictBefore(e *window.Elements, _ window.Window, ctx *window.EvictorContext) {
	for i := range e.Len() {
		if e.Timestamp(i)+b.d < ctx.CurrentWatermark() {
			e.Evict(i)
		}
	}
}

func (behindWatermark) EvictAfter(*window.Elements, window.Window, *window.EvictorContext) {}
