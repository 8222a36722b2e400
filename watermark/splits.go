package watermark

import (
	"fmt"
	"slices"

	"github.com/weirproject/weir/clock"
)

// Splits combines per-split generators inside one source subtask
// (invariants I14-I17). Each split (a Kafka partition, say) gets its own
// generator from the Strategy; their watermarks and idle status feed one
// Combiner, whose output is the subtask's watermark.
//
// Split ids are small non-negative integers chosen by the caller; they may be
// sparse, but the bookkeeping is a slice indexed by id, so they should stay
// small (a partition number, not a hash). OnEvent does one slice lookup and
// no allocation; OnEventRef takes the record by pointer, and copies it only
// for a generator that reads records (not a TimestampGenerator).
//
// A Splits is not safe for concurrent use: it belongs to the source
// subtask's goroutine.
type Splits[T any] struct {
	strategy Strategy[T]
	clk      clock.Clock
	comb     *Combiner
	co       coalescer

	byID      []*splitState[T] // indexed by split id; nil = not registered
	order     []*splitState[T] // live splits in the order they were added
	pausedAll int              // nesting depth of PauseAll
}

// splitState is one split's generator and status. It is the Output its
// generator writes to.
type splitState[T any] struct {
	id   int
	in   int // Combiner input index
	comb *Combiner
	gen  Generator[T]
	tsg  TimestampGenerator    // gen, if it reads only timestamps
	run  RunGenerator          // tsg, if it observes runs of records
	idl  *IdlenessGenerator[T] // gen, if it is wrapped for idleness

	genWm   int64 // highest watermark the generator emitted
	genIdle bool  // the generator marked the split idle
	extIdle bool  // SetIdle(true) is in force
}

// NewSplits returns a Splits that builds each split's generator with
// s.Generator(c) and reports the combined watermark to out. It starts with no
// splits.
func NewSplits[T any](s Strategy[T], c clock.Clock, out Output) *Splits[T] {
	if out == nil {
		panic("watermark: NewSplits with a nil Output")
	}
	sp := &Splits[T]{strategy: s, clk: c}
	sp.co.out = out
	sp.comb = NewCombiner(0, &sp.co)
	return sp
}

// Add registers a split. It starts at Min and active, and takes part in the
// minimum at once (I9): it holds the subtask's watermark where it is until
// its own watermark passes it. It panics if id is negative or already
// registered.
func (s *Splits[T]) Add(split int) {
	if split < 0 {
		panic(fmt.Sprintf("watermark: negative split id %d", split))
	}
	if split >= len(s.byID) {
		s.byID = append(s.byID, make([]*splitState[T], split+1-len(s.byID))...)
	}
	if s.byID[split] != nil {
		panic(fmt.Sprintf("watermark: split %d added twice", split))
	}
	gen := s.strategy.Generator(s.clk)
	st := &splitState[T]{id: split, comb: s.comb, gen: gen, tsg: timestampsOf(gen), genWm: Min}
	st.run, _ = st.tsg.(RunGenerator)
	if ig, ok := gen.(*IdlenessGenerator[T]); ok {
		st.idl = ig
		for range s.pausedAll {
			ig.Pause()
		}
	}
	st.in = s.comb.Add()
	s.byID[split] = st
	s.order = append(s.order, st)
}

// Remove forgets a finished split: it no longer holds the minimum, as if it
// were idle for good. Removing an unknown split does nothing. The id may be
// added again later, as a new split.
func (s *Splits[T]) Remove(split int) {
	st := s.get(split)
	if st == nil {
		return
	}
	s.comb.Remove(st.in)
	s.byID[split] = nil
	s.order = slices.DeleteFunc(s.order, func(x *splitState[T]) bool { return x == st })
}

// Has reports whether split is registered.
func (s *Splits[T]) Has(split int) bool { return s.get(split) != nil }

// OnEvent passes a record of split, with its event timestamp, to the split's
// generator. Punctuated watermarks take effect at once. It panics if the
// split is not registered.
func (s *Splits[T]) OnEvent(split int, event T, ts int64) {
	s.OnEventRef(split, &event, ts)
}

// OnEventRef is OnEvent with the record passed by pointer: a generator that
// reads only timestamps (TimestampGenerator) gets ts alone, any other a
// copy of *event. event is not kept after the call.
func (s *Splits[T]) OnEventRef(split int, event *T, ts int64) {
	var st *splitState[T]
	if uint(split) < uint(len(s.byID)) {
		st = s.byID[split]
	}
	if st == nil {
		panic(fmt.Sprintf("watermark: event for unknown split %d", split))
	}
	if st.tsg != nil {
		st.tsg.OnTimestamp(ts, st)
		return
	}
	st.gen.OnEvent(*event, ts, st)
}

// OnTimestamps passes n records of split, whose highest event timestamp is
// max, to the split's generator at once, if it observes runs of records
// (RunGenerator) and doing so emits nothing and changes no status. It
// reports false, having done nothing, otherwise: the caller then passes
// the records one by one (OnEventRef). It panics if the split is not
// registered.
func (s *Splits[T]) OnTimestamps(split int, max int64, n int) bool {
	st := s.get(split)
	if st == nil {
		panic(fmt.Sprintf("watermark: events for unknown split %d", split))
	}
	return st.run != nil && st.run.OnTimestamps(max, n)
}

// OnPeriodicEmit runs the periodic emit of every split and reports the
// combined result once (I14): at most one watermark reaches the output per
// call, together with the net status change. With no splits at all the output goes
// idle (I16).
func (s *Splits[T]) OnPeriodicEmit() {
	if len(s.order) == 0 {
		s.comb.idleIfEmpty()
		return
	}
	s.co.begin(s.comb.IsIdle())
	for _, st := range s.order {
		st.gen.OnPeriodicEmit(st)
	}
	s.co.end()
}

