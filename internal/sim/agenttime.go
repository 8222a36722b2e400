package sim

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/weirproject/weir/clock"
)

// agentTime is the agent branch's virtual time. The job runs on the run's
// manual clock (world.clk), and the operator measures ActionTimeout on it
// (clock.WithTimeout), so a hung or late model call costs no real time: it
// registers the time its action's deadline is due at the latest (now +
// the time-out: the action started at or before now) and waits for its
// context; the clock moves there once every running action of the attempt
// is such a call (running == blocked), the discrete-event rule: time
// advances only when nothing could happen before it. Other calls take no
// virtual time (their latencies, Spec's DelayMicros, are real), so an
// action that is not blocked never sees its deadline pass because another
// one hung. The clock moves to the earliest due time; the woken calls'
// actions end, and the next advance waits for quiescence again.
//
// Not deterministic: an action the operator has dispatched but that has
// not started yet (not counted in running) when the clock moves starts
// with a deadline in the past, and times out; S10 allows it (the action
// records that it saw its deadline pass). The checkpoint barriers' clock
// steps (Spec.ClockSteps, with ProcDelayMS) move the clock too, and time
// out every action running then, the same way.
type agentTime struct {
	mu struct {
		sync.Mutex
		clk      *clock.Manual
		running  int         // actions between their start and their end
		blocked  int         // of them, those waiting for virtual time
		due      []time.Time // when each blocked call's deadline has passed
		advances int         // moves of the clock, for the report
	}
}

// setClock gives the run's clock to the agent branch.
func (t *agentTime) setClock(c *clock.Manual) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.clk = c
}

// actionStarted and actionEnded bracket every run of the agent's action.
func (t *agentTime) actionStarted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.running++
}

func (t *agentTime) actionEnded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.running--
	t.maybeAdvanceLocked()
}

// waitDeadline blocks a call that answers only after its action's
// time-out (a hang, or a late answer) until ctx is done: at the action's
// deadline, once virtual time reaches it, or at cancellation.
func (t *agentTime) waitDeadline(ctx context.Context, timeout time.Duration) {
	t.mu.Lock()
	if t.mu.clk == nil {
		t.mu.Unlock()
		<-ctx.Done()
		return
	}
	at := t.mu.clk.Now().Add(timeout)
	t.mu.blocked++
	t.mu.due = append(t.mu.due, at)
	t.maybeAdvanceLocked()
	t.mu.Unlock()

	<-ctx.Done()

	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.blocked--
	if i := slices.IndexFunc(t.mu.due, at.Equal); i >= 0 {
		t.mu.due = slices.Delete(t.mu.due, i, i+1)
	}
}

// maybeAdvanceLocked moves the clock to the earliest due time still
// ahead when every running action waits for virtual time. Manual.Set only
// sends on the timers' channels of one, so it does not block under mu.
func (t *agentTime) maybeAdvanceLocked() {
	if t.mu.clk == nil || t.mu.running == 0 || t.mu.blocked < t.mu.running {
		return
	}
	now := t.mu.clk.Now()
	var next time.Time
	for _, at := range t.mu.due {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if !next.IsZero() {
		t.mu.clk.Set(next)
		t.mu.advances++
	}
}

func (t *agentTime) advances() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.advances
}
