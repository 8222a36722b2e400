package watermark

import (
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

var epoch = time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)

// countingClock is a manual clock that counts how often Now is read.
type countingClock struct {
	*clock.Manual
	reads int
}

func (c *countingClock) Now() time.Time {
	c.reads++
	return c.Manual.Now()
}

func newIdle(t *testing.T, inner Generator[int], timeout time.Duration) (*IdlenessGenerator[int], *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(epoch)
	g, ok := WithIdleness(inner, timeout, clk).(*IdlenessGenerator[int])
	if !ok {
		t.Fatal("WithIdleness did not return an *IdlenessGenerator")
	}
	return g, clk
}

// I13: idle after strictly more than the time-out without records, counted
// from the first periodic emit that saw none; not before; MarkIdle once; the
// wrapped generator's periodic emit is suppressed while idle.
func TestIdlenessGoesIdleAfterTimeoutNotBefore(t *testing.T) {
	g, clk := newIdle(t, Ascending[int](), time.Second)
	r := &recorder{}

	g.OnEvent(0, 1000, r)
	g.OnPeriodicEmit(r) // new record: stopwatch reset
	r.expect(t, "record seen", wm(999))

	clk.Advance(200 * time.Millisecond)
	g.OnPeriodicEmit(r) // first empty tick: stopwatch starts now
	r.expect(t, "first empty tick", wm(999))

	clk.Advance(time.Second) // exactly the time-out
	g.OnPeriodicEmit(r)
	r.expect(t, "at exactly the time-out", wm(999))
	if g.IsIdle() {
		t.Fatal("idle at exactly the time-out")
	}

	clk.Advance(time.Millisecond)
	g.OnPeriodicEmit(r)
	r.expect(t, "past the time-out", "idle")
	if !g.IsIdle() {
		t.Fatal("not idle past the time-out")
	}

	clk.Advance(time.Hour)
	g.OnPeriodicEmit(r)
	g.OnPeriodicEmit(r)
	r.expect(t, "still idle: nothing more")
}

// I13: a split that never sees a record goes idle too.
func TestIdlenessWithoutAnyRecord(t *testing.T) {
	g, clk := newIdle(t, BoundedOutOfOrderness[int](time.Second), 500*time.Millisecond)
	r := &recorder{}
	for range 3 { // ticks every 200ms: start at 0, 200ms, 400ms elapsed
		g.OnPeriodicEmit(r)
		clk.Advance(200 * time.Millisecond)
	}
	r.expect(t, "within the time-out", wm(Min), wm(Min), wm(Min))
	g.OnPeriodicEmit(r) // 600ms elapsed
	r.expect(t, "past the time-out", "idle")
}

// I13: records between periodic emits keep the generator active however
// much time passes.
func TestIdlenessRecordsKeepActive(t *testing.T) {
	g, clk := newIdle(t, Ascending[int](), time.Second)
	r := &recorder{}
	for k := range 100 {
		g.OnEvent(0, int64(k), r)
		clk.Advance(200 * time.Millisecond)
		g.OnPeriodicEmit(r)
	}
	for _, e := range r.take() {
		if e == "idle" {
			t.Fatal("marked idle although records kept arriving")
		}
	}
}

// I13 (FLINK-35886): time between Pause and Resume does not count.
func TestIdlenessPauseExcludesTime(t *testing.T) {
	g, clk := newIdle(t, None[int](), time.Second)
	r := &recorder{}
	g.OnEvent(0, 1, r)
	g.OnPeriodicEmit(r) // reset
	clk.Advance(200 * time.Millisecond)
	g.OnPeriodicEmit(r) // stopwatch starts
	clk.Advance(400 * time.Millisecond)
	g.Pause() // 400ms counted so far
	for range 50 {
		clk.Advance(200 * time.Millisecond)
		g.OnPeriodicEmit(r)
	}
	r.expect(t, "paused for 10s")
	if !g.Paused() || g.IsIdle() {
		t.Fatalf("Paused=%v IsIdle=%v", g.Paused(), g.IsIdle())
	}
	g.Resume()
	clk.Advance(600 * time.Millisecond) // 400 + 600 = exactly the time-out
	g.OnPeriodicEmit(r)
	r.expect(t, "1000ms counted")
	clk.Advance(time.Millisecond)
	g.OnPeriodicEmit(r)
	r.expect(t, "1001ms counted", "idle")
}

// I13: a pause that starts before the stopwatch does, and nested pauses.
func TestIdlenessPauseNestingAndEarlyPause(t *testing.T) {
	g, clk := newIdle(t, None[int](), time.Second)
	r := &recorder{}
	g.Pause()
	g.Pause()
	g.OnPeriodicEmit(r) // stopwatch starts while paused
	clk.Advance(5 * time.Second)
	g.OnPeriodicEmit(r)
	g.Resume() // one pause still in force
	clk.Advance(5 * time.Second)
	g.OnPeriodicEmit(r)
	r.expect(t, "paused")
	g.Resume()
	g.Resume() // unmatched: no effect
	clk.Advance(time.Second)
	g.OnPeriodicEmit(r)
	r.expect(t, "exactly the time-out since the last Resume")
	clk.Advance(time.Millisecond)
	g.OnPeriodicEmit(r)
	r.expect(t, "past it", "idle")
}

// I13: the first record after idleness reactivates the output before the
// wrapped generator sees it, and periodic emits resume.
func TestIdlenessRecordReactivates(t *testing.T) {
	inner := Punctuated(func(_ int, ts int64) (int64, bool) { return ts, true })
	g, clk := newIdle(t, inner, time.Second)
	r := &recorder{}
	g.OnPeriodicEmit(r)
	clk.Advance(2 * time.Second)
	g.OnPeriodicEmit(r)
	r.expect(t, "idle", "idle")

	g.OnEvent(0, 42, r)
	r.expect(t, "record", "active", wm(42))
	if g.IsIdle() {
		t.Fatal("still idle after a record")
	}
	g.OnEvent(0, 43, r)
	r.expect(t, "second record", wm(43))

	// It can go idle again, after a fresh time-out.
	g.OnPeriodicEmit(r) // record seen: reset
	g.OnPeriodicEmit(r) // stopwatch starts
	clk.Advance(time.Second)
	g.OnPeriodicEmit(r)
	r.expect(t, "not yet")
	clk.Advance(time.Millisecond)
	g.OnPeriodicEmit(r)
	r.expect(t, "idle again", "idle")
}

// I13: OnEvent reads no clock.
func TestIdlenessOnEventReadsNoClock(t *testing.T) {
	clk := &countingClock{Manual: clock.NewManual(epoch)}
	g := WithIdleness(Ascending[int](), time.Second, clk)
	r := &nopOutput{}
	g.OnPeriodicEmit(r)
	g.OnPeriodicEmit(r)
	before := clk.reads
	for k := range 1000 {
		g.OnEvent(0, int64(k), r)
	}
	if clk.reads != before {
		t.Fatalf("OnEvent read the clock %d times", clk.reads-before)
	}
	allocs := testing.AllocsPerRun(1000, func() { g.OnEvent(0, 5, r) })
	if allocs != 0 {
		t.Fatalf("OnEvent allocates %v", allocs)
	}
}

func TestWithIdlenessRejectsNonPositiveTimeout(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("no panic for time-out %v", d)
				}
			}()
			WithIdleness(None[int](), d, clock.NewManual(epoch))
		}()
	}
}
