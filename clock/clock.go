// Package clock is weir's source of processing time.
//
// Every part of weir that reads the wall clock or waits for it does so through
// a Clock, so tests can replace time with a Manual clock and advance it by
// hand. Processing-time timers, periodic watermark emission, idleness
// time-outs and flush time-outs all take a Clock.
//
// Invariants:
//
//	I1. Real.Now is the system clock; Manual.Now changes only through Advance or Set.
//	I2. A Manual timer fires exactly once per arming, when the manual time
//	    reaches its deadline, and never before.
//	I3. Manual.NextDue is the earliest deadline of the timers armed on the
//	    clock (armed, neither fired nor stopped), each of which is after
//	    Now: a discrete-event simulation that moves the clock only to
//	    NextDue passes no deadline without firing its timer at it.
//	I4. A Manual timer armed for an instant (ResetAt, NewTimerAt) is
//	    armed for exactly that instant, whatever moves of the clock run
//	    concurrently; one armed for a duration (NewTimer, Reset) is
//	    armed for the clock's time at the arming plus the duration.
//
// Real's timers measure durations (Go's monotonic clock), while Now is the
// wall clock, which a host may step back. Code that must not act before the
// clock reads a time (processing-time timers: runtime/ptimers.go) reads Now
// again when its timer fires, and waits again if the clock is behind.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells processing time and arms timers against it.
type Clock interface {
	// Now returns the current processing time.
	Now() time.Time
	// NewTimer returns a timer that delivers the time on its channel once d
	// has elapsed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer armed on a Clock. It has the semantics of
// time.Timer from Go 1.23 on: Stop and Reset discard a pending value.
type Timer interface {
	// C is the channel the timer fires on.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was armed.
	Stop() bool
	// Reset re-arms the timer to fire after d.
	Reset(d time.Duration) bool
}

// AtArmer is implemented by a Clock that arms its timers for an instant
// of its own time in one step with its moves (Manual). A clock that moves
// while a timer is being armed for an instant must implement it: armed for
// a duration computed from an earlier reading, the timer would fire late
// by the move (I4).
type AtArmer interface {
	// ResetAt re-arms t, a timer made by this clock, to fire when the
	// clock reads at or later (at once if it does already), and reports
	// whether t was armed.
	ResetAt(t Timer, at time.Time) bool
}

// ResetAt re-arms t, a timer made by c, to fire when c reads at: exactly
// at (I4) on a clock that implements AtArmer, else after at.Sub(c.Now()),
// which is what Real's timers can do.
func ResetAt(c Clock, t Timer, at time.Time) bool {
	if a, ok := c.(AtArmer); ok {
		return a.ResetAt(t, at)
	}
	return t.Reset(at.Sub(c.Now()))
}

// NewTimerAt returns a timer of c that fires when c reads at (ResetAt).
func NewTimerAt(c Clock, at time.Time) Timer {
	t := c.NewTimer(at.Sub(c.Now()))
	if a, ok := c.(AtArmer); ok {
		a.ResetAt(t, at)
	}
	return t
}

// Millis returns t as Unix milliseconds, weir's unit of time.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// NowMillis returns c's current time in Unix milliseconds.
func NowMillis(c Clock) int64 { return c.Now().UnixMilli() }

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Manual is a Clock whose time moves only when the test says so. Its zero
// value starts at the Unix epoch; it is safe for concurrent use.
type Manual struct {
	mu struct {
		sync.Mutex
		now    time.Time
		timers []*manualTimer
		// armed, when not nil, is closed (and cleared) when a timer is
		// armed: AwaitTimers and AwaitDue wait on it.
		armed chan struct{}
	}
}

// NewManual returns a manual clock set to start.
func NewManual(start time.Time) *Manual {
	m := &Manual{}
	m.mu.now = start
	return m
}

// Now implements Clock.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nowLocked()
}

func (m *Manual) nowLocked() time.Time {
	if m.mu.now.IsZero() {
		return time.UnixMilli(0)
	}
	return m.mu.now
}

