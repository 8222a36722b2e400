package runtime

import "github.com/weirproject/weir/watermark"

type twoInputImpl[IN1, IN2, OUT any] struct {
	newOp func() TwoInputOperator[IN1, IN2, OUT]
}

func (m *twoInputImpl[IN1, IN2, OUT]) instantiate(ctx *Context, out any, sides []control) (instance, error) {
	x := &twoInputInstance[IN1, IN2, OUT]{op: m.newOp(), ctx: ctx, out: mainOutput[OUT](out, sides)}
	x.both = watermark.NewCombiner(2, opWatermarks{x.ctx, x.op.ProcessWatermark, idleStatus(ctx, x.op, x.op.ProcessIdle), newWatermarkGauge(ctx)})
	return x, nil
}

// twoInputInstance is a subtask of a two-input operator. Each input's
// channels are combined by their own watermark.Combiner, and the two
// results by a third: the same mechanism at both levels.
type twoInputInstance[IN1, IN2, OUT any] struct {
	op   TwoInputOperator[IN1, IN2, OUT]
	ctx  *Context
	out  Output[OUT]
	both *watermark.Combiner
}

func (x *twoInputInstance[IN1, IN2, OUT]) name() string      { return x.ctx.Name }
func (x *twoInputInstance[IN1, IN2, OUT]) context() *Context { return x.ctx }
func (x *twoInputInstance[IN1, IN2, OUT]) parts() []any      { return []any{x.op} }
func (x *twoInputInstance[IN1, IN2, OUT]) open() error       { return x.op.Open(x.ctx, x.out) }
func (x *twoInputInstance[IN1, IN2, OUT]) close() error      { return x.op.Close() }
func (x *twoInputInstance[IN1, IN2, OUT]) endInput() error   { return nil }
func (x *twoInputInstance[IN1, IN2, OUT]) input(i int) any {
	panic("runtime: a two-input operator is never chained to its producer")
}

// opWatermarks delivers a combined watermark to an operator.
type opWatermarks struct {
	ctx  *Context
	wm   func(int64) error
	idle func(bool) error
	g    *Gauge // MetricWatermark
}

func (o opWatermarks) EmitWatermark(ts int64) {
	if o.ctx.task.err != nil {
		return // I9
	}
	o.g.Set(ts)
	if err := o.wm(ts); err != nil {
		o.ctx.task.fail(o.ctx.Name, err)
	}
}
func (o opWatermarks) MarkIdle() {
	if o.ctx.task.err != nil {
		return // I9
	}
	if err := o.idle(true); err != nil {
		o.ctx.task.fail(o.ctx.Name, err)
	}
}
func (o opWatermarks) MarkActive() {
	if o.ctx.task.err != nil {
		return // I9
	}
	if err := o.idle(false); err != nil {
		o.ctx.task.fail(o.ctx.Name, err)
	}
}

// sideOf feeds one input's combined watermark into the two-input combiner.
type sideOf struct {
	c *watermark.Combiner
	i int
}

func (s sideOf) EmitWatermark(ts int64) { s.c.Watermark(s.i, ts) }
func (s sideOf) MarkIdle()              { s.c.Idle(s.i) }
func (s sideOf) MarkActive()            { s.c.Active(s.i) }

type recordsTo[T any] struct {
	ctx     *Context
	process func(Record[T]) error
}

func (r recordsTo[T]) Collect(rec Record[T]) {
	if r.ctx.task.err != nil {
		return // I9
	}
	if err := r.process(rec); err != nil {
		r.ctx.task.fail(r.ctx.Name, err)
	}
}
func (r recordsTo[T]) EmitWatermark(int64) {}
func (r recordsTo[T]) EmitIdle(bool)       {}

func (x *twoInputInstance[IN1, IN2, OUT]) run(t *task) error {
	g1 := t.gates[0].(*gate[IN1])
	g2 := t.gates[1].(*gate[IN2])
	in1 := newInputStateTo[IN1](t, g1, recordsTo[IN1]{x.ctx, x.op.ProcessRecord1}, sideOf{x.both, 0})
	in2 := newInputStateTo[IN2](t, g2, recordsTo[IN2]{x.ctx, x.op.ProcessRecord2}, sideOf{x.both, 1})
	done1, done2 := false, false
	inbox1, inbox2 := g1.inbox, g2.inbox
	for !done1 || !done2 {
		var b1 batch[IN1]
		var b2 batch[IN2]
		got1, got2 := false, false
		select {
		case b1 = <-inbox1:
			got1 = true
		case b2 = <-inbox2:
			got2 = true
		case <-t.mailbox.wake:
			t.runLetters()
		case <-t.timers.C():
			t.fireTimers()
		case <-t.done:
			return errCancelled
		default:
			t.flushAll()
			select {
			case b1 = <-inbox1:
				got1 = true
			case b2 = <-inbox2:
				got2 = true
			case <-t.mailbox.wake:
				t.runLetters()
			case <-t.timers.C():
				t.fireTimers()
			case <-t.done:
				return errCancelled
			}
		}
		if got1 {
			in1.handle(b1)
		}
		if got2 {
			in2.handle(b2)
		}
		// Either input may have ended in any step: a batch of a channel
		// blocked by an alignment is stashed and handled when the
		// alignment completes, which a barrier on the other input (or a
		// letter) can do.
		if in1.finished() && !done1 {
			done1, inbox1 = true, nil
			if err := x.op.EndInput(1); err != nil {
				t.fail(x.ctx.Name, err)
			}
		}
		if in2.finished() && !done2 {
			done2, inbox2 = true, nil
			if err := x.op.EndInput(2); err != nil {
				t.fail(x.ctx.Name, err)
			}
		}
		if t.err != nil {
			return t.err
		}
	}
	return nil
}
