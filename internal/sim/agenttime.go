package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirproject/weir/clock"
)

// agentTime is the agent branch's virtual time, a discrete-event clock.
// The job runs on the run's manual clock (world.clk): the operator
// measures ActionTimeout on it (clock.WithTimeout), a wait's time-out is a
// processing-time timer on it (agent/answers.go), and so are the runtime's
// flush and watermark ticks. A call that answers only after virtual time
// has passed (a hung or late model call, a wait no answer will end in
// time: agentawait.go) blocks, registering the latest time it can be
// woken at (bound: its action's deadline, its wait's deadline), and waits.
// Other calls take no virtual time (their latencies, Spec's DelayMicros,
// are real).
//
// The clock moves only when every running action of the run is so blocked
// (running == blocked: nothing the simulator drives can happen before
// virtual time moves), and then only to the deadline of the earliest timer
// armed on it (clock.Manual.NextDue), one timer at a time, never past the
// earliest bound of a blocked call. So a timer fires at its own deadline
// and nothing armed fires after a later one: a wait whose time-out timer
// is armed early (at half its time-out, or a millisecond before its
// deadline) fires then, and the wait sees the clock before its deadline;
// the simulator does not move the clock to a deadline it computed itself.
// A blocked call whose wake-up is not armed yet when the run falls quiet
// (a wait registers its timer on the subtask goroutine after it has asked)
// is waited for (clock.Manual.AwaitDue of its bound); once the clock has
// reached a blocked call's bound it stays there until the call has
// returned. This needs every timer armed for an instant to be armed for
// exactly it while the clock moves (clock I4): the runtime once armed a
// wait's time-out for its time minus an earlier reading of the clock,
// late by any move in between, past the bound, and the wait never timed
// out (seeds 966651, 1041218, 1053141).
//
// Guarantees: virtual time never passes a blocked call's bound before
// that call has returned; it moves only while every running action is
// blocked; each move is to the earliest armed timer, which fires at its
// deadline (clock I2, I3).
//
// Not deterministic: between two timers that wake no blocked call (a
// flush tick, the time-out of an action the operator has dispatched but
// that has not started yet) the clock moves on at once, without waiting
// for what they woke; an action dispatched but not started (not counted in
// running) when the clock moves starts with a deadline in the past, and
// times out; S10 allows it (the action records that it saw its deadline
// pass). When two timers are due at the same time, which one's goroutine
// runs first is the scheduler's. The checkpoint barriers' clock steps
// (Spec.ClockSteps, with ProcDelayMS; never with waits) move the clock
// too, and time out every action running then, the same way.
type agentTime struct {
	mu struct {
		sync.Mutex
		clk     *clock.Manual
		running int         // actions between their start and their end
		blocked int         // of them, those waiting for virtual time
		bounds  []time.Time // the latest wake-up of each blocked call
		// stopWatch ends the goroutine that waits for a blocked call's
		// wake-up to be armed, if one runs.
		stopWatch context.CancelFunc
		advances  int // moves of the clock, for the report
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
	t.maybeAdvanceLocked()
}

func (t *agentTime) actionEnded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.running--
	t.maybeAdvanceLocked()
}

// waitDeadline blocks a call that answers only after its action's
// time-out (a hang, or a late answer) until ctx is done: at the action's
// deadline (at most now + timeout: the action started at or before now),
// once virtual time reaches it, or at cancellation.
func (t *agentTime) waitDeadline(ctx context.Context, timeout time.Duration) {
	release := t.block(timeout)
	<-ctx.Done()
	release()
}

// block counts the calling action as blocked for virtual time until the
// returned function is called; the call is woken by a timer due at now + d
// at the latest (its bound).
func (t *agentTime) block(d time.Duration) (release func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.clk == nil {
		return func() {}
	}
	bound := t.mu.clk.Now().Add(d)
	t.mu.blocked++
	t.mu.bounds = append(t.mu.bounds, bound)
	t.maybeAdvanceLocked()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.mu.blocked--
		if i := slices.IndexFunc(t.mu.bounds, bound.Equal); i >= 0 {
			t.mu.bounds = slices.Delete(t.mu.bounds, i, i+1)
		}
		t.maybeAdvanceLocked()
	}
}

// maybeAdvanceLocked is called on every change of running or blocked:
// when every running action is blocked it moves the clock, timer by timer,
// to the armed deadlines up to the earliest bound, and if the clock is
// still short of that bound, watches for a wake-up to be armed. Manual.Set
// only sends on the timers' channels of one, so it does not block under
// mu.
func (t *agentTime) maybeAdvanceLocked() {
	if t.mu.stopWatch != nil {
		t.mu.stopWatch()
		t.mu.stopWatch = nil
	}
	clk := t.mu.clk
	if clk == nil || t.mu.running == 0 || t.mu.blocked < t.mu.running || len(t.mu.bounds) == 0 {
		return
	}
	bound := slices.MinFunc(t.mu.bounds, time.Time.Compare)
	for {
		next, ok := clk.NextDue()
		if !ok || next.After(bound) {
			break
		}
		clk.Set(next)
		t.mu.advances++
	}
	if !clk.Now().Before(bound) {
		return // a blocked call is due: its return calls again
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.mu.stopWatch = cancel
	go func() {
		if clk.AwaitDue(ctx, bound) != nil {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if ctx.Err() == nil {
			t.maybeAdvanceLocked()
		}
	}()
}

// stallReport says, for an S4 time-out of a run with the agent branch,
// where its virtual time stood and the world's last trace lines (what the
// actions in flight last did). It only tries the locks: a run that hangs
// holding one must still be cancelled.
func (w *agentWorld) stallReport() []string {
	if w == nil {
		return nil
	}
	var out []string
	if w.time.mu.TryLock() {
		t := &w.time.mu
		if t.clk != nil {
			bounds := make([]int64, len(t.bounds))
			for i, b := range t.bounds {
				bounds[i] = b.UnixMilli()
			}
			next, ok := t.clk.NextDue()
			out = append(out, fmt.Sprintf("virtual time %d: actions running %d, blocked for virtual time %d (bounds %v), next timer due %d (%v)",
				t.clk.Now().UnixMilli(), t.running, t.blocked, bounds, next.UnixMilli(), ok))
		}
		w.time.mu.Unlock()
	} else {
		out = append(out, "virtual time: locked")
	}
	if w.mu.TryLock() {
		tr := w.mu.trace
		for _, e := range tr[max(0, len(tr)-12):] {
			out = append(out, fmt.Sprintf("trace %d a%d input %d: %s", e.seq, e.attempt, e.id, e.text))
		}
		w.mu.Unlock()
	} else {
		out = append(out, "trace: locked")
	}
	return out
}

func (t *agentTime) advances() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.advances
}
