package testenv

import (
	"time"

	"github.com/weirproject/weir/clock"
)

// LongTimers is a manual clock that sends on Armed the duration of every
// timer armed for longer than an hour: a test's long time-outs and
// back-offs, none of a job's own short timers (watermark ticks, flushes).
// Armed must have room for every such timer, or NewTimer blocks.
type LongTimers struct {
	*clock.Manual
	Armed chan time.Duration
}

// NewLongTimers returns a LongTimers at start whose Armed holds n.
func NewLongTimers(start time.Time, n int) LongTimers {
	return LongTimers{clock.NewManual(start), make(chan time.Duration, n)}
}

func (c LongTimers) NewTimer(d time.Duration) clock.Timer {
	t := c.Manual.NewTimer(d)
	if d > time.Hour {
		c.Armed <- d
	}
	return t
}
