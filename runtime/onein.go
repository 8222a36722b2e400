package runtime

import (
	"github.com/weirproject/weir/watermark"
)

func mainOutput[OUT any](out any, sides []control) Output[OUT] {
	var o Output[OUT] = discard[OUT]{}
	if out != nil {
		o = out.(Output[OUT])
	}
	if len(sides) > 0 {
		return withSides[OUT]{main: o, sides: sides}
	}
	return o
}

type oneInputImpl[IN, OUT any] struct {
	newOp func() OneInputOperator[IN, OUT]
}

func (m *oneInputImpl[IN, OUT]) instantiate(ctx *Context, out any, sides []control) (instance, error) {
	x := &oneInputInstance[IN, OUT]{op: m.newOp(), ctx: ctx, out: mainOutput[OUT](out, sides),
		recordsIn: ctx.task.job.cfg.Metrics.counter(ctx.Name, ctx.Subtask, "recordsIn"),
		wm:        newWatermarkGauge(ctx)}
	x.ref, _ = x.op.(RecordRefProcessor[IN])
	x.idle = idleStatus(ctx, x.op, x.op.ProcessIdle)
	return x, nil
}

// MetricWatermark is the gauge of every operator subtask holding its
// current watermark: for a source the combined watermark of its splits,
// for any other operator the combined watermark of its inputs, set when it
// arrives, before the operator processes it (watermark.Min until the
// first).
const MetricWatermark = "watermark"

func newWatermarkGauge(ctx *Context) *Gauge {
	g := ctx.Gauge(MetricWatermark)
	g.Set(watermark.Min)
	return g
}

// oneInputInstance is a subtask of a one-input operator. It is the
// Output[IN] of whatever feeds it (a chained operator, or its own task
// loop), and the watermark.Output of the combiner over its channels.
type oneInputInstance[IN, OUT any] struct {
	op        OneInputOperator[IN, OUT]
	ref       RecordRefProcessor[IN] // op, if it takes records by pointer
	ctx       *Context
	out       Output[OUT]
	recordsIn *Counter
	wm        *Gauge // MetricWatermark
	// idle passes the input's status to the operator (idlehold.go).
	idle func(bool) error
	// unpublished counts records received through Collect (chained) not
	// yet added to recordsIn.
	unpublished int64
	ended       bool
	pos         int // index in the task's chain, for panic reports
}

func (x *oneInputInstance[IN, OUT]) setPos(i int) { x.pos = i }

func (x *oneInputInstance[IN, OUT]) name() string      { return x.ctx.Name }
func (x *oneInputInstance[IN, OUT]) context() *Context { return x.ctx }
func (x *oneInputInstance[IN, OUT]) parts() []any      { return []any{x.op} }
func (x *oneInputInstance[IN, OUT]) open() error       { return x.op.Open(x.ctx, x.out) }
func (x *oneInputInstance[IN, OUT]) close() error      { return x.op.Close() }
func (x *oneInputInstance[IN, OUT]) input(int) any     { return Output[IN](x) }
func (x *oneInputInstance[IN, OUT]) endInput() error {
	if x.ended {
		return nil
	}
	x.ended = true
	return x.op.EndInput()
}

func (x *oneInputInstance[IN, OUT]) Collect(r Record[IN]) {
	t := x.ctx.task
	if t.err != nil {
		return // the subtask has failed: nothing more flows (I9)
	}
	prev := t.current
	t.current = x.pos
	x.unpublished++
	if err := x.op.ProcessRecord(r); err != nil {
		t.fail(x.ctx.Name, err)
	}
	t.current = prev
}

// collectRef is Collect with the record passed by pointer (refOutput), for
// an operator that takes it so (RecordRefProcessor).
func (x *oneInputInstance[IN, OUT]) collectRef(r *Record[IN]) {
	if x.ref == nil {
		x.Collect(*r)
		return
	}
	t := x.ctx.task
	if t.err != nil {
		return // as in Collect (I9)
	}
	prev := t.current
	t.current = x.pos
	x.unpublished++
	if err := x.ref.ProcessRecordRef(r); err != nil {
		t.fail(x.ctx.Name, err)
	}
	t.current = prev
}

// takesRef reports whether collectRef saves a copy (refOutputOf).
func (x *oneInputInstance[IN, OUT]) takesRef() bool { return x.ref != nil }

// publish adds the records counted since the last call to the shared
// counter (chained operators count without atomics per record).
func (x *oneInputInstance[IN, OUT]) publish() {
	if x.unpublished > 0 {
		x.recordsIn.Add(x.unpublished)
		x.unpublished = 0
	}
}

func (x *oneInputInstance[IN, OUT]) EmitWatermark(ts int64) {
	if x.ctx.task.err != nil {
		return // I9
	}
	x.wm.Set(ts)
	if err := x.op.ProcessWatermark(ts); err != nil {
		x.ctx.task.fail(x.ctx.Name, err)
	}
}

func (x *oneInputInstance[IN, OUT]) EmitIdle(idle bool) {
	if x.ctx.task.err != nil {
		return // I9
	}
	if err := x.idle(idle); err != nil {
		x.ctx.task.fail(x.ctx.Name, err)
	}
}

