package watermark

import (
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

type record struct{ ts int64 }

func newSplits(t *testing.T, s Strategy[record]) (*Splits[record], *recorder, *clock.Manual) {
	t.Helper()
	r := &recorder{}
	clk := clock.NewManual(epoch)
	return NewSplits(s, clk, r), r, clk
}

// I14, seed example: a source subtask's watermark is the minimum over its
// partitions. Partition 0 has seen up to 12:05:30, partition 2 up to
// 12:04:00; with bound L the subtask's watermark is 12:04:00 - L - 1.
func TestSplitsSubtaskWatermarkIsMinimumOfPartitions(t *testing.T) {
	const L = 10 * time.Second
	s, r, _ := newSplits(t, ForBoundedOutOfOrderness[record](L))
	s.Add(0)
	s.Add(2) // ids may be sparse
	for _, ts := range []int64{at(12, 5, 0, 0), at(12, 5, 30, 0), at(12, 5, 10, 0)} {
		s.OnEvent(0, record{ts}, ts)
	}
	for _, ts := range []int64{at(12, 3, 0, 0), at(12, 4, 0, 0)} {
		s.OnEvent(2, record{ts}, ts)
	}
	r.expect(t, "records alone emit nothing")
	s.OnPeriodicEmit()
	want := at(12, 4, 0, 0) - L.Milliseconds() - 1
	r.expect(t, "periodic emit", wm(want))
	if s.Current() != want {
		t.Fatalf("Current = %d, want %d", s.Current(), want)
	}
	if got, ok := s.SplitWatermark(0); !ok || got != at(12, 5, 30, 0)-L.Milliseconds()-1 {
		t.Fatalf("SplitWatermark(0) = %d, %v", got, ok)
	}
}

// I14: one periodic emit reports the combined result once, even when
// applying the splits one after another would raise the output twice.
func TestSplitsPeriodicEmitCombinedOnce(t *testing.T) {
	s, r, _ := newSplits(t, ForMonotonous[record]())
	for id := range 3 {
		s.Add(id)
		s.OnEvent(id, record{}, int64(100*(id+1)))
	}
	s.OnPeriodicEmit()
	r.expect(t, "first tick", wm(99))
	s.OnEvent(0, record{}, 500) // split 0 alone would lift the output to 199,
	s.OnEvent(1, record{}, 600) // then split 1 to 299
	s.OnPeriodicEmit()
	r.expect(t, "second tick", wm(299))
}

// I14, seed example with splits: an idle partition stops holding the
// subtask's watermark and holds it again once it has caught up.
func TestSplitsIdlePartitionLeavesAndRejoins(t *testing.T) {
	s, r, clk := newSplits(t, ForMonotonous[record]().WithIdleness(time.Second))
	s.Add(0)
	s.Add(1)
	s.OnEvent(0, record{}, 1000)
	s.OnEvent(1, record{}, 500)
	s.OnPeriodicEmit()
	r.expect(t, "both active", wm(499))

	// Only partition 0 gets records; partition 1 goes idle after the time-out.
	ts := int64(1000)
	tick := func() {
		ts += 1000
		s.OnEvent(0, record{}, ts)
		clk.Advance(200 * time.Millisecond)
		s.OnPeriodicEmit()
	}
	tick() // partition 1's stopwatch starts here
	for range 5 {
		tick() // up to exactly 1s of silence
	}
	r.expect(t, "partition 1 not idle yet")
	if s.SplitIdle(1) {
		t.Fatal("partition 1 idle at exactly the time-out")
	}
	tick()
	r.expect(t, "partition 1 idle: output follows partition 0", wm(ts-1))
	if !s.SplitIdle(1) || s.IsIdle() {
		t.Fatalf("SplitIdle(1)=%v IsIdle=%v", s.SplitIdle(1), s.IsIdle())
	}

	// Partition 1 returns behind the output: it does not hold it back.
	s.OnEvent(1, record{}, 600)
	tick()
	r.expect(t, "partition 1 back but behind", wm(ts-1))

	// Partition 1 catches up beyond the output: it holds the minimum again.
	catchUp := ts + 1500
	s.OnEvent(1, record{}, catchUp)
	tick() // output ts-1 < catchUp-1: partition 0 is the minimum
	r.expect(t, "caught up", wm(ts-1))
	tick()
	tick()
	r.expect(t, "partition 1 holds", wm(catchUp-1))
}

// I15: SetIdle overrides the generator; the generator's progress meanwhile
// is applied when the split is set active again.
func TestSplitsSetIdleExternal(t *testing.T) {
	s, r, _ := newSplits(t, ForMonotonous[record]())
	s.Add(0)
	s.Add(1)
	s.OnEvent(0, record{}, 1000)
	s.OnEvent(1, record{}, 500)
	s.OnPeriodicEmit()
	r.expect(t, "start", wm(499))

	s.SetIdle(1, true) // e.g. partition 1 caught up with its end offset
	r.expect(t, "partition 1 leaves the minimum", wm(999))
	s.OnEvent(1, record{}, 5000)
	s.OnEvent(0, record{}, 2000)
	s.OnPeriodicEmit()
	r.expect(t, "partition 1 still idle despite its generator", wm(1999))
	if !s.SplitIdle(1) {
		t.Fatal("split 1 not idle")
	}

	s.SetIdle(1, false)
	r.expect(t, "back with 4999, above the output: no change yet")
	if got, _ := s.SplitWatermark(1); got != 4999 {
		t.Fatalf("SplitWatermark(1) = %d, want 4999 (remembered)", got)
	}
	s.OnEvent(0, record{}, 9000)
	s.OnPeriodicEmit()
	r.expect(t, "partition 1 holds again", wm(4999))

	// All partitions idle: the output flushes to the highest and goes idle.
	s.SetIdle(0, true)
	s.SetIdle(1, true)
	r.expect(t, "all idle", wm(8999), "idle")
	s.OnPeriodicEmit()
	r.expect(t, "still idle")
	s.SetIdle(0, false)
	r.expect(t, "one back", "active")
}

// I9: a new split holds the subtask where it is until it passes it; a
// removed split stops holding.
func TestSplitsAddAndRemove(t *testing.T) {
	s, r, _ := newSplits(t, ForMonotonous[record]())
	s.Add(0)
	s.Add(1)
	s.OnEvent(0, record{}, 1000)
	s.OnEvent(1, record{}, 500)
	s.OnPeriodicEmit()
	r.expect(t, "start", wm(499))

	s.Remove(1)
	r.expect(t, "finished split released", wm(999))
	if s.Has(1) || s.Len() != 1 {
		t.Fatalf("Has(1)=%v Len=%d", s.Has(1), s.Len())
	}
	s.Remove(1) // unknown: no-op

	s.Add(7)
	s.OnEvent(0, record{}, 3000)
	s.OnPeriodicEmit()
	r.expect(t, "new split 7 at Min holds the output")
	s.OnEvent(7, record{}, 2000)
	s.OnPeriodicEmit()
	r.expect(t, "split 7 passes the output", wm(1999))
}

// I16: a subtask with no splits goes idle, and the first split revives it.
func TestSplitsWithoutSplitsIsIdle(t *testing.T) {
	s, r, _ := newSplits(t, ForMonotonous[record]())
	s.OnPeriodicEmit()
	r.expect(t, "no splits", "idle")
	s.OnPeriodicEmit()
	r.expect(t, "still none")
	s.Add(3)
	r.expect(t, "a split arrives", "active")
	s.OnEvent(3, record{}, 10)
	s.OnPeriodicEmit()
	r.expect(t, "split 3", wm(9))
	s.Remove(3)
	r.expect(t, "last split finished", "idle")
}

// I13 through Splits: PauseAll keeps every split, including one added while
// paused, from going idle; per-split Pause works the same way.
func TestSplitsPauseAll(t *testing.T) {
	s, r, clk := newSplits(t, ForMonotonous[record]().WithIdleness(time.Second))
	s.Add(0)
	s.PauseAll()
	s.Add(1)
	for range 50 {
		s.OnPeriodicEmit()
		clk.Advance(200 * time.Millisecond)
	}
	r.expect(t, "back-pressured for 10s")
	s.ResumeAll()
	s.OnPeriodicEmit()
	clk.Advance(time.Second + time.Millisecond)
	s.OnPeriodicEmit()
	r.expect(t, "after the time-out", "idle")

	s.Pause(0)
	s.OnEvent(0, record{}, 100)
	r.expect(t, "record revives split 0", "active")
	s.OnPeriodicEmit()
	r.expect(t, "split 0 watermark", wm(99))
	clk.Advance(time.Minute)
	s.OnPeriodicEmit()
	s.OnPeriodicEmit()
	r.expect(t, "split 0 paused: not idle")
	s.Resume(0)
	clk.Advance(time.Second + time.Millisecond)
	s.OnPeriodicEmit()
	r.expect(t, "split 0 idle after resuming", "idle")
}

// I14: punctuated watermarks from OnEvent take effect at once.
func TestSplitsPunctuatedImmediate(t *testing.T) {
	s, r, _ := newSplits(t, ForGenerator(func() Generator[record] {
		return Punctuated(func(ev record, ts int64) (int64, bool) { return ev.ts, ev.ts > 0 })
	}))
	s.Add(0)
	s.OnEvent(0, record{ts: 0}, 5)
	s.OnEvent(0, record{ts: 42}, 50)
	r.expect(t, "punctuated", wm(42))
}

// I17: the per-record path allocates nothing.
func TestSplitsOnEventDoesNotAllocate(t *testing.T) {
	s := NewSplits(ForBoundedOutOfOrderness[record](time.Second).WithIdleness(time.Minute),
		clock.NewManual(epoch), &nopOutput{})
	s.Add(0)
	s.Add(5)
	var ts int64
	allocs := testing.AllocsPerRun(1000, func() {
		ts++
		s.OnEvent(5, record{ts}, ts)
		s.OnEvent(0, record{ts}, ts)
	})
	if allocs != 0 {
		t.Fatalf("OnEvent allocates %v per run", allocs)
	}
}

func TestSplitsMisuse(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s: no panic", name)
			}
		}()
		f()
	}
	s, _, _ := newSplits(t, NoWatermarks[record]())
	s.Add(1)
	mustPanic("unknown split", func() { s.OnEvent(0, record{}, 1) })
	mustPanic("out of range", func() { s.OnEvent(99, record{}, 1) })
	mustPanic("negative id", func() { s.Add(-1) })
	mustPanic("added twice", func() { s.Add(1) })
	mustPanic("nil output", func() { NewSplits(NoWatermarks[record](), nil, nil) })
	mustPanic("nil punctuated", func() { Punctuated[record](nil) })
	if _, ok := s.SplitWatermark(5); ok || s.SplitIdle(5) || s.Has(-3) {
		t.Fatal("unknown split reported as registered")
	}
}

