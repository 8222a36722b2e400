package window_test

import (
	"context"
	"errors"
	"math/rand/v2"
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

// TestTumblingSumMatchesModel: an event-time tumbling sum per key equals a
// brute-force sum, with one and two subtasks, through Reduce, ReduceKeyed
// and AggregateKeyed; every window fires exactly once, stamped with its
// MaxTimestamp (I1, I2, I7).
func TestTumblingSumMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var in []ev
	for i := range 5000 {
		// Timestamps rise by 10ms per record with up to 1s of disorder,
		// crossing zero.
		ts := int64(i*10) - 20_000 + rng.Int64N(1000)
		in = append(in, ev{Key: string(rune('a' + rng.IntN(13))), TS: ts, N: rng.Int64N(100)})
	}
	const size = 1000
	type kw struct {
		key   string
		start int64
	}
	want := map[kw]int64{}
	for _, e := range in {
		s := e.TS - ((e.TS%size)+size)%size
		want[kw{e.Key, s}] += e.N
	}
	for _, c := range []struct {
		par     int
		backend string
	}{{1, state.BackendMemory}, {2, state.BackendMemory}, {2, state.BackendPebble}} {
		par := c.par
		env := weir.NewEnvironment(weir.Config{Parallelism: par,
			StateBackend: runtime.StateBackendConfig{Kind: c.backend}})
		// The bound exceeds the disorder: no record is late.
		src := weir.FromSlice(env, "src", in, watermark.ForBoundedOutOfOrderness[ev](2*time.Second).
			WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true }))
		ks := weir.KeyBy(src, evKey)
		plain := weir.Collect(window.Reduce(ks, "reduce", window.Tumbling(time.Second), sumEv))
		keyed := weir.Collect(window.ReduceKeyed(ks, "reduce-keyed", window.Tumbling(time.Second), sumEv))
		agg := weir.Collect(window.AggregateKeyed(ks, "aggregate", window.Tumbling(time.Second), window.AggregateFuncs[ev, int64, int64]{
			AddFn:    func(e ev, acc int64) int64 { return acc + e.N },
			ResultFn: func(acc int64) int64 { return acc },
		}))
		run(t, env)

		gotKeyed := map[kw]int64{}
		for _, r := range keyed.Records() {
			k := kw{r.Value.Key, r.Value.Window.Start}
			if _, dup := gotKeyed[k]; dup {
				t.Fatalf("par %d: window %v fired twice", par, k)
			}
			if r.Timestamp != r.Value.Window.MaxTimestamp() || r.Value.Window.End-r.Value.Window.Start != size {
				t.Fatalf("par %d: record %+v", par, r)
			}
			gotKeyed[k] = r.Value.Value.N
		}
		gotAgg := map[kw]int64{}
		for _, r := range agg.Records() {
			gotAgg[kw{r.Value.Key, r.Value.Window.Start}] = r.Value.Value
		}
		gotPlain := map[kw]int64{}
		for _, r := range plain.Records() {
			gotPlain[kw{r.Value.Key, r.Timestamp + 1 - size}] = r.Value.N
		}
		for name, got := range map[string]map[kw]int64{"ReduceKeyed": gotKeyed, "AggregateKeyed": gotAgg, "Reduce": gotPlain} {
			if len(got) != len(want) {
				t.Fatalf("par %d %s: %d windows, want %d", par, name, len(got), len(want))
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("par %d %s: %v = %d, want %d", par, name, k, got[k], v)
				}
			}
		}
		for _, op := range []string{"reduce", "reduce-keyed", "aggregate"} {
			if n := env.Metrics().Sum(op, window.CounterLateDropped); n != 0 {
				t.Fatalf("par %d %s: %d late records", par, op, n)
			}
		}
	}
}

