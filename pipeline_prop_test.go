package weir_test

// Property test: random scripted sources through a real pipeline
//
//	union(A, B) -> map -> keyBy -> KeyedProcessFunction (one event-time
//	timer per record timestamp, one output per firing timer)
//	-> KeyedCoProcess with a second scripted stream C -> sink
//
// with an Observer after every stage. Scripts: 1-2 subtasks per source,
// 1-3 splits per subtask, random records, watermark advances, idle and
// active periods and finished splits.
//
// Scripts are built so that no record is legitimately late:
//
//   - a record's timestamp is above its split's last watermark;
//   - every scripted watermark is below HIGH, and a split that has ever been
//     idle emits only timestamps >= HIGH afterwards (above every watermark of
//     the whole script, whatever the interleaving of the subtasks);
//   - split 0 of subtask 0 of source A (the anchor) is never idle and never
//     finished, so every channel after the first exchange stays active (an
//     idle channel that comes back behind the output would make even
//     on-time records of other streams late after an exchange: that is the
//     rejoin rule, not a bug);
//   - every source subtask ends its script at a shared gate, which the test
//     releases only once every observer, and the keyed operator, has
//     received every record that can reach it before the end: the final
//     watermark (Max) of a finished source would otherwise overtake records
//     of a source that was idle (still in a key-by buffer behind a channel
//     that went idle).
//
// Properties: every observer passes Check (watermarks strictly increase,
// no late record) and the status rules, ends at watermark.Max, and every
// input record produces exactly its expected outputs.

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// high is above every scripted watermark.
const high = 1_000_000

type pev struct {
	ID  int
	Key int
}

type fired struct {
	Key int
	TS  int64
	IDs []int
}

type splitGen struct {
	wm       int64 // last scripted watermark; -1 before any
	idle     bool
	everIdle bool
	finished bool
	anchor   bool
}

// genScript draws the script of one source.
func genScript(t *rapid.T, name string, subtasks int, anchor bool, end *weirtest.Gate, nextID *int, recs map[int]weir.Record[pev]) [][]weirtest.Step[pev] {
	out := make([][]weirtest.Step[pev], subtasks)
	for sub := range subtasks {
		nSplits := rapid.IntRange(1, 3).Draw(t, fmt.Sprintf("%s%d-splits", name, sub))
		splits := make([]*splitGen, nSplits)
		for i := range splits {
			splits[i] = &splitGen{wm: -1, anchor: anchor && sub == 0 && i == 0}
		}
		var steps []weirtest.Step[pev]
		// Announce every split (a no-op step that names it), so Script
		// registers it at the start even if the drawn steps never do.
		for i := range splits {
			steps = append(steps, weirtest.ActiveStep[pev](i))
		}
		nSteps := rapid.IntRange(0, 20).Draw(t, fmt.Sprintf("%s%d-steps", name, sub))
		for range nSteps {
			si := rapid.IntRange(0, nSplits-1).Draw(t, "split")
			sp := splits[si]
			if sp.finished {
				continue
			}
			switch k := rapid.IntRange(0, 99).Draw(t, "kind"); {
			case k < 8: // the whole subtask goes idle (but the anchor)
				for i, sp := range splits {
					if !sp.anchor && !sp.idle && !sp.finished {
						sp.idle, sp.everIdle = true, true
						steps = append(steps, weirtest.IdleStep[pev](i))
					}
				}
			case k < 50: // record
				if sp.idle {
					steps = append(steps, weirtest.ActiveStep[pev](si))
					sp.idle = false
				}
				var ts int64
				if sp.everIdle {
					ts = high + rapid.Int64Range(0, 1000).Draw(t, "ts")
				} else {
					ts = sp.wm + 1 + rapid.Int64Range(0, 40).Draw(t, "ts")
				}
				v := pev{ID: *nextID, Key: rapid.IntRange(0, 3).Draw(t, "key")}
				*nextID++
				recs[v.ID] = weir.Record[pev]{Value: v, Timestamp: ts}
				steps = append(steps, weirtest.Rec(si, v, ts))
			case k < 72: // watermark (also while idle: applied when active)
				sp.wm += rapid.Int64Range(1, 40).Draw(t, "advance")
				steps = append(steps, weirtest.WM[pev](si, sp.wm))
			case k < 87: // idle
				if !sp.anchor && !sp.idle {
					sp.idle, sp.everIdle = true, true
					steps = append(steps, weirtest.IdleStep[pev](si))
				}
			case k < 97: // active
				if sp.idle {
					sp.idle = false
					steps = append(steps, weirtest.ActiveStep[pev](si))
				}
			default: // finish
				if !sp.anchor {
					sp.finished = true
					steps = append(steps, weirtest.FinishStep[pev](si))
				}
			}
		}
		steps = append(steps, weirtest.PauseOn[pev](end))
		out[sub] = steps
	}
	return out
}

