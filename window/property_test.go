package window_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/window"
)

// model is a brute-force simulation of event-time windows with the
// default trigger, written from the rules (doc I1-I5) rather than from the
// operator: per record it finds the windows containing the timestamp by
// enumeration, skips gone windows, re-fires allowed-late ones; per
// watermark it fires windows in MaxTimestamp order and drops those past
// cleanup.
type model struct {
	starts   func(ts int64) []int64 // starts of the windows containing ts
	size     int64
	lateness int64
	sums     map[string]map[int64]int64 // key -> window start -> sum
	out      map[string][]string        // key -> emissions in order
	late     []ev
}

func (m *model) emit(key string, start, sum int64) {
	m.out[key] = append(m.out[key], fmt.Sprintf("[%d,%d)=%d@%d", start, start+m.size, sum, start+m.size-1))
}

func (m *model) record(e ev, wm int64) {
	taken := false
	for _, s := range m.starts(e.TS) {
		maxTs := s + m.size - 1
		if maxTs+m.lateness <= wm {
			continue
		}
		taken = true
		if m.sums[e.Key] == nil {
			m.sums[e.Key] = map[int64]int64{}
		}
		m.sums[e.Key][s] += e.N
		if maxTs <= wm {
			m.emit(e.Key, s, m.sums[e.Key][s])
		}
	}
	if !taken && e.TS+m.lateness <= wm {
		m.late = append(m.late, e)
	}
}

func (m *model) advance(from, to int64) {
	for key, ws := range m.sums {
		var due []int64
		for s := range ws {
			if maxTs := s + m.size - 1; maxTs > from && maxTs <= to {
				due = append(due, s)
			}
		}
		slices.Sort(due)
		for _, s := range due {
			m.emit(key, s, ws[s])
		}
		for s := range ws {
			if c := s + m.size - 1 + m.lateness; c <= to {
				delete(ws, s)
			}
		}
	}
}

// simulate runs the model over in with the watermarks of eagerBounded(b).
func simulate(in []ev, b int64, m *model) {
	m.sums, m.out = map[string]map[int64]int64{}, map[string][]string{}
	wm, maxTs := int64(math.MinInt64), int64(math.MinInt64)
	for _, e := range in {
		m.record(e, wm)
		maxTs = max(maxTs, e.TS)
		if next := maxTs - b - 1; next > wm {
			m.advance(wm, next)
			wm = next
		}
	}
	m.advance(wm, math.MaxInt64)
}

func alignedStarts(size, slide, offset int64) func(int64) []int64 {
	return func(ts int64) []int64 {
		var out []int64
		// Every aligned start in (ts - size, ts], latest first.
		for s := ts; s > ts-size; s-- {
			if ((s-offset)%slide+slide)%slide == 0 {
				out = append(out, s)
			}
		}
		return out
	}
}