// SetIdle applies an external idleness decision to a split (I15), for
// example "this Kafka partition has caught up with its end offset". While
// set, the split is idle whatever its generator says; the generator keeps
// running and its latest watermark is applied when the split is set active
// again (unless the generator itself has marked it idle). Unknown splits are
// ignored.
func (s *Splits[T]) SetIdle(split int, idle bool) {
	st := s.get(split)
	if st == nil || st.extIdle == idle {
		return
	}
	st.extIdle = idle
	if idle {
		s.comb.Idle(st.in)
		return
	}
	if !st.genIdle {
		s.comb.Active(st.in)
		s.comb.Watermark(st.in, st.genWm)
	}
}

// Pause stops the idleness stopwatch of split (see IdlenessGenerator.Pause),
// for example while the split is paused for watermark alignment. It does
// nothing if the strategy has no idleness or the split is unknown.
func (s *Splits[T]) Pause(split int) {
	if st := s.get(split); st != nil && st.idl != nil {
		st.idl.Pause()
	}
}

// Resume undoes one Pause of split.
func (s *Splits[T]) Resume(split int) {
	if st := s.get(split); st != nil && st.idl != nil {
		st.idl.Resume()
	}
}

// PauseAll stops the idleness stopwatch of every split, including splits
// added before the matching ResumeAll, for example while the whole source is
// back-pressured. Pauses nest.
func (s *Splits[T]) PauseAll() {
	s.pausedAll++
	for _, st := range s.order {
		if st.idl != nil {
			st.idl.Pause()
		}
	}
}

// ResumeAll undoes one PauseAll. Without a matching PauseAll it does nothing.
func (s *Splits[T]) ResumeAll() {
	if s.pausedAll == 0 {
		return
	}
	s.pausedAll--
	for _, st := range s.order {
		if st.idl != nil {
			st.idl.Resume()
		}
	}
}

// Current returns the subtask's last emitted watermark (Min before any).
func (s *Splits[T]) Current() int64 { return s.comb.Current() }

// IsIdle reports whether the subtask's output is idle.
func (s *Splits[T]) IsIdle() bool { return s.comb.IsIdle() }

// Len returns the number of registered splits.
func (s *Splits[T]) Len() int { return len(s.order) }

// SplitWatermark returns the watermark the combiner holds for split (the
// highest its generator emitted while the split was not externally idle), and
// whether the split is registered.
func (s *Splits[T]) SplitWatermark(split int) (int64, bool) {
	st := s.get(split)
	if st == nil {
		return Min, false
	}
	return s.comb.InputWatermark(st.in), true
}

// SplitIdle reports whether split is idle in the combination (by its
// generator or by SetIdle); an unknown split reports false.
func (s *Splits[T]) SplitIdle(split int) bool {
	st := s.get(split)
	return st != nil && s.comb.InputIdle(st.in)
}

func (s *Splits[T]) get(split int) *splitState[T] {
	if uint(split) < uint(len(s.byID)) {
		return s.byID[split]
	}
	return nil
}

// EmitWatermark implements Output for the split's generator.
func (st *splitState[T]) EmitWatermark(ts int64) {
	st.genIdle = false
	if ts > st.genWm {
		st.genWm = ts
	}
	if !st.extIdle {
		st.comb.Watermark(st.in, ts)
	}
}

// MarkIdle implements Output for the split's generator.
func (st *splitState[T]) MarkIdle() {
	st.genIdle = true
	if !st.extIdle {
		st.comb.Idle(st.in)
	}
}

// MarkActive implements Output for the split's generator.
func (st *splitState[T]) MarkActive() {
	st.genIdle = false
	if !st.extIdle {
		st.comb.Active(st.in)
	}
}

// coalescer sits between a Splits' Combiner and the user's Output. Outside a
// batch it passes every call through; within one (a periodic emit) it
// records the net effect and reports it at the end: MarkActive if the output
// was idle and emits, the final watermark, then MarkIdle if the output ends
// idle, or just the status change.
type coalescer struct {
	out       Output
	batching  bool
	startIdle bool
	idle      bool
	wm        int64
	wmSet     bool
}

func (c *coalescer) EmitWatermark(ts int64) {
	if !c.batching {
		c.out.EmitWatermark(ts)
		return
	}
	c.wm, c.wmSet, c.idle = ts, true, false
}

func (c *coalescer) MarkIdle() {
	if !c.batching {
		c.out.MarkIdle()
		return
	}
	c.idle = true
}

func (c *coalescer) MarkActive() {
	if !c.batching {
		c.out.MarkActive()
		return
	}
	c.idle = false
}

func (c *coalescer) begin(idle bool) {
	c.batching, c.startIdle, c.idle, c.wmSet = true, idle, idle, false
}

func (c *coalescer) end() {
	c.batching = false
	switch {
	case c.wmSet:
		if c.startIdle {
			c.out.MarkActive()
		}
		c.out.EmitWatermark(c.wm)
		if c.idle {
			c.out.MarkIdle()
		}
	case c.idle != c.startIdle:
		if c.idle {
			c.out.MarkIdle()
		} else {
			c.out.MarkActive()
		}
	}
}

// Watermark sets split's watermark directly, as if its generator had
// emitted ts (for readers that know their split's progress, and for
// scripted sources in tests). Unknown splits are ignored.
func (s *Splits[T]) Watermark(split int, ts int64) {
	if st := s.get(split); st != nil {
		st.EmitWatermark(ts)
	}
}