func TestPipelineProperties(t *testing.T) {
	// Each round is rapid's default number of checks (100, -rapid.checks);
	// a job takes about a millisecond (a few with -race).
	rounds := 5
	if testing.Short() {
		rounds = 1
	}
	for r := range rounds {
		t.Run(fmt.Sprint("round", r), func(t *testing.T) { rapid.Check(t, pipelineProperty) })
	}
}

func pipelineProperty(t *rapid.T) {
	par := rapid.IntRange(1, 3).Draw(t, "parallelism")
	nA := rapid.IntRange(1, 2).Draw(t, "A-subtasks")
	nB := rapid.IntRange(1, 2).Draw(t, "B-subtasks")
	nC := rapid.IntRange(1, 2).Draw(t, "C-subtasks")
	chaining := rapid.Bool().Draw(t, "chaining")
	end := weirtest.NewGate()
	nextID := 0
	recsA, recsB, recsC := map[int]weir.Record[pev]{}, map[int]weir.Record[pev]{}, map[int]weir.Record[pev]{}
	scriptA := genScript(t, "A", nA, true, end, &nextID, recsA)
	scriptB := genScript(t, "B", nB, false, end, &nextID, recsB)
	scriptC := genScript(t, "C", nC, false, end, &nextID, recsC)

	env := weir.NewEnvironment(weir.Config{Parallelism: par, AutoWatermarkInterval: -1,
		DisableChaining: !chaining, BufferSize: 8, BuffersPerChannel: 2})
	none := watermark.NoWatermarks[pev]()
	a := weir.FromSource(env, "A", weirtest.Script(scriptA), none).Parallelism(nA)
	b := weir.FromSource(env, "B", weirtest.Script(scriptB), none).Parallelism(nB)
	c := weir.FromSource(env, "C", weirtest.Script(scriptC), none).Parallelism(nC)
	obsA := weirtest.ObserveWith(a, weirtest.Options{Name: "obs-A"})
	obsB := weirtest.ObserveWith(b, weirtest.Options{Name: "obs-B"})
	obsC := weirtest.ObserveWith(c, weirtest.Options{Name: "obs-C"})
	u := weir.Union(a, b)
	obsU := weirtest.ObserveWith(u, weirtest.Options{Name: "obs-union"})
	m := weir.Map(u, "map", func(v pev) pev { return v })
	obsM := weirtest.ObserveWith(m, weirtest.Options{Name: "obs-map"})
	key := func(v pev) int { return v.Key }
	// received counts the records the keyed operator has taken: the end
	// gate opens only once it has all of them (a record still in a key-by
	// buffer behind an idle channel would be overtaken by the final
	// watermark of another channel).
	var received atomic.Int64
	proc := weir.Process(weir.KeyBy(m, key), "timers", func() weir.KeyedProcessFunction[int, pev, fired] {
		var pending *state.MapState[int, int64, []int]
		return weir.ProcessFuncs[int, pev, fired]{
			OpenFn: func(ctx *weir.KeyedContext[int, fired]) error {
				pending = state.MustMap[int, int64, []int](ctx.State(), "pending")
				return nil
			},
			ElementFn: func(v pev, ctx *weir.KeyedContext[int, fired]) error {
				received.Add(1)
				if ctx.Timestamp() <= ctx.CurrentWatermark() {
					return fmt.Errorf("record %d at %d is late: watermark %d", v.ID, ctx.Timestamp(), ctx.CurrentWatermark())
				}
				ids, _ := pending.Get(ctx.Timestamp())
				pending.Put(ctx.Timestamp(), append(ids, v.ID))
				ctx.RegisterEventTimeTimer(ctx.Timestamp())
				return nil
			},
			TimerFn: func(ts int64, ctx *weir.KeyedContext[int, fired]) error {
				ids, ok := pending.Get(ts)
				if !ok {
					return fmt.Errorf("timer %d of key %d without records", ts, ctx.Key())
				}
				if ctx.CurrentWatermark() < ts {
					return fmt.Errorf("timer %d fired at watermark %d", ts, ctx.CurrentWatermark())
				}
				pending.Remove(ts)
				ctx.Collect(fired{Key: ctx.Key(), TS: ts, IDs: ids})
				return nil
			},
		}
	})
	obsP := weirtest.ObserveWith(proc, weirtest.Options{Name: "obs-timers"})
	co := weir.KeyedCoProcess(weir.KeyBy(proc, func(f fired) int { return f.Key }), weir.KeyBy(c, key), "join",
		func() weir.KeyedCoProcessFunction[int, fired, pev, []int] { return joinFn{} })
	final := weirtest.ObserveWith(co, weirtest.Options{Name: "obs-final"})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- env.Execute(ctx) }()
	fail := func(err error) {
		cancel()
		<-errc
		t.Fatal(err)
	}
	// Quiescence before the end: every subtask is at the end gate, and
	// every record that can reach an observer before the end has.
	if err := end.WaitArrived(ctx, nA+nB+nC); err != nil {
		fail(err)
	}
	for _, w := range []struct {
		o *weirtest.Observation[pev]
		n int
	}{{obsA, len(recsA)}, {obsB, len(recsB)}, {obsC, len(recsC)}, {obsU, len(recsA) + len(recsB)}, {obsM, len(recsA) + len(recsB)}} {
		if err := w.o.WaitRecords(ctx, w.n); err != nil {
			fail(err)
		}
	}
	if err := final.WaitUntil(ctx, func() bool { return countIDs(final.Values(), recsC) == len(recsC) }); err != nil {
		fail(err)
	}
	for received.Load() < int64(len(recsA)+len(recsB)) {
		if ctx.Err() != nil {
			fail(fmt.Errorf("the keyed operator took %d of %d records", received.Load(), len(recsA)+len(recsB)))
		}
		time.Sleep(time.Millisecond)
	}
	end.Release()
	if err := <-errc; err != nil {
		t.Fatalf("job failed: %v\n%s%s%s%s", err, obsA.Dump(), obsB.Dump(), obsM.Dump(), obsP.Dump())
	}

	for _, o := range []*weirtest.Observation[pev]{obsA, obsB, obsC, obsU, obsM} {
		o.CheckFinal(t)
		statusRules(t, o.StatusViolations())
	}
	obsP.CheckFinal(t)
	statusRules(t, obsP.StatusViolations())
	final.CheckFinal(t)
	statusRules(t, final.StatusViolations())
	if t.Failed() {
		t.Fatalf("\n%s%s%s%s%s%s%s", obsA.Dump(), obsB.Dump(), obsC.Dump(), obsU.Dump(), obsM.Dump(), obsP.Dump(), final.Dump())
	}

	// Conservation: every record once at every stage it reaches.
	all1 := map[int]weir.Record[pev]{}
	for id, r := range recsA {
		all1[id] = r
	}
	for id, r := range recsB {
		all1[id] = r
	}
	exactlyOnce(t, "obs-A", idsOf(obsA.Values()), recsA)
	exactlyOnce(t, "obs-B", idsOf(obsB.Values()), recsB)
	exactlyOnce(t, "obs-C", idsOf(obsC.Values()), recsC)
	exactlyOnce(t, "obs-union", idsOf(obsU.Values()), all1)
	exactlyOnce(t, "obs-map", idsOf(obsM.Values()), all1)
	for _, r := range obsM.Records() {
		if want := all1[r.Value.ID]; r != want {
			t.Fatalf("map changed record %v into %v", want, r)
		}
	}
	// One timer output per distinct (key, timestamp), carrying exactly
	// the records of that key and timestamp, stamped with it.
	var timerIDs []int
	groups := map[[2]int64]bool{}
	for _, r := range obsP.Records() {
		f := r.Value
		if r.Timestamp != f.TS {
			t.Fatalf("timer output %v stamped %d", f, r.Timestamp)
		}
		g := [2]int64{int64(f.Key), f.TS}
		if groups[g] {
			t.Fatalf("two outputs for key %d timestamp %d", f.Key, f.TS)
		}
		groups[g] = true
		for _, id := range f.IDs {
			rec := all1[id]
			if rec.Value.Key != f.Key || rec.Timestamp != f.TS {
				t.Fatalf("record %v reported by the timer of key %d at %d", rec, f.Key, f.TS)
			}
		}
		timerIDs = append(timerIDs, f.IDs...)
	}
	exactlyOnce(t, "obs-timers", timerIDs, all1)
	want := map[[2]int64]bool{}
	for _, r := range all1 {
		want[[2]int64{int64(r.Value.Key), r.Timestamp}] = true
	}
	if len(groups) != len(want) {
		t.Fatalf("%d timer outputs, want %d", len(groups), len(want))
	}
	all := map[int]weir.Record[pev]{}
	for id, r := range all1 {
		all[id] = r
	}
	for id, r := range recsC {
		all[id] = r
	}
	var finalIDs []int
	for _, ids := range final.Values() {
		finalIDs = append(finalIDs, ids...)
	}
	exactlyOnce(t, "obs-final", finalIDs, all)
}