// TestWindowsMatchModel: for random keys, timestamps (with disorder beyond
// the watermark bound, so that records are late), bounds, lateness,
// window shapes and parallelism, tumbling and sliding window results,
// their order per key, the late side output and the late counters equal
// the brute-force model.
func TestWindowsMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nKeys := rapid.IntRange(1, 4).Draw(rt, "keys")
		n := rapid.IntRange(0, 60).Draw(rt, "records")
		var in []ev
		for range n {
			in = append(in, ev{
				Key: string(rune('a' + rapid.IntRange(0, nKeys-1).Draw(rt, "key"))),
				TS:  rapid.Int64Range(-120, 120).Draw(rt, "ts"),
				N:   rapid.Int64Range(1, 9).Draw(rt, "n"),
			})
		}
		bound := rapid.Int64Range(0, 40).Draw(rt, "bound")
		lateness := rapid.Int64Range(0, 30).Draw(rt, "lateness")
		size := rapid.Int64Range(1, 40).Draw(rt, "size")
		offset := rapid.Int64Range(-(size-1), size-1).Draw(rt, "offset")
		slSize := rapid.Int64Range(1, 40).Draw(rt, "slidingSize")
		slide := rapid.Int64Range(1, 40).Draw(rt, "slide")
		par := rapid.IntRange(1, 2).Draw(rt, "parallelism")
		ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

		env := weir.NewEnvironment(weir.Config{Parallelism: par, AutoWatermarkInterval: -1})
		src := weir.FromSlice(env, "src", in, eagerBounded(ms(bound))).Parallelism(1)
		ks := weir.KeyBy(src, evKey)
		type job struct {
			name  string
			a     window.Assigner
			m     *model
			out   *weir.Collected[window.Result[string, ev]]
			late  *weir.Collected[ev]
			slide int64
			opts  []window.Option
		}
		// The -trigger runs set EventTimeTrigger explicitly: the general
		// trigger path must give exactly the default path's output.
		explicit := []window.Option{window.WithTrigger(window.EventTimeTrigger())}
		runs := []*job{
			{name: "tumbling", a: window.TumblingWithOffset(ms(size), ms(offset)),
				m: &model{starts: alignedStarts(size, size, offset), size: size, lateness: lateness}},
			{name: "sliding", a: window.Sliding(ms(slSize), ms(slide)),
				m: &model{starts: alignedStarts(slSize, slide, 0), size: slSize, lateness: lateness}},
			{name: "tumbling-trigger", a: window.TumblingWithOffset(ms(size), ms(offset)), opts: explicit,
				m: &model{starts: alignedStarts(size, size, offset), size: size, lateness: lateness}},
			{name: "sliding-trigger", a: window.Sliding(ms(slSize), ms(slide)), opts: explicit,
				m: &model{starts: alignedStarts(slSize, slide, 0), size: slSize, lateness: lateness}},
		}
		for _, r := range runs {
			tag := weir.NewOutputTag[ev]("late-" + r.name)
			opts := append([]window.Option{window.AllowedLateness(ms(lateness)), window.LateOutput(tag)}, r.opts...)
			s := window.ReduceKeyed(ks, r.name, r.a, sumEv, opts...)
			r.out = weir.Collect(s)
			r.late = weir.Collect(weir.SideOutput(s, tag))
		}
		run(rt, env)

		for _, r := range runs {
			simulate(in, bound, r.m)
			got := map[string][]string{}
			for _, rec := range r.out.Records() {
				v := rec.Value
				got[v.Key] = append(got[v.Key], fmt.Sprintf("[%d,%d)=%d@%d", v.Window.Start, v.Window.End, v.Value.N, rec.Timestamp))
			}
			for k := range r.m.out {
				if !slices.Equal(got[k], r.m.out[k]) {
					rt.Fatalf("%s key %s:\n got %v\nwant %v", r.name, k, got[k], r.m.out[k])
				}
			}
			for k := range got {
				if _, ok := r.m.out[k]; !ok {
					rt.Fatalf("%s key %s: unexpected results %v", r.name, k, got[k])
				}
			}
			gotLate := r.late.Values()
			cmp := func(a, b ev) int {
				if a.TS != b.TS {
					return int(a.TS - b.TS)
				}
				if a.Key != b.Key {
					if a.Key < b.Key {
						return -1
					}
					return 1
				}
				return int(a.N - b.N)
			}
			slices.SortFunc(gotLate, cmp)
			wantLate := slices.Clone(r.m.late)
			slices.SortFunc(wantLate, cmp)
			if !slices.Equal(gotLate, wantLate) {
				rt.Fatalf("%s late:\n got %v\nwant %v", r.name, gotLate, wantLate)
			}
			dropped := env.Metrics().Sum(r.name, window.CounterLateDropped)
			sideOut := env.Metrics().Sum(r.name, window.CounterLateOutput)
			if dropped != int64(len(wantLate)) || sideOut != int64(len(wantLate)) {
				rt.Fatalf("%s: counters %d/%d, want %d", r.name, dropped, sideOut, len(wantLate))
			}
		}
	})
}