// MarkIdle and MarkActive make the instance a watermark.Output.
func (x *oneInputInstance[IN, OUT]) MarkIdle()   { x.EmitIdle(true) }
func (x *oneInputInstance[IN, OUT]) MarkActive() { x.EmitIdle(false) }

// run is the loop of a task headed by a one-input operator.
func (x *oneInputInstance[IN, OUT]) run(t *task) error {
	g := t.gates[0].(*gate[IN])
	in := newInputState[IN](t, g, x)
	for !in.finished() {
		var b batch[IN]
		select {
		case b = <-g.inbox:
		case <-t.mailbox.wake:
			t.runLetters()
			goto check
		case <-t.timers.C():
			t.fireTimers()
			goto check
		case <-t.done:
			return errCancelled
		default:
			t.flushAll()
			select {
			case b = <-g.inbox:
			case <-t.mailbox.wake:
				t.runLetters()
				goto check
			case <-t.timers.C():
				t.fireTimers()
				goto check
			case <-t.done:
				return errCancelled
			}
		}
		in.handle(b)
	check:
		if t.err != nil {
			return t.err
		}
	}
	return x.endInput()
}

// inputState processes the batches of one gate: records to the operator,
// control elements to the channel combiner, end-of-input counting.
type inputState[T any] struct {
	g      *gate[T]
	to     Output[T]
	valve  *watermark.Combiner
	ended  []bool
	nEnded int
	align  *aligner
	ag     *alignGate
	stash  []batch[T] // batches of blocked channels, in arrival order
	// sel, for an input of an operator that selects its inputs
	// (InputSelectable), is its selection; q holds its batches received
	// and not finished, resuming guards resume (selection.go). nil
	// otherwise: handle processes a batch at once, as a whole.
	sel      *inputSel
	q        []queued[T]
	resuming bool
}

// valveOut receives the combined watermark of an input.
type valveOut interface {
	EmitWatermark(ts int64)
	MarkIdle()
	MarkActive()
}

func newInputState[T any](t *task, g *gate[T], to interface {
	Output[T]
	valveOut
}) *inputState[T] {
	return newInputStateTo[T](t, g, to, to)
}

func newInputStateTo[T any](t *task, g *gate[T], to Output[T], wm valveOut) *inputState[T] {
	n := len(g.free)
	s := &inputState[T]{g: g, to: to, valve: watermark.NewCombiner(n, wm), ended: make([]bool, n), align: &t.align}
	s.ag = t.align.addGate(n, s.drain)
	return s
}

// drain processes the stashed batches of channels that are no longer
// blocked (a batch of a channel blocked again is stashed again).
func (s *inputState[T]) drain() {
	if len(s.stash) == 0 {
		return
	}
	old := s.stash
	s.stash = nil
	for _, b := range old {
		s.handle(b)
	}
}

func (s *inputState[T]) finished() bool { return s.nEnded == len(s.ended) }

func (s *inputState[T]) handle(b batch[T]) {
	if s.ag.blocked[b.ch] {
		s.stash = append(s.stash, b)
		return
	}
	recs := b.recs
	to := s.to
	if x, ok := to.(interface {
		collectAllInKeyGroups([]Record[T], []int32) bool
	}); ok && b.kgs != nil && x.collectAllInKeyGroups(recs, b.kgs) {
		// done: the operator took the key groups the writer computed
	} else if x, ok := to.(interface{ collectAll([]Record[T]) }); ok {
		x.collectAll(recs)
	} else {
		for i := range recs {
			to.Collect(recs[i])
		}
	}
	s.g.release(b)
	s.control(b)
}

// collectAllInKeyGroups is collectAll for a batch of a key-by edge with the
// key group of each record, for an operator that takes them
// (KeyGroupProcessor). It reports false, having done nothing, if the
// operator does not.
func (x *oneInputInstance[IN, OUT]) collectAllInKeyGroups(recs []Record[IN], kgs []int32) bool {
	op, ok := x.op.(KeyGroupProcessor[IN])
	if !ok {
		return false
	}
	t := x.ctx.task
	for i := range recs {
		if t.err != nil {
			// This operator, or one chained behind it, failed the
			// subtask: the rest of the batch is not processed (I9).
			t.current = -1
			return true
		}
		t.current = x.pos
		if err := op.ProcessRecordInKeyGroup(recs[i], int(kgs[i])); err != nil {
			t.fail(x.ctx.Name, err)
			return true
		}
	}
	t.current = -1
	x.recordsIn.Add(int64(len(recs)))
	return true
}

// collectAll hands a whole batch to the operator (one interface call per
// record instead of two): a channel's batch, or a source's run
// (allOutput).
func (x *oneInputInstance[IN, OUT]) collectAll(recs []Record[IN]) {
	op, ref, t := x.op, x.ref, x.ctx.task
	prev := t.current
	t.current = x.pos // the operators chained after it restore it
	for i := range recs {
		if t.err != nil {
			t.current = prev
			return // as in collectAllInKeyGroups (I9)
		}
		var err error
		if ref != nil {
			err = ref.ProcessRecordRef(&recs[i])
		} else {
			err = op.ProcessRecord(recs[i])
		}
		if err != nil {
			t.fail(x.ctx.Name, err)
			t.current = prev
			return
		}
	}
	t.current = prev
	x.unpublished += int64(len(recs))
}
