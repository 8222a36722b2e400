package watermark

import (
	"time"

	"github.com/weirproject/weir/clock"
)

// Strategy bundles how a source derives timestamps and watermarks. The zero
// value uses the source's timestamps and emits no watermarks. Strategies are
// values: the With methods return modified copies.
type Strategy[T any] struct {
	// Timestamp extracts the event time (ms) of a record; ok=false means
	// the record has no usable timestamp (the runtime sends it to the
	// dead-letter output). Nil means use the timestamp the source attached.
	Timestamp func(event T, sourceTs int64) (ts int64, ok bool)
	// NewGenerator makes one generator per split. Nil means no watermarks.
	NewGenerator func() Generator[T]
	// Idleness, when > 0, wraps each generator WithIdleness.
	Idleness time.Duration
}

// ForBoundedOutOfOrderness returns a strategy whose splits each use
// BoundedOutOfOrderness(d).
func ForBoundedOutOfOrderness[T any](d time.Duration) Strategy[T] {
	if d < 0 {
		// Fail when the strategy is built, not when the first split is added.
		BoundedOutOfOrderness[T](d)
	}
	return Strategy[T]{NewGenerator: func() Generator[T] { return BoundedOutOfOrderness[T](d) }}
}

// ForMonotonous returns a strategy for splits whose timestamps never
// decrease: each split uses Ascending.
func ForMonotonous[T any]() Strategy[T] {
	return Strategy[T]{NewGenerator: Ascending[T]}
}

// ForGenerator returns a strategy whose splits each use a generator made by
// newGen.
func ForGenerator[T any](newGen func() Generator[T]) Strategy[T] {
	return Strategy[T]{NewGenerator: newGen}
}

// NoWatermarks returns a strategy that generates no watermarks.
func NoWatermarks[T any]() Strategy[T] { return Strategy[T]{} }

// WithTimestamp returns a copy of s that extracts timestamps with f.
func (s Strategy[T]) WithTimestamp(f func(event T, sourceTs int64) (ts int64, ok bool)) Strategy[T] {
	s.Timestamp = f
	return s
}

// WithIdleness returns a copy of s whose generators are wrapped to go idle
// after d without records (see WithIdleness). A d <= 0 turns idleness off.
func (s Strategy[T]) WithIdleness(d time.Duration) Strategy[T] {
	s.Idleness = d
	return s
}

// ExtractTimestamp applies s.Timestamp, or returns sourceTs when it is nil.
func (s Strategy[T]) ExtractTimestamp(event T, sourceTs int64) (int64, bool) {
	if s.Timestamp == nil {
		return sourceTs, true
	}
	return s.Timestamp(event, sourceTs)
}

// Generator builds one generator for a split: NewGenerator's (None if nil),
// wrapped WithIdleness on clock c when Idleness > 0 (then the result is an
// *IdlenessGenerator[T]). A nil c means clock.Real.
func (s Strategy[T]) Generator(c clock.Clock) Generator[T] {
	var g Generator[T]
	if s.NewGenerator != nil {
		g = s.NewGenerator()
	}
	if g == nil {
		g = None[T]()
	}
	if s.Idleness > 0 {
		g = NewIdleness(g, s.Idleness, c)
	}
	return g
}
