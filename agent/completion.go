package agent

import (
	"fmt"

	"github.com/weirproject/weir/runtime"

	"go.opentelemetry.io/otel/trace"
)

// completion is one finished action run, handed from its goroutine to the
// subtask goroutine.
//
// Completions are recycled by the subtask goroutine once applied (an
// action must not use its RunnerContext after it returns), so a run
// allocates nothing of the operator's own in the steady state.
type completion[K comparable, IN any] struct {
	ks   *keyState[K, IN]
	rc   *RunnerContext
	err  error
	next *completion[K, IN] // links the completion stack
	// replayed says the run was a completed one replayed from the store.
	replayed bool
	// parent is the input's span (tracing on, the input sampled).
	parent trace.Span
	rcMem  RunnerContext // rc points here
	sent   [2]Event      // initial storage of rc.sent
}

// Next implements completions.Linked.
func (c *completion[K, IN]) Next() **completion[K, IN] { return &c.next }

// push hands c to the subtask goroutine: completions pile up on a
// lock-free stack, and the first one on an empty stack posts the letter
// that drains it.
func (o *operator[K, IN, OUT]) push(c *completion[K, IN]) {
	if o.completed.Push(c) {
		o.mb.Post(o.letter)
	}
}

// drain applies every completion on the stack, in completion order, then
// starts waiting inputs and releases watermarks.
func (o *operator[K, IN, OUT]) drain() {
	for c := o.completed.TakeAll(); c != nil; {
		if o.err != nil {
			return
		}
		next, ks := c.next, c.ks
		o.apply(c)
		o.recycle(c)
		o.step(ks)
		c = next
	}
	o.fillSlots()
	o.release()
	o.gauges()
}

// apply commits a finished action run on the subtask goroutine: memory
// writes, then its events in the order sent (outputs leave at once with
// the input's timestamp, others queue the actions listening to them):
// G4, in one step.
func (o *operator[K, IN, OUT]) apply(c *completion[K, IN]) {
	ks, rc := c.ks, c.rc
	r := ks.run
	if d := rc.durable; d != nil && d.storeErr != nil {
		// The store cannot record: going on would repeat side effects
		// after a restore, ContinueOnError or not.
		o.cErrors.Inc()
		o.fail(fmt.Errorf("agent: action %q of key %v (input %d): the action-state store failed: %w",
			rc.action.Name, ks.key, r.seq, d.storeErr))
		return
	}
	if len(rc.waits) > 0 {
		o.endWaits(ks, rc.waits)
	}
	if c.err != nil {
		o.cErrors.Inc()
		err := fmt.Errorf("agent: action %q failed for key %v (input %d, event %d %q): %w",
			rc.action.Name, ks.key, r.seq, rc.ev.ID, rc.ev.Type, c.err)
		if !o.opts.ContinueOnError {
			o.fail(fmt.Errorf("%w; fix the action, or set agent.Options.ContinueOnError to skip failed actions", err))
			return
		}
		o.logger.Warn("agent: action failed; skipping it", "err", err)
		o.sendFailed(ks.key, r, rc.action, rc.ev, c.err)
	} else {
		if o.elog != nil {
			o.logApplied(c)
		}
		updates := o.applyShort(ks, rc.short.writes)
		r.sensory = applyWrites(r.sensory, rc.sensory.writes)
		for i := range rc.sent {
			ev := &rc.sent[i]
			ev.ID, ev.Parent, ev.Action = r.nextID, rc.ev.ID, rc.action.Name
			r.nextID++
			if ev.Type == TypeOutput {
				if err := o.emit(ev, r.ts); err != nil {
					o.fail(fmt.Errorf("agent: action %q of key %v: %w", rc.action.Name, ks.key, err))
					return
				}
				continue
			}
			// The completion is recycled: the event moves to the heap.
			e := new(Event)
			*e = *ev
			o.addTasks(ks.key, r, e)
		}
		for _, u := range updates {
			e := &Event{Type: TypeMemoryUpdated, Value: u, ID: r.nextID, Parent: rc.ev.ID, Action: rc.action.Name}
			r.nextID++
			o.cMemEvent.Inc()
			o.addTasks(ks.key, r, e)
		}
	}
	o.cActions.Inc()
	r.popTask()
}

func (o *operator[K, IN, OUT]) emit(ev *Event, ts int64) error {
	var v OUT
	if o.outEvent {
		v = any(*ev).(OUT)
	} else {
		var err error
		v, err = convert[OUT](ev.Value, "the output", "", "")
		if err != nil {
			return err
		}
	}
	o.Out.Collect(runtime.Record[OUT]{Value: v, Timestamp: ts})
	return nil
}
