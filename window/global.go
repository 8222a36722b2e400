package window

import (
	"fmt"
	"math"
)

// DefaultTriggerAssigner is implemented by assigners that come with their
// own default trigger (Flink's WindowAssigner.getDefaultTrigger): Global
// and the count assigners. WithTrigger overrides it. A nil result means
// the built-in default (EventTimeTrigger or ProcessingTimeTrigger).
type DefaultTriggerAssigner interface {
	Assigner
	DefaultTrigger() Trigger
}

// DefaultEvictorAssigner is implemented by assigners that come with an
// evictor (CountSliding). WithEvictor overrides it.
type DefaultEvictorAssigner interface {
	Assigner
	DefaultEvictor() Evictor
}

// GlobalWindow is the one window of Global: every timestamp, and no end.
// Its MaxTimestamp is math.MaxInt64 - 1, the timestamp its results carry
// (Flink's GlobalWindow uses Long.MAX_VALUE).
var GlobalWindow = Window{Start: math.MinInt64, End: math.MaxInt64}

// isGlobal reports whether w is the global window, which is never cleaned
// up.
func isGlobal(w Window) bool { return w == GlobalWindow }

// Global returns Flink's GlobalWindows: every record of a key goes into
// the one GlobalWindow of that key, which is never cleaned up and, with
// the default NeverTrigger, never fires. Give it a trigger (WithTrigger) to
// get output; CountTumbling and CountSliding do. Global windows follow no
// time domain (as in Flink they count as processing time): no record is
// late, and records need no timestamp. At the end of a bounded input
// nothing fires that the trigger does not fire (a count window's last,
// incomplete window is not emitted, as in Flink); processing-time timers
// the trigger registered fire then (I8).
func Global() Assigner { return global{} }

type global struct{}

// AssignWindows appends GlobalWindow.
func (global) AssignWindows(_ int64, dst []Window) []Window { return append(dst, GlobalWindow) }

// assignRange implements rangeAssigner: one window for all time, so the
// operator assigns once.
func (global) assignRange(_ int64, dst []Window) ([]Window, int64, int64) {
	return append(dst, GlobalWindow), math.MinInt64, math.MaxInt64
}

// IsEventTime implements Assigner.
func (global) IsEventTime() bool { return false }

// IsMerging implements Assigner.
func (global) IsMerging() bool { return false }

// DefaultTrigger implements DefaultTriggerAssigner: NeverTrigger.
func (global) DefaultTrigger() Trigger { return NeverTrigger() }

func (global) String() string { return "Global" }

// CountTumbling returns Flink's countWindow(n): Global windows with
// PurgingTrigger(CountTrigger(n)), so each key's records are cut into
// windows of n records; each fires when its n-th record arrives and
// starts the next empty. Reduce and Aggregate stay incremental. It panics
// if n < 1.
func CountTumbling(n int64) Assigner {
	if n < 1 {
		panic(fmt.Sprintf("window: CountTumbling: count must be at least 1, got %d", n))
	}
	return countAssigner{size: n, slide: n}
}

// CountSliding returns Flink's countWindow(size, slide): Global windows
// with CountTrigger(slide) and CountEvictor(size), so every slide records
// of a key the window fires over that key's last size records (fewer
// until size have arrived). The window keeps its records (see Evictor):
// up to size + slide - 1 per key. It panics if size or slide is < 1.
func CountSliding(size, slide int64) Assigner {
	if size < 1 || slide < 1 {
		panic(fmt.Sprintf("window: CountSliding: size and slide must be at least 1, got %d and %d", size, slide))
	}
	return countAssigner{size: size, slide: slide, sliding: true}
}

type countAssigner struct {
	global
	size, slide int64
	sliding     bool
}

// DefaultTrigger implements DefaultTriggerAssigner.
func (c countAssigner) DefaultTrigger() Trigger {
	if c.sliding {
		return CountTrigger(c.slide)
	}
	return PurgingTrigger(CountTrigger(c.size))
}

// DefaultEvictor implements DefaultEvictorAssigner: CountEvictor(size)
// for CountSliding, none for CountTumbling.
func (c countAssigner) DefaultEvictor() Evictor {
	if c.sliding {
		return CountEvictor(c.size)
	}
	return nil
}

func (c countAssigner) String() string {
	if c.sliding {
		return fmt.Sprintf("CountSliding(size=%d, slide=%d)", c.size, c.slide)
	}
	return fmt.Sprintf("CountTumbling(%d)", c.size)
}