// TestMinusOneRule follows the bounded-out-of-orderness boundary end to
// end: with a bound of B = 5s the watermark is maxTs - 5000 - 1, so the
// window [12:00, 12:05) (MaxTimestamp 12:04:59.999) fires exactly when a
// record at 12:05:05.000 arrives, and not at 12:05:04.999. The log sink shows the result right
// before the watermark that fired it.
func TestMinusOneRule(t *testing.T) {
	base := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	at := func(m, s, ms int64) int64 { return base + m*60_000 + s*1000 + ms }
	f := newFeed[ev]()
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSource(env, "feed", runtime.Source[ev](f), eagerBounded(5*time.Second))
	out := sinkTo(window.ReduceKeyed(weir.KeyBy(src, evKey), "win", window.Tumbling(5*time.Minute), sumEv))
	_, stop := weirtest.Start(t, env)
	defer stop()

	sawWM := func(wm int64) func() bool {
		return func() bool {
			for _, e := range out.entries() {
				if e.IsWM && e.Watermark == wm {
					return true
				}
			}
			return false
		}
	}
	f.push(rec("k", at(0, 10, 0), 1), rec("k", at(4, 59, 999), 2), rec("k", at(5, 4, 999), 4))
	weirtest.Eventually(t, "watermark 12:04:59.998", sawWM(at(4, 59, 998)))
	if recs := out.records(); len(recs) != 0 {
		t.Fatalf("window fired before the watermark reached its max timestamp: %v", recs)
	}
	f.push(rec("k", at(5, 5, 0), 8))
	weirtest.Eventually(t, "watermark 12:04:59.999", sawWM(at(4, 59, 999)))
	log := out.entries()
	i := slices.IndexFunc(log, func(e entry[window.Result[string, ev]]) bool { return e.IsWM && e.Watermark == at(4, 59, 999) })
	if i < 1 || log[i-1].IsWM {
		t.Fatalf("no result right before watermark 12:04:59.999: %v", log)
	}
	r := log[i-1].Rec
	if r.Value.Window != (window.Window{Start: at(0, 0, 0), End: at(5, 0, 0)}) || r.Value.Value.N != 3 || r.Timestamp != at(4, 59, 999) {
		t.Fatalf("result %+v", r)
	}
	if n := len(out.records()); n != 1 {
		t.Fatalf("%d results, want 1: %v", n, log)
	}
}

// TestSlidingWindows: each record lands in size/slide windows, and each
// window holds exactly the records it contains (I1, I2).
func TestSlidingWindows(t *testing.T) {
	var in []ev
	for i := range 200 {
		in = append(in, ev{Key: []string{"x", "y"}[i%2], TS: int64(i)*137 - 9000, N: 1})
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "src", in, eagerBounded(0)).Parallelism(1)
	type res struct {
		key  string
		w    window.Window
		tss  []int64
		fire int64
	}
	out := weir.Collect(window.Process(weir.KeyBy(src, evKey), "sliding", window.Sliding(10*time.Second, 2500*time.Millisecond),
		func(k string, w window.Window, elems []ev, emit func(res)) error {
			var tss []int64
			for _, e := range elems {
				tss = append(tss, e.TS)
			}
			emit(res{k, w, tss, 0})
			return nil
		}))
	run(t, env)
	count := map[int64]int{}
	seen := map[[2]any]bool{}
	for _, r := range out.Records() {
		v := r.Value
		if r.Timestamp != v.w.MaxTimestamp() || v.w.End-v.w.Start != 10_000 || ((v.w.Start%2500)+2500)%2500 != 0 {
			t.Fatalf("bad result %+v @%d", v, r.Timestamp)
		}
		if seen[[2]any{v.key, v.w}] {
			t.Fatalf("window %v of %s fired twice", v.w, v.key)
		}
		seen[[2]any{v.key, v.w}] = true
		var want []int64
		for _, e := range in {
			if e.Key == v.key && v.w.Contains(e.TS) {
				want = append(want, e.TS)
			}
		}
		if !slices.Equal(v.tss, want) {
			t.Fatalf("window %v of %s: %v, want %v", v.w, v.key, v.tss, want)
		}
		for _, ts := range v.tss {
			count[ts]++
		}
	}
	for _, e := range in {
		if count[e.TS] != 4 {
			t.Fatalf("record at %d is in %d windows, want 4", e.TS, count[e.TS])
		}
	}
}

