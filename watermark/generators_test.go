package watermark

import (
	"testing"
	"time"
)

// I11: the first watermark of bounded out-of-orderness is Min.
func TestBoundedFirstWatermarkIsMin(t *testing.T) {
	for _, b := range []time.Duration{0, time.Millisecond, 5 * time.Second, 24 * time.Hour} {
		r := &recorder{}
		g := BoundedOutOfOrderness[string](b)
		g.OnPeriodicEmit(r)
		r.expect(t, b.String(), wm(Min))
	}
}

// I11, seed example: with B = 5s, a record at 12:05:05.000 yields the
// watermark 12:04:59.999, which is exactly the maxTimestamp of the window
// ending at 12:05:00, so that window fires then; a record at 12:05:04.999
// yields 12:04:59.998 and does not fire it.
func TestBoundedMinusOneRule(t *testing.T) {
	windowEnd := at(12, 5, 0, 0)
	maxTimestamp := windowEnd - 1 // 12:04:59.999
	fires := func(w int64) bool { return w >= maxTimestamp }

	g := BoundedOutOfOrderness[string](5 * time.Second)
	r := &recorder{}
	g.OnEvent("a", at(12, 5, 4, 999), r)
	r.expect(t, "OnEvent emits nothing")
	g.OnPeriodicEmit(r)
	r.expect(t, "after 12:05:04.999", wm(at(12, 4, 59, 998)))
	if fires(at(12, 4, 59, 998)) {
		t.Fatal("window [12:04, 12:05) fired at 12:04:59.998")
	}

	g.OnEvent("b", at(12, 5, 5, 0), r)
	g.OnPeriodicEmit(r)
	r.expect(t, "after 12:05:05.000", wm(at(12, 4, 59, 999)))
	if !fires(at(12, 4, 59, 999)) {
		t.Fatal("window [12:04, 12:05) did not fire at 12:04:59.999")
	}
}

// I11: maxTs only grows; out-of-order records do not lower the watermark,
// and every periodic emit repeats the current value.
func TestBoundedTracksMaximum(t *testing.T) {
	g := BoundedOutOfOrderness[int](10 * time.Millisecond)
	r := &recorder{}
	for _, ts := range []int64{100, 50, 130, 120} {
		g.OnEvent(0, ts, r)
	}
	g.OnPeriodicEmit(r)
	g.OnPeriodicEmit(r)
	r.expect(t, "max 130, B 10", wm(119), wm(119))
}

// I11: Ascending is B = 0: the watermark trails the highest timestamp by 1.
func TestAscending(t *testing.T) {
	g := Ascending[int]()
	r := &recorder{}
	g.OnPeriodicEmit(r)
	g.OnEvent(0, 1000, r)
	g.OnPeriodicEmit(r)
	r.expect(t, "ascending", wm(Min), wm(999))
}

func TestBoundedNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a negative bound")
		}
	}()
	BoundedOutOfOrderness[int](-time.Millisecond)
}

// I12: punctuated generators emit from OnEvent only, when asked to.
func TestPunctuated(t *testing.T) {
	g := Punctuated(func(ev string, ts int64) (int64, bool) {
		return ts, ev == "mark"
	})
	r := &recorder{}
	g.OnEvent("data", 10, r)
	g.OnPeriodicEmit(r)
	r.expect(t, "no mark")
	g.OnEvent("mark", 20, r)
	r.expect(t, "mark", wm(20))
}

// I12: None never emits.
func TestNone(t *testing.T) {
	g := None[int]()
	r := &recorder{}
	g.OnEvent(1, 10, r)
	g.OnPeriodicEmit(r)
	r.expect(t, "none")
}

func TestGeneratorFuncs(t *testing.T) {
	var g Generator[int] = GeneratorFuncs[int]{
		Event: func(ev int, ts int64, out Output) { out.EmitWatermark(ts - int64(ev)) },
	}
	r := &recorder{}
	g.OnEvent(1, 10, r)
	g.OnPeriodicEmit(r) // nil Periodic: nothing
	r.expect(t, "funcs", wm(9))
}
