package watermark

import (
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
	"pgregory.net/rapid"
)

// runStrategies are the strategies the run property draws from: those
// whose generators observe runs (bounded, ascending, none, with and without
// idleness) and those that do not (punctuated, a generator reading records).
var runStrategies = []struct {
	name string
	s    Strategy[record]
	runs bool // OnTimestamps may report true
}{
	{"bounded 3ms", ForBoundedOutOfOrderness[record](3 * time.Millisecond), true},
	{"ascending", ForMonotonous[record](), true},
	{"none", NoWatermarks[record](), true},
	{"bounded with idleness", ForBoundedOutOfOrderness[record](2 * time.Millisecond).WithIdleness(2 * time.Second), true},
	{"none with idleness", NoWatermarks[record]().WithIdleness(2 * time.Second), true},
	{"punctuated", ForGenerator(func() Generator[record] {
		return Punctuated(func(_ record, ts int64) (int64, bool) { return ts - 1, ts%3 == 0 })
	}), false},
	{"reads records", ForGenerator(func() Generator[record] {
		return GeneratorFuncs[record]{Event: func(e record, _ int64, out Output) {
			if e.ts%4 == 0 {
				out.EmitWatermark(e.ts - 2)
			}
		}}
	}), false},
}

// A source hands a run of records on before their generator has seen them
// only where OnTimestamps reports true, so Splits fed runs through
// OnTimestamps (one by one where it reports false) must emit exactly what
// Splits fed the same records one by one emits, at every step: the
// watermarks, the idle and active changes, each split's watermark, after
// periodic emits, moves of the clock that make splits idle, and external
// idleness.
func TestSplitsRunsEmitWhatRecordsOneByOneEmit(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := runStrategies[rapid.IntRange(0, len(runStrategies)-1).Draw(rt, "strategy")]
		runR, oneR := &recorder{}, &recorder{}
		runClk, oneClk := clock.NewManual(epoch), clock.NewManual(epoch)
		runS, oneS := NewSplits(st.s, runClk, runR), NewSplits(st.s, oneClk, oneR)
		const nSplits = 3
		for id := range nSplits {
			runS.Add(id)
			oneS.Add(id)
		}
		took := 0
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for step := range steps {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2: // a run of records on one split
				split := rapid.IntRange(0, nSplits-1).Draw(rt, "split")
				tss := rapid.SliceOfN(rapid.Int64Range(-5, 60), 1, 12).Draw(rt, "timestamps")
				if runS.OnTimestamps(split, slices.Max(tss), len(tss)) {
					took++
				} else {
					for _, ts := range tss {
						runS.OnEventRef(split, &record{ts}, ts)
					}
				}
				for _, ts := range tss {
					oneS.OnEventRef(split, &record{ts}, ts)
				}
			case 3:
				runS.OnPeriodicEmit()
				oneS.OnPeriodicEmit()
			case 4: // time passes: idleness may set in at the next emit
				d := time.Duration(rapid.IntRange(1, 4).Draw(rt, "seconds")) * time.Second
				runClk.Advance(d)
				oneClk.Advance(d)
			case 5:
				split, idle := rapid.IntRange(0, nSplits-1).Draw(rt, "split"), rapid.Bool().Draw(rt, "idle")
				runS.SetIdle(split, idle)
				oneS.SetIdle(split, idle)
			}
			if got, want := runR.take(), oneR.take(); !slices.Equal(got, want) {
				rt.Fatalf("%s, step %d: runs emitted %v, records one by one %v", st.name, step, got, want)
			}
			for id := range nSplits {
				gw, gok := runS.SplitWatermark(id)
				ww, wok := oneS.SplitWatermark(id)
				if gw != ww || gok != wok {
					rt.Fatalf("%s, step %d: split %d's watermark %d %v with runs, %d %v one by one", st.name, step, id, gw, gok, ww, wok)
				}
			}
		}
		if !st.runs && took > 0 {
			rt.Fatalf("%s: OnTimestamps took %d runs from a generator that emits from its records", st.name, took)
		}
	})
}

// OnTimestamps takes runs from generators that keep only the highest
// timestamp, and none from an idle split (its first record marks it
// active, a status change the record must precede).
func TestSplitsRunsTakenWhereNothingEmits(t *testing.T) {
	for _, st := range runStrategies {
		t.Run(st.name, func(t *testing.T) {
			s, _, _ := newSplits(t, st.s)
			s.Add(0)
			if got := s.OnTimestamps(0, 10, 4); got != st.runs {
				t.Fatalf("OnTimestamps = %v, want %v", got, st.runs)
			}
		})
	}
	s, r, clk := newSplits(t, ForMonotonous[record]().WithIdleness(time.Second))
	s.Add(0)
	s.OnPeriodicEmit()
	clk.Advance(2 * time.Second)
	s.OnPeriodicEmit()
	s.OnPeriodicEmit()
	if ev := r.take(); !slices.Contains(ev, "idle") {
		t.Fatalf("the split did not go idle: %v", ev)
	}
	if s.OnTimestamps(0, 10, 3) {
		t.Fatal("OnTimestamps took a run on an idle split")
	}
	s.OnEventRef(0, &record{10}, 10)
	if ev := r.take(); !slices.Equal(ev, []string{"active"}) {
		t.Fatalf("after a record: %v, want [active]", ev)
	}
	if !s.OnTimestamps(0, 12, 3) {
		t.Fatal("OnTimestamps refused a run on the active split")
	}
	s.OnPeriodicEmit()
	if ev, want := r.take(), []string{wm(11)}; !slices.Equal(ev, want) {
		t.Fatalf("after the run: %v, want %v", ev, want)
	}
}