// TestSessionWindows: sessions merge when windows overlap or touch, so
// records exactly one gap apart share a session and one millisecond more
// starts a new one; out-of-order records bridge sessions; merged sessions
// fire once, with all their contents (I6), through Process, Reduce and
// Aggregate alike.
func TestSessionWindows(t *testing.T) {
	in := []ev{
		{"a", 0, 1}, {"a", 3000, 2}, {"a", 8000, 4}, // 8000 = 3000 + gap: same session
		{"a", 13_001, 8}, // 13001 > 8000 + gap: new session
		{"b", 5000, 1}, {"b", 15_000, 2}, {"b", 30_000, 4},
		{"b", 10_000, 8}, // touches [5000,10000) and [15000,20000): bridges them
		{"c", -20_000, 1}, {"c", -17_000, 2},
	}
	want := map[string][]window.Result[string, []int64]{
		"a": {{Key: "a", Window: window.Window{Start: 0, End: 13_000}, Value: []int64{0, 3000, 8000}},
			{Key: "a", Window: window.Window{Start: 13_001, End: 18_001}, Value: []int64{13_001}}},
		"b": {{Key: "b", Window: window.Window{Start: 5000, End: 20_000}, Value: []int64{5000, 15_000, 10_000}},
			{Key: "b", Window: window.Window{Start: 30_000, End: 35_000}, Value: []int64{30_000}}},
		"c": {{Key: "c", Window: window.Window{Start: -20_000, End: -12_000}, Value: []int64{-20_000, -17_000}}},
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "src", in, eagerBounded(time.Minute))
	ks := weir.KeyBy(src, evKey)
	gap := window.Session(5 * time.Second)
	procOut := weir.Collect(window.Process(ks, "process", gap, func(k string, w window.Window, elems []ev, emit func(window.Result[string, []int64])) error {
		var tss []int64
		for _, e := range elems {
			tss = append(tss, e.TS)
		}
		slices.Sort(tss)
		emit(window.Result[string, []int64]{Key: k, Window: w, Value: tss})
		return nil
	}))
	redOut := weir.Collect(window.ReduceKeyed(ks, "reduce", gap, sumEv))
	aggOut := weir.Collect(window.AggregateKeyed(ks, "aggregate", gap, window.AggregateFuncs[ev, int64, int64]{
		CreateFn: func() int64 { return 0 },
		AddFn:    func(e ev, acc int64) int64 { return acc + e.N },
		ResultFn: func(acc int64) int64 { return acc },
		MergeFn:  func(a, b int64) int64 { return a + b },
	}))
	run(t, env)

	got := map[string][]window.Result[string, []int64]{}
	for _, r := range procOut.Records() {
		if r.Timestamp != r.Value.Window.MaxTimestamp() {
			t.Fatalf("timestamp %d for %v", r.Timestamp, r.Value.Window)
		}
		got[r.Value.Key] = append(got[r.Value.Key], r.Value)
	}
	for k, ws := range want {
		for i := range ws {
			slices.Sort(ws[i].Value)
		}
		if len(got[k]) != len(ws) {
			t.Fatalf("key %s: %v, want %v", k, got[k], ws)
		}
		for i := range ws {
			if got[k][i].Window != ws[i].Window || !slices.Equal(got[k][i].Value, ws[i].Value) {
				t.Fatalf("key %s: %v, want %v", k, got[k], ws)
			}
		}
	}
	sums := map[window.Window]int64{}
	for _, e := range in {
		for _, ws := range want {
			for _, w := range ws {
				if w.Key == e.Key && w.Window.Contains(e.TS) {
					sums[w.Window] += e.N
				}
			}
		}
	}
	if n := len(redOut.Records()); n != 5 {
		t.Fatalf("reduce: %d results, want 5", n)
	}
	for _, r := range redOut.Records() {
		if sums[r.Value.Window] != r.Value.Value.N {
			t.Fatalf("reduce %v: %d, want %d", r.Value.Window, r.Value.Value.N, sums[r.Value.Window])
		}
	}
	if n := len(aggOut.Records()); n != 5 {
		t.Fatalf("aggregate: %d results, want 5", n)
	}
	for _, r := range aggOut.Records() {
		if sums[r.Value.Window] != r.Value.Value {
			t.Fatalf("aggregate %v: %d, want %d", r.Value.Window, r.Value.Value, sums[r.Value.Window])
		}
	}
}

