package window

import (
	"fmt"
	"math"
)

// Window is a time window [Start, End) in Unix milliseconds: it holds the
// timestamps t with Start <= t < End. Windows are values and comparable, so
// they serve directly as state namespaces and timer namespaces.
type Window struct {
	// Start is the first timestamp in the window (inclusive).
	Start int64
	// End is the first timestamp after the window (exclusive).
	End int64
}

// MaxTimestamp returns the largest timestamp in the window, End - 1. An
// event-time window fires when the watermark reaches it, and results of
// the window carry it as their timestamp.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// Contains reports whether ts lies in [Start, End).
func (w Window) Contains(ts int64) bool { return w.Start <= ts && ts < w.End }

// Intersects reports whether w and o overlap or touch (one ends where the
// other starts). Session windows that intersect are merged, so two records
// exactly one gap apart belong to the same session (Flink's rule).
func (w Window) Intersects(o Window) bool { return w.Start <= o.End && w.End >= o.Start }

// Cover returns the smallest window that contains both w and o.
func (w Window) Cover(o Window) Window {
	return Window{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

// String formats the window as [Start, End).
func (w Window) String() string { return fmt.Sprintf("[%d, %d)", w.Start, w.End) }

// startOf returns the start of the window of size `size` (shifted by
// offset) that contains t: t - floorMod(t - offset, size).
//
// Flink computes t - (t - offset + size) % size, which goes wrong once
// t - offset + size is negative (Java's % keeps the dividend's sign, so the
// "start" lands after t). Here the remainder is taken as a floor modulo,
// computed from t % size and offset % size so that t - offset cannot
// overflow: both remainders are below size in absolute value, so their
// difference is too. Without an offset (the usual case) that is one
// division, not three: it runs for every record.
func startOf(t, offset, size int64) int64 {
	r := t % size
	if offset != 0 {
		r = (r - offset%size) % size
	}
	if r < 0 {
		r += size
	}
	return t - r
}

// addSat returns a + b for b >= 0, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