// scripted is a generator whose periodic emit the test dictates.
type scripted struct {
	wm       int64
	idle     bool // MarkIdle instead of emitting
	thenIdle bool // emit wm, then MarkIdle
}

func (g *scripted) OnEvent(record, int64, Output) {}

func (g *scripted) OnPeriodicEmit(out Output) {
	if g.idle {
		out.MarkIdle()
		return
	}
	out.EmitWatermark(g.wm)
	if g.thenIdle {
		out.MarkIdle()
	}
}

// I14: the net effect of one tick is reported in the order MarkActive,
// watermark, MarkIdle; I15: SetIdle(false) does not revive a split its
// generator holds idle.
func TestSplitsTickReportsNetStatus(t *testing.T) {
	var gens []*scripted
	s, r, _ := newSplits(t, ForGenerator(func() Generator[record] {
		g := &scripted{}
		gens = append(gens, g)
		return g
	}))
	s.Add(0)
	s.Add(1)
	g0, g1 := gens[0], gens[1]

	g0.wm, g1.wm = 10, 20
	s.OnPeriodicEmit()
	r.expect(t, "both active", wm(10))

	g0.idle, g1.idle = true, true
	s.OnPeriodicEmit()
	r.expect(t, "both go idle in one tick", wm(20), "idle")

	g0.idle, g0.wm = false, 30
	s.OnPeriodicEmit()
	r.expect(t, "split 0 returns ahead of the output", "active", wm(30))

	g0.idle = true
	s.OnPeriodicEmit()
	r.expect(t, "idle again", "idle")

	g0.idle, g0.wm, g0.thenIdle = false, 40, true
	s.OnPeriodicEmit()
	r.expect(t, "idle before and after, advanced in between", "active", wm(40), "idle")

	g0.thenIdle, g0.idle = false, true
	s.SetIdle(0, true)
	s.SetIdle(0, false)
	r.expect(t, "SetIdle(false) on a generator-idle split")
	if !s.SplitIdle(0) || !s.IsIdle() {
		t.Fatalf("SplitIdle(0)=%v IsIdle=%v, want both idle", s.SplitIdle(0), s.IsIdle())
	}
}