// TestSessionFiresWhenWatermarkPasses: a session fires when the watermark
// passes the end of the merged window, not the end of a window merged into
// it (the merged windows' timers are deleted, I6).
func TestSessionFiresWhenWatermarkPasses(t *testing.T) {
	f := newFeed[ev]()
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSource(env, "feed", runtime.Source[ev](f), eagerBounded(0))
	ks := weir.KeyBy(src, evKey)
	out := sinkTo(window.ReduceKeyed(ks, "sessions", window.Session(10*time.Millisecond), sumEv))
	_, stop := weirtest.Start(t, env)
	defer stop()
	sawWM := func(wm int64) func() bool {
		return func() bool {
			return slices.ContainsFunc(out.entries(), func(e entry[window.Result[string, ev]]) bool { return e.IsWM && e.Watermark == wm })
		}
	}
	// [100,110) then 105 extends it to [100,115); the other key moves the
	// watermark to 111 (past the first window's end, not the merged one's).
	f.push(rec("s", 100, 1), rec("s", 105, 2), rec("t", 112, 0))
	weirtest.Eventually(t, "watermark 111", sawWM(111))
	for _, r := range out.records() {
		if r.Value.Key == "s" {
			t.Fatalf("session fired early: %v", out.entries())
		}
	}
	f.push(rec("t", 115, 0))
	weirtest.Eventually(t, "watermark 114", sawWM(114))
	var sRes []window.Result[string, ev]
	for _, r := range out.records() {
		if r.Value.Key == "s" {
			sRes = append(sRes, r.Value)
		}
	}
	if len(sRes) != 1 || sRes[0].Window != (window.Window{Start: 100, End: 115}) || sRes[0].Value.N != 3 {
		t.Fatalf("session results %v", sRes)
	}
}

// TestAllowedLateness: records within the allowed lateness re-fire their
// window with the updated result (I3); records after the cleanup time go
// to the side output and are counted (I4), and state is gone (I5).
func TestAllowedLateness(t *testing.T) {
	in := []ev{
		{"a", 1000, 1}, {"a", 2000, 1},
		{"a", 10_000, 1}, // watermark 9999: [0,10000) fires with 2
		{"a", 3000, 1},   // late but the window is not gone: re-fire with 3
		{"a", 14_000, 1}, // watermark 13999
		{"a", 4000, 1},   // re-fire with 4
		{"a", 15_000, 1}, // watermark 14999 = cleanup of [0,10000)
		{"a", 5000, 1},   // too late: side output
		{"b", 9000, 1},   // too late for a key with no window at all
	}
	late := weir.NewOutputTag[ev]("late")
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "src", in, eagerBounded(0))
	win := window.ReduceKeyed(weir.KeyBy(src, evKey), "win", window.Tumbling(10*time.Second), sumEv,
		window.AllowedLateness(5*time.Second), window.LateOutput(late))
	out := weir.Collect(win)
	lateOut := weir.Collect(weir.SideOutput(win, late))
	run(t, env)

	var got []string
	for _, r := range out.Records() {
		if r.Timestamp != r.Value.Window.MaxTimestamp() {
			t.Fatalf("timestamp %d for %v", r.Timestamp, r.Value.Window)
		}
		got = append(got, r.Value.Key+r.Value.Window.String()+"="+string(rune('0'+r.Value.Value.N)))
	}
	want := []string{"a[0, 10000)=2", "a[0, 10000)=3", "a[0, 10000)=4", "a[10000, 20000)=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	lr := lateOut.Records()
	if len(lr) != 2 || lr[0].Value != in[7] || lr[0].Timestamp != 5000 || lr[1].Value != in[8] {
		t.Fatalf("late output %v", lr)
	}
	if d, l := env.Metrics().Sum("win", window.CounterLateDropped), env.Metrics().Sum("win", window.CounterLateOutput); d != 2 || l != 2 {
		t.Fatalf("lateRecordsDropped %d, lateRecords %d; want 2 and 2", d, l)
	}
}

// TestLateWithoutSideOutput: without LateOutput, late records are counted
// only; with lateness 0 the window takes nothing after it fired.
func TestLateWithoutSideOutput(t *testing.T) {
	in := []ev{{"a", 1000, 1}, {"a", 10_000, 1}, {"a", 9999, 1}, {"a", 9998, 1}, {"a", 10_001, 1}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "src", in, eagerBounded(0))
	out := weir.Collect(window.ReduceKeyed(weir.KeyBy(src, evKey), "win", window.Tumbling(10*time.Second), sumEv))
	run(t, env)
	recs := out.Records()
	if len(recs) != 2 || recs[0].Value.Value.N != 1 || recs[1].Value.Value.N != 2 {
		t.Fatalf("results %v", recs)
	}
	if d, l := env.Metrics().Sum("win", window.CounterLateDropped), env.Metrics().Sum("win", window.CounterLateOutput); d != 2 || l != 0 {
		t.Fatalf("lateRecordsDropped %d, lateRecords %d; want 2 and 0", d, l)
	}
}