// TestSessionsMatchModel: with every record on time (the watermark bound
// exceeds the time span), the sessions of a key are the runs of its sorted
// timestamps whose consecutive gaps are at most the session gap, whatever
// the arrival order (I6). Reduce, Aggregate and Process agree with it.
func TestSessionsMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		gap := rapid.Int64Range(1, 30).Draw(rt, "gap")
		n := rapid.IntRange(0, 50).Draw(rt, "records")
		par := rapid.IntRange(1, 2).Draw(rt, "parallelism")
		var in []ev
		for range n {
			in = append(in, ev{
				Key: string(rune('a' + rapid.IntRange(0, 2).Draw(rt, "key"))),
				TS:  rapid.Int64Range(-150, 150).Draw(rt, "ts"),
				N:   rapid.Int64Range(1, 9).Draw(rt, "n"),
			})
		}
		want := map[string][]string{}
		byKey := map[string][]ev{}
		for _, e := range in {
			byKey[e.Key] = append(byKey[e.Key], e)
		}
		for k, es := range byKey {
			slices.SortFunc(es, func(a, b ev) int { return int(a.TS - b.TS) })
			start, last, sum := es[0].TS, es[0].TS, int64(0)
			for i, e := range es {
				if i > 0 && e.TS-last > gap {
					want[k] = append(want[k], fmt.Sprintf("[%d,%d)=%d", start, last+gap, sum))
					start, sum = e.TS, 0
				}
				last = e.TS
				sum += e.N
			}
			want[k] = append(want[k], fmt.Sprintf("[%d,%d)=%d", start, last+gap, sum))
		}

		env := weir.NewEnvironment(weir.Config{Parallelism: par, AutoWatermarkInterval: -1})
		ks := weir.KeyBy(weir.FromSlice(env, "src", in, eagerBounded(time.Hour)).Parallelism(1), evKey)
		a := window.Session(time.Duration(gap) * time.Millisecond)
		red := weir.Collect(window.ReduceKeyed(ks, "reduce", a, sumEv))
		agg := weir.Collect(window.AggregateKeyed(ks, "aggregate", a, window.AggregateFuncs[ev, int64, int64]{
			AddFn: func(e ev, acc int64) int64 { return acc + e.N }, ResultFn: func(acc int64) int64 { return acc },
			MergeFn: func(x, y int64) int64 { return x + y }}))
		proc := weir.Collect(window.Process(ks, "process", a, func(k string, w window.Window, es []ev, emit func(window.Result[string, int64])) error {
			var s int64
			for _, e := range es {
				if !w.Contains(e.TS) {
					return fmt.Errorf("record %v outside its session %v", e, w)
				}
				s += e.N
			}
			emit(window.Result[string, int64]{Key: k, Window: w, Value: s})
			return nil
		}))
		// The general trigger path (OnMerge) and evicting contents (merged
		// record lists, an Aggregate without MergeFn) must agree too.
		redTrig := weir.Collect(window.ReduceKeyed(ks, "reduce-trigger", a, sumEv, window.WithTrigger(window.EventTimeTrigger())))
		aggEvict := weir.Collect(window.AggregateKeyed(ks, "aggregate-evictor", a, window.AggregateFuncs[ev, int64, int64]{
			AddFn: func(e ev, acc int64) int64 { return acc + e.N }, ResultFn: func(acc int64) int64 { return acc }},
			window.WithEvictor(window.CountEvictor(1<<20))))
		run(rt, env)
		check := func(name string, got map[string][]string) {
			for k := range want {
				if !slices.Equal(got[k], want[k]) {
					rt.Fatalf("%s key %s:\n got %v\nwant %v", name, k, got[k], want[k])
				}
			}
			if len(got) != len(want) {
				rt.Fatalf("%s: keys %v, want %v", name, got, want)
			}
		}
		format := func(w window.Window, v int64) string { return fmt.Sprintf("[%d,%d)=%d", w.Start, w.End, v) }
		gotRed, gotAgg, gotProc := map[string][]string{}, map[string][]string{}, map[string][]string{}
		for _, r := range red.Values() {
			gotRed[r.Key] = append(gotRed[r.Key], format(r.Window, r.Value.N))
		}
		for _, r := range agg.Values() {
			gotAgg[r.Key] = append(gotAgg[r.Key], format(r.Window, r.Value))
		}
		for _, r := range proc.Values() {
			gotProc[r.Key] = append(gotProc[r.Key], format(r.Window, r.Value))
		}
		gotRedTrig, gotAggEvict := map[string][]string{}, map[string][]string{}
		for _, r := range redTrig.Values() {
			gotRedTrig[r.Key] = append(gotRedTrig[r.Key], format(r.Window, r.Value.N))
		}
		for _, r := range aggEvict.Values() {
			gotAggEvict[r.Key] = append(gotAggEvict[r.Key], format(r.Window, r.Value))
		}
		check("reduce-trigger", gotRedTrig)
		check("aggregate-evictor", gotAggEvict)
		check("reduce", gotRed)
		check("aggregate", gotAgg)
		check("process", gotProc)
	})
}