// OnEventRef hands a generator that reads only timestamps the timestamp
// alone (the record is never read: here it is nil), also behind
// WithIdleness, which it reactivates; a generator that reads records gets
// the record.
func TestSplitsOnEventRefReadsRecordsOnlyForGeneratorsThatNeedThem(t *testing.T) {
	s, r, clk := newSplits(t, ForMonotonous[record]().WithIdleness(time.Second))
	s.Add(0)
	s.OnEventRef(0, nil, 100)
	s.OnPeriodicEmit()
	r.expect(t, "monotonous, record not read", wm(99))
	clk.Advance(3 * time.Second)
	s.OnPeriodicEmit()
	clk.Advance(3 * time.Second)
	s.OnPeriodicEmit()
	r.expect(t, "idle after the time-out", "idle")
	s.OnEventRef(0, nil, 200)
	s.OnPeriodicEmit()
	r.expect(t, "a record reactivates the split", "active", wm(199))

	p, pr, _ := newSplits(t, ForGenerator(func() Generator[record] {
		return Punctuated(func(e record, ts int64) (int64, bool) { return e.ts - 5, true })
	}))
	p.Add(0)
	p.OnEventRef(0, &record{ts: 50}, 1000)
	pr.expect(t, "punctuated, reads the record", wm(45))
}