// TestNegativeTimestampsEndToEnd: windows before the epoch are computed
// with a floor modulo (I1).
func TestNegativeTimestampsEndToEnd(t *testing.T) {
	in := []ev{{"a", -5001, 1}, {"a", -5000, 2}, {"a", -1, 4}, {"a", 0, 8}, {"a", -10_000, 16}, {"a", -10_001, 32}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "src", in, eagerBounded(time.Minute))
	out := weir.Collect(window.ReduceKeyed(weir.KeyBy(src, evKey), "win", window.Tumbling(5*time.Second), sumEv))
	run(t, env)
	got := map[window.Window]int64{}
	for _, r := range out.Records() {
		got[r.Value.Window] = r.Value.Value.N
	}
	want := map[window.Window]int64{
		{Start: -15_000, End: -10_000}: 32,
		{Start: -10_000, End: -5000}:   1 + 16,
		{Start: -5000, End: 0}:         2 + 4,
		{Start: 0, End: 5000}:          8,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for w, n := range want {
		if got[w] != n {
			t.Fatalf("got %v want %v", got, want)
		}
	}
}

// TestProcessingTimeTumbling drives processing time with a manual clock:
// records join the window of the clock's time when they are processed, and
// the window fires when the clock passes its end (I1, I2).
func TestProcessingTimeTumbling(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(100_000))
	f := newFeed[ev]()
	// Unchained, so that the window operator's recordsIn counter (counted
	// per batch it has processed) tells when the records are in.
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk, DisableChaining: true})
	src := weir.FromSource(env, "feed", runtime.Source[ev](f), watermark.NoWatermarks[ev]())
	out := sinkTo(window.ReduceKeyed(weir.KeyBy(src, evKey), "win", window.TumblingProcessing(time.Second), sumEv))
	_, stop := weirtest.Start(t, env)
	defer stop()
	processed := func(n int64) func() bool {
		return func() bool { return env.Metrics().Sum("win", "recordsIn") >= n }
	}
	// Event timestamps are irrelevant to processing-time windows.
	f.push(rec("a", -7, 1), rec("b", 999_999, 2), rec("a", 5, 4))
	weirtest.Eventually(t, "3 records in", processed(3))
	if n := len(out.records()); n != 0 {
		t.Fatalf("fired before the clock moved: %v", out.entries())
	}
	clk.Advance(999 * time.Millisecond) // 100.999: MaxTimestamp of [100000, 101000)
	weirtest.Eventually(t, "2 results", func() bool { return len(out.records()) == 2 })
	got := map[string]window.Result[string, ev]{}
	for _, r := range out.records() {
		got[r.Value.Key] = r.Value
		if r.Timestamp != 100_999 {
			t.Fatalf("timestamp %d", r.Timestamp)
		}
	}
	w := window.Window{Start: 100_000, End: 101_000}
	if got["a"].Window != w || got["a"].Value.N != 5 || got["b"].Window != w || got["b"].Value.N != 2 {
		t.Fatalf("results %v", got)
	}
	// The next window: [101000, 102000) after the clock moved on.
	clk.Advance(time.Millisecond)
	f.push(rec("a", 0, 8))
	weirtest.Eventually(t, "4 records in", processed(4))
	clk.Advance(5 * time.Second)
	weirtest.Eventually(t, "3 results", func() bool { return len(out.records()) == 3 })
	last := out.records()[2]
	if last.Value.Window != (window.Window{Start: 101_000, End: 102_000}) || last.Value.Value.N != 8 {
		t.Fatalf("last result %+v", last)
	}
}

