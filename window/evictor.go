package window

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/runtime"
)

// Evictor removes records from a window when it fires: Flink's Evictor.
// Set one with WithEvictor. EvictBefore runs before the window function
// sees the window's records, EvictAfter after it; what either evicts is
// gone from the window for good (later firings do not see it).
//
// An evictor needs the window's records, so a window with an evictor keeps
// every record with its timestamp, as Flink's EvictingWindowOperator does,
// even for Reduce and Aggregate: their function then runs over the
// remaining records at each firing instead of incrementally per record.
// That costs memory and checkpoint size in proportion to the records a
// window holds; CountEvictor and TimeEvictor keep that bounded.
//
// A firing whose records were all evicted emits nothing. Methods run on
// the operator's subtask goroutine; elems and ctx are valid only during
// the call. An evictor value may serve several operators at once, so it
// must not keep mutable fields of its own.
type Evictor interface {
	// EvictBefore may evict records before the window function runs.
	EvictBefore(elems *Elements, w Window, ctx *EvictorContext)
	// EvictAfter may evict records after the window function ran.
	EvictAfter(elems *Elements, w Window, ctx *EvictorContext)
}

// Elements is the records of a firing window, in the order they were
// added (for merged sessions, one merged window's after the other's), as
// an Evictor sees them: their timestamps, their values through ElementAt,
// and Evict. Indices stay valid during the call: Evict marks a record,
// which leaves the window when the evictor returns.
type Elements struct {
	ts      []int64
	evicted []bool
	vals    any // *[]stamped[T]
}

// Len returns the number of records, evicted ones included.
func (e *Elements) Len() int { return len(e.ts) }

// Timestamp returns record i's timestamp (runtime.NoTimestamp if it has
// none).
func (e *Elements) Timestamp(i int) int64 { return e.ts[i] }

// Evict removes record i from the window.
func (e *Elements) Evict(i int) { e.evicted[i] = true }

// Evicted reports whether record i was evicted in this call.
func (e *Elements) Evicted(i int) bool { return e.evicted[i] }

// ElementAt returns record i of e; T must be the windowed stream's record
// type (it panics otherwise).
func ElementAt[T any](e *Elements, i int) T {
	p, ok := e.vals.(*[]stamped[T])
	if !ok {
		var zero T
		panic(fmt.Sprintf("window: ElementAt[%T]: the window's records are of another type", zero))
	}
	return (*p)[i].V
}

// EvictorContext gives an Evictor the time.
type EvictorContext struct {
	host triggerHost
}

// CurrentWatermark returns the operator's current watermark.
func (c *EvictorContext) CurrentWatermark() int64 { return c.host.watermark() }

// CurrentProcessingTime returns the clock's time in Unix ms.
func (c *EvictorContext) CurrentProcessingTime() int64 { return c.host.processingTime() }

// CountEvictor returns Flink's CountEvictor: it keeps the last n records
// of the window (the latest added) and evicts the others, before the
// window function runs. It panics if n < 1.
func CountEvictor(n int64) Evictor { return countEvictor{n: checkN("CountEvictor", n), after: false} }

// CountEvictorAfter is CountEvictor evicting after the window function
// ran (Flink's CountEvictor.of(n, true)).
func CountEvictorAfter(n int64) Evictor {
	return countEvictor{n: checkN("CountEvictorAfter", n), after: true}
}

func checkN(fn string, n int64) int64 {
	if n < 1 {
		panic(fmt.Sprintf("window: %s: count must be at least 1, got %d", fn, n))
	}
	return n
}

type countEvictor struct {
	n     int64
	after bool
}

func (c countEvictor) evict(e *Elements) {
	for i := int64(0); i < int64(e.Len())-c.n; i++ {
		e.Evict(int(i))
	}
}

func (c countEvictor) EvictBefore(e *Elements, _ Window, _ *EvictorContext) {
	if !c.after {
		c.evict(e)
	}
}

