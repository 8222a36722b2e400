package watermark

import (
	"fmt"
	"math"
	"time"
)

const (
	// Min is the watermark every stream, split and combiner input starts
	// at: nothing is known about event time yet.
	Min int64 = math.MinInt64
	// Max is the watermark of a finished bounded stream: no record will
	// ever follow it.
	Max int64 = math.MaxInt64
)

// Output receives what a Generator (or a Combiner) decides. Implementations
// are called on the owning subtask's goroutine and need no locking.
type Output interface {
	// EmitWatermark reports that no more records with a timestamp <= ts
	// will follow. Emitting a watermark implies that the emitter is active.
	EmitWatermark(ts int64)
	// MarkIdle reports that the emitter will send neither records nor
	// watermarks for a while, so that it stops holding back the minimum
	// downstream.
	MarkIdle()
	// MarkActive reports that an idle emitter is active again.
	MarkActive()
}

// Generator derives watermarks from the records of one split. OnEvent is
// called for every record with its event timestamp (milliseconds);
// OnPeriodicEmit is called every auto-watermark interval. Neither may block.
// A Generator belongs to one split and is used from one goroutine.
type Generator[T any] interface {
	// OnEvent observes one record; it may emit a watermark (punctuated
	// generators do).
	OnEvent(event T, ts int64, out Output)
	// OnPeriodicEmit is the periodic chance to emit a watermark or to
	// change the idle status.
	OnPeriodicEmit(out Output)
}

// TimestampGenerator is implemented by a Generator whose OnEvent reads
// only the timestamp, never the record. OnTimestamp(ts, out) must do what
// OnEvent(event, ts, out) does for any event. Splits then calls OnTimestamp
// instead of OnEvent, and the record is not copied for the generator (which
// matters for large record types). BoundedOutOfOrderness, Ascending and None
// implement it, and a WithIdleness generator over one of them is used the
// same way.
type TimestampGenerator interface {
	OnTimestamp(ts int64, out Output)
}

// RunGenerator is implemented by a TimestampGenerator that can observe a
// run of records at once. OnTimestamps(max, n) does what n calls of
// OnTimestamp would do with timestamps whose highest is max, when those
// calls would emit nothing and change no status; when they might, it
// reports false, having done nothing, and the caller calls OnTimestamp for
// each record. BoundedOutOfOrderness, Ascending and None implement it, as
// does a WithIdleness generator over one of them while its split is active.
// A source hands a run of records downstream before their watermark
// generator has seen them only where OnTimestamps reports true, so no
// watermark moves relative to the records.
type RunGenerator interface {
	OnTimestamps(max int64, n int) bool
}

// GeneratorFuncs adapts a pair of functions to a Generator. A nil field does
// nothing.
type GeneratorFuncs[T any] struct {
	// Event is called by OnEvent.
	Event func(event T, ts int64, out Output)
	// Periodic is called by OnPeriodicEmit.
	Periodic func(out Output)
}

// OnEvent implements Generator by calling g.Event if set.
func (g GeneratorFuncs[T]) OnEvent(event T, ts int64, out Output) {
	if g.Event != nil {
		g.Event(event, ts, out)
	}
}

// OnPeriodicEmit implements Generator by calling g.Periodic if set.
func (g GeneratorFuncs[T]) OnPeriodicEmit(out Output) {
	if g.Periodic != nil {
		g.Periodic(out)
	}
}

// BoundedGenerator is the generator returned by BoundedOutOfOrderness and
// Ascending. It assumes records arrive at most a fixed bound late relative to
// the highest timestamp seen so far (invariant I11).
type BoundedGenerator[T any] struct {
	maxTs int64 // highest timestamp seen, initially Min + bound + 1
	bound int64 // the out-of-orderness bound B in milliseconds
}

// BoundedOutOfOrderness returns a generator for records that arrive at most
// maxOutOfOrderness late relative to the highest timestamp seen so far. With
// B = maxOutOfOrderness in whole milliseconds, every periodic emit sends
// maxTs - B - 1, where maxTs is the highest timestamp seen; maxTs starts at
// Min + B + 1, so the first watermark is Min. The -1 makes a record with
// timestamp exactly maxTs - B still on time. It panics if maxOutOfOrderness
// is negative.
func BoundedOutOfOrderness[T any](maxOutOfOrderness time.Duration) Generator[T] {
	return newBounded[T](maxOutOfOrderness)
}

func newBounded[T any](maxOutOfOrderness time.Duration) *BoundedGenerator[T] {
	if maxOutOfOrderness < 0 {
		panic(fmt.Sprintf("watermark: negative out-of-orderness bound %v", maxOutOfOrderness))
	}
	b := maxOutOfOrderness.Milliseconds()
	return &BoundedGenerator[T]{maxTs: Min + b + 1, bound: b}
}

// Ascending returns a generator for records whose timestamps never decrease
// within a split: BoundedOutOfOrderness with a bound of zero, so the
// watermark is the highest timestamp seen minus one.
func Ascending[T any]() Generator[T] { return newBounded[T](0) }

// OnEvent records ts if it is the highest timestamp so far. It never emits.
func (g *BoundedGenerator[T]) OnEvent(_ T, ts int64, _ Output) {
	if ts > g.maxTs {
		g.maxTs = ts
	}
}

// OnTimestamp implements TimestampGenerator: OnEvent without the record.
func (g *BoundedGenerator[T]) OnTimestamp(ts int64, _ Output) {
	if ts > g.maxTs {
		g.maxTs = ts
	}
}

// OnTimestamps implements RunGenerator: it keeps max if it is the highest
// timestamp so far, and never emits.
func (g *BoundedGenerator[T]) OnTimestamps(max int64, _ int) bool {
	if max > g.maxTs {
		g.maxTs = max
	}
	return true
}

// OnPeriodicEmit emits maxTs - B - 1.
func (g *BoundedGenerator[T]) OnPeriodicEmit(out Output) {
	out.EmitWatermark(g.maxTs - g.bound - 1)
}

// Punctuated returns a generator that asks f about every record and emits
// the watermark f returns when ok is true. It never emits periodically.
func Punctuated[T any](f func(event T, ts int64) (wm int64, ok bool)) Generator[T] {
	if f == nil {
		panic("watermark: Punctuated with a nil function")
	}
	return punctuated[T]{f: f}
}

type punctuated[T any] struct {
	f func(event T, ts int64) (int64, bool)
}

func (p punctuated[T]) OnEvent(event T, ts int64, out Output) {
	if wm, ok := p.f(event, ts); ok {
		out.EmitWatermark(wm)
	}
}

func (punctuated[T]) OnPeriodicEmit(Output) {}

// None returns a generator that never emits anything: a split using it stays
// at Min (unless wrapped for idleness), so it holds back the minimum.
func None[T any]() Generator[T] { return none[T]{} }

type none[T any] struct{}

func (none[T]) OnEvent(T, int64, Output)     {}
func (none[T]) OnTimestamp(int64, Output)    {}
func (none[T]) OnTimestamps(int64, int) bool { return true }
func (none[T]) OnPeriodicEmit(Output)        {}