// statusRules reports every violation of the status rules.
func statusRules(t *rapid.T, vs []string) {
	t.Helper()
	for _, v := range vs {
		t.Error(v)
	}
}

// joinFn passes the records of both inputs on, as lists of ids.
type joinFn struct{}

func (joinFn) Open(*weir.KeyedContext[int, []int]) error { return nil }
func (joinFn) ProcessElement1(f fired, ctx *weir.KeyedContext[int, []int]) error {
	if ctx.Key() != f.Key {
		return fmt.Errorf("input 1: record of key %d under key %d", f.Key, ctx.Key())
	}
	ctx.Collect(f.IDs)
	return nil
}
func (joinFn) ProcessElement2(v pev, ctx *weir.KeyedContext[int, []int]) error {
	if ctx.Key() != v.Key {
		return fmt.Errorf("input 2: record of key %d under key %d", v.Key, ctx.Key())
	}
	ctx.Collect([]int{v.ID})
	return nil
}
func (joinFn) OnTimer(int64, *weir.KeyedContext[int, []int]) error { return nil }

func idsOf(vs []pev) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

func countIDs(lists [][]int, of map[int]weir.Record[pev]) int {
	n := 0
	for _, ids := range lists {
		for _, id := range ids {
			if _, ok := of[id]; ok {
				n++
			}
		}
	}
	return n
}

func exactlyOnce(t *rapid.T, stage string, got []int, want map[int]weir.Record[pev]) {
	t.Helper()
	seen := map[int]int{}
	for _, id := range got {
		seen[id]++
	}
	for id, n := range seen {
		if _, ok := want[id]; !ok {
			t.Fatalf("%s: unexpected record %d", stage, id)
		}
		if n != 1 {
			t.Fatalf("%s: record %d %d times", stage, id, n)
		}
	}
	if len(seen) != len(want) {
		var missing []int
		for id := range want {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		slices.Sort(missing)
		t.Fatalf("%s: %d records missing: %v", stage, len(missing), missing)
	}
}
