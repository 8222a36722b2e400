package window_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/window"
)

func TestWindowMethods(t *testing.T) {
	w := window.Window{Start: 10, End: 20}
	if w.MaxTimestamp() != 19 {
		t.Fatalf("MaxTimestamp = %d", w.MaxTimestamp())
	}
	if !w.Contains(10) || !w.Contains(19) || w.Contains(20) || w.Contains(9) {
		t.Fatal("Contains")
	}
	for _, c := range []struct {
		o    window.Window
		want bool
	}{
		{window.Window{Start: 20, End: 30}, true}, // touching after
		{window.Window{Start: 0, End: 10}, true},  // touching before
		{window.Window{Start: 21, End: 30}, false},
		{window.Window{Start: 0, End: 9}, false},
		{window.Window{Start: 12, End: 15}, true},
	} {
		if got := w.Intersects(c.o); got != c.want || c.o.Intersects(w) != c.want {
			t.Errorf("%v.Intersects(%v) = %v, want %v", w, c.o, got, c.want)
		}
	}
	if got := w.Cover(window.Window{Start: 25, End: 27}); got != (window.Window{Start: 10, End: 27}) {
		t.Errorf("Cover = %v", got)
	}
	if w.String() != "[10, 20)" {
		t.Errorf("String = %q", w.String())
	}
}

// flinkStart is Flink's formula, correct only while t - offset + size >= 0.
func flinkStart(t, offset, size int64) int64 { return t - (t-offset+size)%size }

// TestTumblingStart checks I1 for tumbling windows exhaustively on a small
// range that crosses zero, against the definition (the window contains t
// and its start is congruent to the offset) and against Flink's formula
// where that formula is valid.
func TestTumblingStart(t *testing.T) {
	for size := int64(1); size <= 7; size++ {
		for off := -(size - 1); off < size; off++ {
			a := window.TumblingWithOffset(time.Duration(size)*time.Millisecond, time.Duration(off)*time.Millisecond)
			for ts := int64(-60); ts <= 60; ts++ {
				ws := a.AssignWindows(ts, nil)
				if len(ws) != 1 {
					t.Fatalf("size %d off %d ts %d: %d windows", size, off, ts, len(ws))
				}
				w := ws[0]
				if !w.Contains(ts) || w.End-w.Start != size || ((w.Start-off)%size+size)%size != 0 {
					t.Fatalf("size %d off %d ts %d: window %v", size, off, ts, w)
				}
				if ts-off+size >= 0 && flinkStart(ts, off, size) != w.Start {
					t.Fatalf("size %d off %d ts %d: start %d, Flink %d", size, off, ts, w.Start, flinkStart(ts, off, size))
				}
			}
		}
	}
}

// TestNegativeTimestamps pins the cases where Flink's formula goes wrong.
func TestNegativeTimestamps(t *testing.T) {
	a := window.Tumbling(5 * time.Second)
	for _, c := range []struct {
		ts    int64
		start int64
	}{
		{0, 0}, {4999, 0}, {-1, -5000}, {-4999, -5000}, {-5000, -5000}, {-5001, -10000}, {-12345, -15000},
	} {
		if got := a.AssignWindows(c.ts, nil)[0]; got != (window.Window{Start: c.start, End: c.start + 5000}) {
			t.Errorf("ts %d: %v, want start %d", c.ts, got, c.start)
		}
	}
	// Flink's formula on ts=-5001 gives -5000, a window that does not
	// contain the timestamp.
	if s := flinkStart(-5001, 0, 5000); s != -5000 {
		t.Fatalf("expected Flink's formula to be wrong here, got %d", s)
	}
	// Offsets: windows [k*1h - 15m, ...).
	b := window.TumblingWithOffset(time.Hour, -15*time.Minute)
	if got := b.AssignWindows(-1, nil)[0]; got.Start != -15*60*1000 {
		t.Errorf("offset -15m, ts -1: %v", got)
	}
	if got := b.AssignWindows(-15*60*1000-1, nil)[0]; got.Start != -75*60*1000 {
		t.Errorf("offset -15m, ts -15m-1: %v", got)
	}
}

