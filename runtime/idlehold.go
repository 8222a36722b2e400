package runtime

// Idle hold-back: the runtime's one rule for operators that keep output for
// later (invariant I8 in the package documentation).
//
// An idle input leaves a consumer's minimum: the consumer's watermark may
// then move past everything this input has not sent yet (another input
// ending, for example). That is right for a producer with nothing pending,
// and wrong for one that holds records or event-time timers it will emit,
// later, above the watermark it has forwarded: those records would arrive
// late at a consumer that never saw a watermark pass them. So while an
// operator reports that it holds such output, the runtime keeps an idle
// status of its input from it; the operator (and so its output) stays
// active at its last watermark, and downstream keeps waiting for it.
//
// Invariants:
//
//	H1. The operator sees "idle" only while its input is idle and Holds
//	    reports false; it sees "active" only after it saw "idle".
//	H2. A withheld idle status is delivered as soon as the operator holds
//	    nothing any more while its input is still idle: checked after every
//	    mailbox letter and processing-time callback the task runs (a timer
//	    may have been deleted), never per record.
//	H3. An operator that does not implement Holder sees every change of its
//	    input's status, as before (operators that queue the status behind
//	    their own pending output, like async I/O and the agent operator,
//	    order it themselves).

// Holder is implemented by an operator that can hold output for later:
// records it buffers (an event-time sort) or event-time timers that emit
// when the watermark passes them (windows, keyed process functions). Holds
// reports whether it holds any now. The runtime calls it from the subtask's
// goroutine when the operator's input goes idle and after mailbox letters
// and processing-time callbacks while an idle status is withheld; it must
// be cheap (a length, not a scan).
type Holder interface {
	Holds() bool
}

// idleGate stands between an input's combined status and an operator that
// implements Holder (H1, H2).
type idleGate struct {
	name     string // the operator's, for failures
	h        Holder
	deliver  func(idle bool) error
	withheld bool // the input is idle, the operator was not told
}

// status takes the input's new status.
func (g *idleGate) status(idle bool) error {
	if idle {
		if g.h.Holds() {
			g.withheld = true
			return nil
		}
		return g.deliver(true)
	}
	if g.withheld {
		g.withheld = false // the operator never saw the input idle
		return nil
	}
	return g.deliver(false)
}

// recheck delivers a withheld idle status once the operator holds nothing.
func (g *idleGate) recheck() error {
	if g.withheld && !g.h.Holds() {
		g.withheld = false
		return g.deliver(true)
	}
	return nil
}

// idleStatus returns the function that passes an input's status to an
// operator: deliver itself, or, for a Holder, a gate the task rechecks
// (H2) in front of it.
func idleStatus(ctx *Context, op any, deliver func(bool) error) func(bool) error {
	h, ok := op.(Holder)
	if !ok {
		return deliver
	}
	g := &idleGate{name: ctx.Name, h: h, deliver: deliver}
	ctx.task.idleGates = append(ctx.task.idleGates, g)
	return g.status
}

// recheckIdle runs H2 for the task's gates, after letters and timers ran.
func (t *task) recheckIdle() {
	for _, g := range t.idleGates {
		if err := g.recheck(); err != nil {
			t.fail(g.name, err)
		}
	}
}

// runLetters runs the queued mailbox letters, then H2.
func (t *task) runLetters() {
	t.mailbox.runAll()
	t.recheckIdle()
}

// fireTimers runs the due processing-time callbacks, then H2.
func (t *task) fireTimers() {
	t.timers.fire()
	t.recheckIdle()
}
