package sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/weirproject/weir/clock"
)

// Clocks that step back (Spec.ClockBackMS). A host's wall clock can be
// stepped back (an NTP step, an operator's date): time.Now goes back, and
// Go's timers, which measure durations on the monotonic clock, do not
// notice. wallClock models exactly that over the run's manual clock:
// Now is the manual time minus the steps back taken so far (the wall
// clock), NewTimer arms the manual clock for the duration asked
// (monotonic: a timer armed for d fires d of manual time later, whatever
// the wall clock did meanwhile). The agent branch's virtual time
// (agenttime.go) works on the manual clock, the monotonic one.
//
// What weir promises when processing time goes back (runtime/ptimers.go,
// timer/doc.go I4, I5), and S9 checks: a processing-time timer fires only
// when the clock reads its time or later (the runtime reads the clock when
// its wake-up fires and re-arms if the clock is behind), so a step back
// of J delays every pending timer by J; it never fires twice (unless
// registered again); and a timer registered after the step, at the
// lower now + delay, fires in timestamp order with the others. Flink
// differs: its timer service schedules a timer at a delay of (timestamp
// - now) and fires it with its own timestamp when the delay has passed,
// so a step back does not delay a pending timer there, and a timer may
// fire while the wall clock reads less than its time.
//
// The check: a firing is EARLY when no reading of the clock by anyone
// (weir's runtime included) had reached its time before the firing
// (wallClock.reached). Its callback cannot compare the clock's current
// reading with its time: a step back may come between the runtime's
// reading and the callback's.
type wallClock struct {
	m  *clock.Manual
	mu struct {
		sync.Mutex
		back time.Duration // the steps back so far
		max  time.Time     // the latest time Now returned
	}
}

func newWallClock(m *clock.Manual) *wallClock { return &wallClock{m: m} }

// Now implements clock.Clock: the wall clock.
func (c *wallClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.m.Now().Add(-c.mu.back)
	if now.After(c.mu.max) {
		c.mu.max = now
	}
	return now
}

// NewTimer implements clock.Clock: monotonic, on the manual clock.
func (c *wallClock) NewTimer(d time.Duration) clock.Timer { return c.m.NewTimer(d) }

// ResetAt implements clock.AtArmer: the wall-clock instant at is armed on
// the manual clock at the same distance from its time (at plus the steps
// back so far), in one step with the steps back and the clock's moves.
// Like NewTimer's, the arming is monotonic from then on: a later step back
// does not move it.
func (c *wallClock) ResetAt(t clock.Timer, at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.ResetAt(t, at.Add(c.mu.back))
}

// stepBack sets the wall clock back by d; timers armed stay armed for
// their durations.
func (c *wallClock) stepBack(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.back += d
}

// reached reports whether Now has returned ms (Unix milliseconds) or later.
func (c *wallClock) reached(ms int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.max.UnixMilli() >= ms
}

// generateClockBack draws, in half the seeds with processing-time timers,
// the steps back of the wall clock after each barrier's step (0: none), from
// a stream of its own, so that every other draw of the seed stays.
func generateClockBack(s *Spec) []int64 {
	if s.ProcDelayMS == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0xb4c7))
	if rng.IntN(2) == 0 {
		return nil
	}
	back := make([]int64, len(s.ClockSteps))
	some := false
	for i := range back {
		switch rng.IntN(4) {
		case 0:
			back[i] = 1 + rng.Int64N(300) // milliseconds
		case 1:
			back[i] = (1 + rng.Int64N(5)) * 60_000 // minutes
		default:
			continue
		}
		some = true
	}
	if !some {
		back[rng.IntN(len(back))] = 1 + rng.Int64N(300)
	}
	return back
}

// clockBackShape names the steps back for Shape.
func clockBackShape(back []int64) string {
	n := 0
	for _, b := range back {
		if b > 0 {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", the wall clock steps back at %d of %d barriers", n, len(back))
}
