package watermark

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/clock"
)

// IdlenessGenerator wraps a Generator with time-out based idleness detection
// (invariant I13). It is returned by WithIdleness.
//
// Per record it only increments a counter: the clock is read solely on
// periodic emits and on Pause/Resume. On a periodic emit that finds the
// counter unchanged since the previous periodic emit it starts an inactivity
// stopwatch (or keeps it running); once the stopwatch shows strictly more
// than the time-out, the generator calls MarkIdle (once) and stops
// forwarding periodic emits to the wrapped generator. The next record calls
// MarkActive before it reaches the wrapped generator.
//
// The stopwatch does not run while the generator is paused (see Pause), so a
// source that is back-pressured or paused for alignment is never declared
// idle because of the time it was blocked (FLINK-35886).
type IdlenessGenerator[T any] struct {
	inner   Generator[T]
	timeout time.Duration
	clk     clock.Clock

	counter     uint64 // records seen; overflow is harmless
	lastCounter uint64 // counter at the previous periodic emit

	timing  bool          // the inactivity stopwatch is started
	elapsed time.Duration // stopwatch time accumulated before the current run
	since   time.Time     // start of the current run (valid when timing and not paused)
	paused  int           // nesting depth of Pause calls

	idle bool // MarkIdle was sent and no record has arrived since
}

// WithIdleness wraps g so that it marks its output idle after more than
// timeout of processing time without records, measured on c (clock.Real if
// c is nil). It panics if timeout is not positive. The result is an
// *IdlenessGenerator[T]; assert to it (or call NewIdleness) to use Pause and
// Resume.
func WithIdleness[T any](g Generator[T], timeout time.Duration, c clock.Clock) Generator[T] {
	return NewIdleness(g, timeout, c)
}

// NewIdleness is WithIdleness returning the concrete type, for callers that
// need Pause and Resume.
func NewIdleness[T any](g Generator[T], timeout time.Duration, c clock.Clock) *IdlenessGenerator[T] {
	if timeout <= 0 {
		panic(fmt.Sprintf("watermark: idleness time-out must be positive, got %v", timeout))
	}
	if g == nil {
		g = None[T]()
	}
	if c == nil {
		c = clock.Real
	}
	return &IdlenessGenerator[T]{inner: g, timeout: timeout, clk: c}
}

// Inner returns the wrapped generator.
func (g *IdlenessGenerator[T]) Inner() Generator[T] { return g.inner }

// IsIdle reports whether the generator has marked its output idle and seen
// no record since.
func (g *IdlenessGenerator[T]) IsIdle() bool { return g.idle }

// OnEvent counts the record, reactivates the output if it was idle, and
// passes the record to the wrapped generator. It does not read the clock.
func (g *IdlenessGenerator[T]) OnEvent(event T, ts int64, out Output) {
	g.seen(out)
	g.inner.OnEvent(event, ts, out)
}

// onTimestamp is OnEvent for an inner generator that reads only the
// timestamp (Splits uses it through idleTimestamps).
func (g *IdlenessGenerator[T]) onTimestamp(inner TimestampGenerator, ts int64, out Output) {
	g.seen(out)
	inner.OnTimestamp(ts, out)
}

// seen counts a record and reactivates the output if it was idle.
func (g *IdlenessGenerator[T]) seen(out Output) {
	g.counter++
	if g.idle {
		g.idle = false
		out.MarkActive()
	}
}

// idleTimestamps is an IdlenessGenerator over a TimestampGenerator, seen as
// a TimestampGenerator.
type idleTimestamps[T any] struct {
	g     *IdlenessGenerator[T]
	inner TimestampGenerator
}

func (t idleTimestamps[T]) OnTimestamp(ts int64, out Output) { t.g.onTimestamp(t.inner, ts, out) }

// OnTimestamps implements RunGenerator while the split is active (a record
// on an idle split marks it active, a status change) and the wrapped
// generator observes runs.
func (t idleTimestamps[T]) OnTimestamps(max int64, n int) bool {
	r, ok := t.inner.(RunGenerator)
	if !ok || t.g.idle || !r.OnTimestamps(max, n) {
		return false
	}
	t.g.counter += uint64(n)
	return true
}

// timestampsOf returns gen as a TimestampGenerator, or nil if it reads the
// records it is given.
func timestampsOf[T any](gen Generator[T]) TimestampGenerator {
	if ig, ok := gen.(*IdlenessGenerator[T]); ok {
		if in, ok := ig.inner.(TimestampGenerator); ok {
			return idleTimestamps[T]{g: ig, inner: in}
		}
		return nil
	}
	ts, _ := gen.(TimestampGenerator)
	return ts
}

// OnPeriodicEmit checks for inactivity and either marks the output idle or
// lets the wrapped generator emit.
func (g *IdlenessGenerator[T]) OnPeriodicEmit(out Output) {
	if g.checkIdle() {
		if !g.idle {
			g.idle = true
			out.MarkIdle()
		}
		return
	}
	g.inner.OnPeriodicEmit(out)
}

func (g *IdlenessGenerator[T]) checkIdle() bool {
	if g.counter != g.lastCounter {
		g.lastCounter = g.counter
		g.timing = false
		return false
	}
	if !g.timing {
		g.timing = true
		g.elapsed = 0
		if g.paused == 0 {
			g.since = g.clk.Now()
		}
		return false
	}
	return g.inactiveFor() > g.timeout
}

// inactiveFor reads the stopwatch.
func (g *IdlenessGenerator[T]) inactiveFor() time.Duration {
	if g.paused > 0 {
		return g.elapsed
	}
	return g.elapsed + g.clk.Now().Sub(g.since)
}

// Pause stops the inactivity stopwatch, for example while the source is
// back-pressured or paused for watermark alignment: records may be waiting,
// so silence then says nothing about the split. Pauses nest; each Pause needs
// a matching Resume. Pausing does not change an idle status already reached.
func (g *IdlenessGenerator[T]) Pause() {
	g.paused++
	if g.paused == 1 && g.timing {
		g.elapsed += g.clk.Now().Sub(g.since)
	}
}

// Resume undoes one Pause; when the last one is undone the stopwatch runs
// again. A Resume without a matching Pause does nothing.
func (g *IdlenessGenerator[T]) Resume() {
	if g.paused == 0 {
		return
	}
	g.paused--
	if g.paused == 0 && g.timing {
		g.since = g.clk.Now()
	}
}

// Paused reports whether the stopwatch is paused.
func (g *IdlenessGenerator[T]) Paused() bool { return g.paused > 0 }
