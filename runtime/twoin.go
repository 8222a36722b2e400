package runtime

import "github.com/weirproject/weir/watermark"

type twoInputImpl[IN1, IN2, OUT any] struct {
	newOp func() TwoInputOperator[IN1, IN2, OUT]
}

func (m *twoInputImpl[IN1, IN2, OUT]) instantiate(ctx *Context, out any, sides []control) (instance, error) {
	x := &twoInputInstance[IN1, IN2, OUT]{op: m.newOp(), ctx: ctx, out: mainOutput[OUT](out, sides)}
	x.sel, _ = x.op.(InputSelectable)
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
	sel  InputSelectable // op, if it selects its inputs (selection.go)
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

// run is the loop of a two-input task. With an operator that selects its
// inputs (InputSelectable) it takes no batch from an input that is not
// selected (a nil channel in the select) and, after every step, goes on
// with the batches a deselection stopped.
func (x *twoInputInstance[IN1, IN2, OUT]) run(t *task) error {
	g1 := t.gates[0].(*gate[IN1])
	g2 := t.gates[1].(*gate[IN2])
	in1 := newInputStateTo[IN1](t, g1, recordsTo[IN1]{x.ctx, x.op.ProcessRecord1}, sideOf{x.both, 0})
	in2 := newInputStateTo[IN2](t, g2, recordsTo[IN2]{x.ctx, x.op.ProcessRecord2}, sideOf{x.both, 1})
	sel := x.sel
	if sel != nil {
		in1.selectBy(&inputSel{t: t, op: sel, input: 1, other: in2.ag})
		in2.selectBy(&inputSel{t: t, op: sel, input: 2, other: in1.ag})
	}
	done1, done2 := false, false
	inbox1, inbox2 := g1.inbox, g2.inbox
	for !done1 || !done2 {
		var b1 batch[IN1]
		var b2 batch[IN2]
		got1, got2 := false, false
		read1, read2 := inbox1, inbox2
		if sel != nil {
			if read1 != nil && !in1.sel.open() {
				read1 = nil
			}
			if read2 != nil && !in2.sel.open() {
				read2 = nil
			}
		}
		select {
		case b1 = <-read1:
			got1 = true
		case b2 = <-read2:
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
			case b1 = <-read1:
				got1 = true
			case b2 = <-read2:
				got2 = true
			case <-t.mailbox.wake:
				t.runLetters()
			case <-t.timers.C():
				t.fireTimers()
			case <-t.done:
				return errCancelled
			}
		}
		if sel == nil {
			if got1 {
				in1.handle(b1)
			}
			if got2 {
				in2.handle(b2)
			}
		} else {
			if got1 {
				in1.handleSel(b1)
			}
			if got2 {
				in2.handleSel(b2)
			}
			// The step may have changed the selection (a letter, a
			// timer, a record of the other input) or ended an
			// alignment: go on with the batches in progress.
			in1.resume()
			in2.resume()
		}
		// Checked after every step, not only after a batch of the input:
		// a batch of a channel blocked by an alignment is stashed and
		// handled when the alignment ends, which a barrier on the other
		// input or a letter (an aborted checkpoint) can do, and the stash
		// may hold the input's last end.
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