// TestProcessingTimeSessions: processing-time sessions merge while records
// keep coming within the gap, and fire once the clock passes the merged
// end (I6).
func TestProcessingTimeSessions(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(50_000))
	f := newFeed[ev]()
	// Unchained, so that the window operator's recordsIn counter (counted
	// per batch it has processed) tells when the records are in.
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk, DisableChaining: true})
	src := weir.FromSource(env, "feed", runtime.Source[ev](f), watermark.NoWatermarks[ev]())
	out := sinkTo(window.ReduceKeyed(weir.KeyBy(src, evKey), "win", window.SessionProcessing(time.Second), sumEv))
	_, stop := weirtest.Start(t, env)
	defer stop()
	processed := func(n int64) func() bool {
		return func() bool { return env.Metrics().Sum("win", "recordsIn") >= n }
	}
	f.push(rec("a", 0, 1))
	weirtest.Eventually(t, "1 record in", processed(1))
	clk.Advance(600 * time.Millisecond) // 50.600: [50000, 51000) is still open
	f.push(rec("a", 0, 2))
	weirtest.Eventually(t, "2 records in", processed(2))
	// Past the first window's end (50.999): its timer was deleted when it
	// merged, so nothing may fire; a wrong early result would come first.
	clk.Advance(600 * time.Millisecond)
	clk.Advance(400 * time.Millisecond) // 51.600 >= 51.599: the session fires
	weirtest.Eventually(t, "1 result", func() bool { return len(out.records()) >= 1 })
	r := out.records()[0]
	if r.Value.Window != (window.Window{Start: 50_000, End: 51_600}) || r.Value.Value.N != 3 || r.Timestamp != 51_599 {
		t.Fatalf("result %+v", r)
	}
}

// TestProcessingTimeEndOfInput: processing-time windows still open when a
// bounded input ends fire then (I8).
func TestProcessingTimeEndOfInput(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(7_000))
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Clock: clk})
	in := []ev{{"a", 0, 1}, {"b", 0, 2}, {"a", 0, 4}, {"c", 0, 8}}
	src := weir.FromSlice(env, "src", in, watermark.NoWatermarks[ev]().WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true }))
	out := weir.Collect(window.AggregateKeyed(weir.KeyBy(src, evKey), "win", window.TumblingProcessing(time.Minute),
		window.AggregateFuncs[ev, int64, int64]{AddFn: func(e ev, acc int64) int64 { return acc + e.N }, ResultFn: func(a int64) int64 { return a }}))
	run(t, env)
	got := map[string]int64{}
	for _, r := range out.Records() {
		if r.Value.Window != (window.Window{Start: 0, End: 60_000}) || r.Timestamp != 59_999 {
			t.Fatalf("result %+v", r)
		}
		got[r.Value.Key] = r.Value.Value
	}
	if len(got) != 3 || got["a"] != 5 || got["b"] != 2 || got["c"] != 8 {
		t.Fatalf("results %v", got)
	}
}

// TestProcessFunctionError: an error from the window function fails the
// job and names the operator.
func TestProcessFunctionError(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "src", []ev{{"a", 1, 1}}, eagerBounded(0))
	boom := errors.New("boom")
	weir.Collect(window.Process(weir.KeyBy(src, evKey), "failing", window.Tumbling(time.Second),
		func(string, window.Window, []ev, func(int)) error { return boom }))
	err := env.Execute(context.Background())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "failing") {
		t.Fatalf("err = %v", err)
	}
}

// TestNoTimestamp: an event-time window rejects records without a
// timestamp with a clear error.
func TestNoTimestamp(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "src", []ev{{"a", 1, 1}}, eagerBounded(0))
	stripped := weir.Process(weir.KeyBy(src, evKey), "strip", func() weir.KeyedProcessFunction[string, ev, ev] {
		return weir.ProcessFuncs[string, ev, ev]{ElementFn: func(e ev, c *weir.KeyedContext[string, ev]) error {
			c.CollectAt(e, runtime.NoTimestamp)
			return nil
		}}
	})
	weir.Collect(window.Reduce(weir.KeyBy(stripped, evKey), "win", window.Tumbling(time.Second), sumEv))
	if err := env.Execute(context.Background()); !errors.Is(err, window.ErrNoTimestamp) {
		t.Fatalf("err = %v", err)
	}
}

func TestBuildTimeChecks(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{})
	ks := weir.KeyBy(weir.FromSlice(env, "src", []ev{}, eagerBounded(0)), evKey)
	for _, c := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"late tag type", func() {
			window.Reduce(ks, "w", window.Tumbling(time.Second), sumEv, window.LateOutput(weir.NewOutputTag[int]("x")))
		}, "LateOutput tag"},
		{"nil assigner", func() { window.Reduce(ks, "w", nil, sumEv) }, "nil Assigner"},
		{"nil reduce", func() { window.Reduce(ks, "w", window.Tumbling(time.Second), nil) }, "nil function"},
		{"session without merge", func() {
			window.Aggregate(ks, "w", window.Session(time.Second), window.AggregateFuncs[ev, int64, int64]{
				AddFn: func(e ev, a int64) int64 { return a }, ResultFn: func(a int64) int64 { return a }})
		}, "MergeFn"},
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