// TestSlidingAssign checks I1 for sliding windows: exactly the windows with
// aligned starts that contain t, latest first.
func TestSlidingAssign(t *testing.T) {
	for size := int64(1); size <= 9; size++ {
		for slide := int64(1); slide <= 9; slide++ {
			for off := -(slide - 1); off < slide; off++ {
				a := window.SlidingWithOffset(time.Duration(size)*time.Millisecond, time.Duration(slide)*time.Millisecond, time.Duration(off)*time.Millisecond)
				for ts := int64(-40); ts <= 40; ts++ {
					got := a.AssignWindows(ts, nil)
					var want []window.Window
					for s := ts + 100*slide; s >= ts-100*slide; s-- {
						if ((s-off)%slide+slide)%slide == 0 && s <= ts && ts < s+size {
							want = append(want, window.Window{Start: s, End: s + size})
						}
					}
					if len(got) != len(want) {
						t.Fatalf("size %d slide %d off %d ts %d: got %v want %v", size, slide, off, ts, got, want)
					}
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("size %d slide %d off %d ts %d: got %v want %v", size, slide, off, ts, got, want)
						}
					}
				}
			}
		}
	}
	if n := len(window.Sliding(10*time.Second, 5*time.Second).AssignWindows(12345, nil)); n != 2 {
		t.Fatalf("10s/5s: %d windows, want 2", n)
	}
	if n := len(window.Sliding(10*time.Second, time.Second).AssignWindows(-12345, nil)); n != 10 {
		t.Fatalf("10s/1s: %d windows, want 10", n)
	}
}

func TestAssignerKinds(t *testing.T) {
	for _, c := range []struct {
		a                 window.Assigner
		eventTime, merges bool
	}{
		{window.Tumbling(time.Second), true, false},
		{window.TumblingProcessing(time.Second), false, false},
		{window.Sliding(2*time.Second, time.Second), true, false},
		{window.SlidingProcessing(2*time.Second, time.Second), false, false},
		{window.Session(time.Second), true, true},
		{window.SessionProcessing(time.Second), false, true},
	} {
		if c.a.IsEventTime() != c.eventTime || c.a.IsMerging() != c.merges {
			t.Errorf("%v: event time %v merging %v", c.a, c.a.IsEventTime(), c.a.IsMerging())
		}
	}
	if got := window.Session(5*time.Second).AssignWindows(-7, nil); len(got) != 1 || got[0] != (window.Window{Start: -7, End: 4993}) {
		t.Fatalf("session: %v", got)
	}
}

func TestAssignerValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"zero size", func() { window.Tumbling(0) }, "size must be positive"},
		{"negative size", func() { window.TumblingProcessing(-time.Second) }, "size must be positive"},
		{"sub-ms size", func() { window.Tumbling(1500 * time.Microsecond) }, "whole number of milliseconds"},
		{"offset = size", func() { window.TumblingWithOffset(time.Second, time.Second) }, "smaller than the size"},
		{"offset = -size", func() { window.TumblingWithOffset(time.Second, -time.Second) }, "smaller than the size"},
		{"zero slide", func() { window.Sliding(time.Second, 0) }, "slide must be positive"},
		{"zero sliding size", func() { window.SlidingProcessing(0, time.Second) }, "size must be positive"},
		{"sliding offset", func() { window.SlidingWithOffset(time.Minute, time.Second, 2*time.Second) }, "smaller than the slide"},
		{"zero gap", func() { window.Session(0) }, "gap must be positive"},
		{"negative gap", func() { window.SessionProcessing(-1) }, "gap must be positive"},
		{"negative lateness", func() { window.AllowedLateness(-time.Second) }, "lateness must be zero or positive"},
		{"nil late tag", func() { window.LateOutput[int](nil) }, "nil tag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				s, _ := r.(string)
				if !strings.HasPrefix(s, "window: ") || !strings.Contains(s, c.msg) {
					t.Fatalf("panic %v, want one mentioning %q", r, c.msg)
				}
			}()
			c.f()
		})
	}
}

// TestAssignNoAlloc checks the allocation half of I9 for the assigners.
func TestAssignNoAlloc(t *testing.T) {
	scratch := make([]window.Window, 0, 16)
	for _, a := range []window.Assigner{window.Tumbling(time.Second), window.Sliding(10*time.Second, time.Second)} {
		ts := int64(0)
		if n := testing.AllocsPerRun(1000, func() {
			ts += 7
			scratch = a.AssignWindows(ts, scratch[:0])
		}); n != 0 {
			t.Errorf("%v: %v allocs per assignment", a, n)
		}
	}
}