func (c countEvictor) EvictAfter(e *Elements, _ Window, _ *EvictorContext) {
	if c.after {
		c.evict(e)
	}
}

func (c countEvictor) String() string { return fmt.Sprintf("CountEvictor(%d, after=%v)", c.n, c.after) }

// TimeEvictor returns Flink's TimeEvictor: with m the largest timestamp in
// the window, it evicts the records whose timestamp is at or before
// m - size, keeping those of the last size of event time, before the
// window function runs. Records without a timestamp are never evicted and
// do not count for m (Flink looks only at whether the first record has
// one). It panics if size is not a positive whole number of milliseconds.
func TimeEvictor(size time.Duration) Evictor {
	return timeEvictor{size: millis("TimeEvictor", "size", size, false)}
}

// TimeEvictorAfter is TimeEvictor evicting after the window function ran.
func TimeEvictorAfter(size time.Duration) Evictor {
	return timeEvictor{size: millis("TimeEvictorAfter", "size", size, false), after: true}
}

type timeEvictor struct {
	size  int64
	after bool
}

func (t timeEvictor) evict(e *Elements) {
	m, seen := int64(runtime.NoTimestamp), false
	for i := range e.Len() {
		if ts := e.Timestamp(i); ts != runtime.NoTimestamp {
			m, seen = max(m, ts), true
		}
	}
	if !seen {
		return
	}
	cutoff := m - t.size
	for i := range e.Len() {
		if ts := e.Timestamp(i); ts != runtime.NoTimestamp && ts <= cutoff {
			e.Evict(i)
		}
	}
}

func (t timeEvictor) EvictBefore(e *Elements, _ Window, _ *EvictorContext) {
	if !t.after {
		t.evict(e)
	}
}

func (t timeEvictor) EvictAfter(e *Elements, _ Window, _ *EvictorContext) {
	if t.after {
		t.evict(e)
	}
}

func (t timeEvictor) String() string {
	return fmt.Sprintf("TimeEvictor(%dms, after=%v)", t.size, t.after)
}

// DeltaEvictor returns Flink's DeltaEvictor: it evicts every record whose
// delta to the window's last record, delta(record, last), is at least
// threshold, before the window function runs. delta runs on the subtask
// goroutine. It panics if delta is nil.
func DeltaEvictor[T any](threshold float64, delta func(a, b T) float64) Evictor {
	if delta == nil {
		panic("window: DeltaEvictor: nil delta function")
	}
	return deltaEvictor[T]{threshold: threshold, delta: delta}
}

// DeltaEvictorAfter is DeltaEvictor evicting after the window function ran.
func DeltaEvictorAfter[T any](threshold float64, delta func(a, b T) float64) Evictor {
	if delta == nil {
		panic("window: DeltaEvictorAfter: nil delta function")
	}
	return deltaEvictor[T]{threshold: threshold, delta: delta, after: true}
}

type deltaEvictor[T any] struct {
	threshold float64
	delta     func(a, b T) float64
	after     bool
}

func (d deltaEvictor[T]) evict(e *Elements) {
	if e.Len() == 0 {
		return
	}
	last := ElementAt[T](e, e.Len()-1)
	for i := range e.Len() {
		if d.delta(ElementAt[T](e, i), last) >= d.threshold {
			e.Evict(i)
		}
	}
}

func (d deltaEvictor[T]) EvictBefore(e *Elements, _ Window, _ *EvictorContext) {
	if !d.after {
		d.evict(e)
	}
}

func (d deltaEvictor[T]) EvictAfter(e *Elements, _ Window, _ *EvictorContext) {
	if d.after {
		d.evict(e)
	}
}

func (d deltaEvictor[T]) String() string {
	return fmt.Sprintf("DeltaEvictor(%v, after=%v)", d.threshold, d.after)
}

// checkRecordType is implemented by evictors bound to a record type
// (DeltaEvictor), checked against the window's records at job build.
type checkRecordType interface{ recordType() any }

func (deltaEvictor[T]) recordType() any { return (*T)(nil) }