// Advance moves the clock forward by d and fires every timer that fell due.
func (m *Manual) Advance(d time.Duration) { m.Set(m.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires every timer that fell due.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	if m.mu.now.IsZero() {
		m.mu.now = time.UnixMilli(0)
	}
	if t.After(m.mu.now) {
		m.mu.now = t
	}
	now := m.mu.now
	kept := m.mu.timers[:0]
	var due []*manualTimer
	for _, t := range m.mu.timers {
		if !t.deadline.After(now) {
			due = append(due, t)
		} else {
			kept = append(kept, t)
		}
	}
	m.mu.timers = kept
	// Deliver under the lock (the sends do not block), so that a Stop or
	// Reset that follows never finds a value of the arming it replaced.
	for _, t := range due {
		select {
		case t.c <- now:
		default:
		}
	}
	m.mu.Unlock()
}

// AwaitTimers waits until at least n timers are armed on m (armed and
// neither fired nor stopped) or ctx is done, and returns nil or ctx.Err().
// A test calls it before Advance to know that the code under test is
// waiting on the clock (a retry's back-off, a time-out), without sleeping.
func (m *Manual) AwaitTimers(ctx context.Context, n int) error {
	return m.await(ctx, func() bool { return len(m.mu.timers) >= n })
}

// NextDue returns the deadline of the earliest timer armed on m (armed and
// neither fired nor stopped), and false if none is (I3). Set(NextDue())
// fires that timer and the others due at the same time, and no later one.
func (m *Manual) NextDue() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nextDueLocked()
}

func (m *Manual) nextDueLocked() (time.Time, bool) {
	var next time.Time
	for _, t := range m.mu.timers {
		if next.IsZero() || t.deadline.Before(next) {
			next = t.deadline
		}
	}
	return next, !next.IsZero()
}

// AwaitDue waits until a timer due at or before t is armed on m, or ctx is
// done, and returns nil or ctx.Err(): what a simulation that knows an
// event must come by t waits for before it moves the clock.
func (m *Manual) AwaitDue(ctx context.Context, t time.Time) error {
	return m.await(ctx, func() bool {
		next, ok := m.nextDueLocked()
		return ok && !next.After(t)
	})
}

// await waits until cond, called with mu held, holds after an arming, or
// ctx is done.
func (m *Manual) await(ctx context.Context, cond func() bool) error {
	for {
		m.mu.Lock()
		if cond() {
			m.mu.Unlock()
			return nil
		}
		if m.mu.armed == nil {
			m.mu.armed = make(chan struct{})
		}
		ch := m.mu.armed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NewTimer implements Clock.
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// ResetAt implements AtArmer: it re-arms t, a timer of m, for the instant
// at, in one step with m's moves (at once if m reads at or later).
func (m *Manual) ResetAt(t Timer, at time.Time) bool {
	mt, ok := t.(*manualTimer)
	if !ok || mt.m != m {
		return t.Reset(at.Sub(m.Now()))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	armed := mt.stopLocked()
	mt.armLocked(at)
	return armed
}

type manualTimer struct {
	m        *Manual
	c        chan time.Time
	deadline time.Time
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return t.stopLocked()
}

// stopLocked disarms t and discards a value it has sent and no one has
// received (m.mu held).
func (t *manualTimer) stopLocked() bool {
	armed := false
	for i, x := range t.m.mu.timers {
		if x == t {
			t.m.mu.timers = append(t.m.mu.timers[:i], t.m.mu.timers[i+1:]...)
			armed = true
			break
		}
	}
	select {
	case <-t.c:
	default:
	}
	return armed
}

// Reset reads the clock and arms t in one step: a Set in between would
// otherwise leave t armed for a deadline the clock has passed, which
// fires only at the next Set.
func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	armed := t.stopLocked()
	t.armLocked(t.m.nowLocked().Add(d))
	return armed
}

// armLocked arms t for at, or fires it now if the clock reads at already
// (never blocking: a value already waiting is this fire) (m.mu held).
func (t *manualTimer) armLocked(at time.Time) {
	t.deadline = at
	if now := t.m.nowLocked(); !at.After(now) {
		select {
		case t.c <- now:
		default:
		}
		return
	}
	t.m.mu.timers = append(t.m.mu.timers, t)
	if t.m.mu.armed != nil {
		close(t.m.mu.armed)
		t.m.mu.armed = nil
	}
}
