package window

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestAssignRange checks the intervals tumbling and sliding assigners give
// the window operator: they contain t, every timestamp in them gets the
// windows t gets (the operator reuses them for such timestamps without
// asking the assigner), each of which contains it, and the interval stops
// where the windows change. The windows themselves are checked against
// worked examples in assigner_test.go.
func TestAssignRange(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.Int64Range(1, 5000).Draw(rt, "size")
		var a Assigner
		switch rapid.IntRange(0, 2).Draw(rt, "kind") {
		case 0:
			a = Tumbling(time.Duration(size) * time.Millisecond)
		case 1:
			off := rapid.Int64Range(-size+1, size-1).Draw(rt, "offset")
			a = TumblingWithOffset(time.Duration(size)*time.Millisecond, time.Duration(off)*time.Millisecond)
		default:
			slide := rapid.Int64Range(1, 3*size).Draw(rt, "slide") // gaps when slide > size
			off := rapid.Int64Range(-slide+1, slide-1).Draw(rt, "offset")
			a = SlidingWithOffset(time.Duration(size)*time.Millisecond, time.Duration(slide)*time.Millisecond,
				time.Duration(off)*time.Millisecond)
		}
		ra, ok := a.(rangeAssigner)
		if !ok {
			rt.Fatalf("%v is not a rangeAssigner", a)
		}
		ts := rapid.Int64Range(-1e12, 1e12).Draw(rt, "t")
		got, lo, hi := ra.assignRange(ts, nil)
		if ts < lo || ts >= hi {
			rt.Fatalf("assignRange(%d): [%d, %d) does not contain it", ts, lo, hi)
		}
		// Every timestamp of [lo, hi) near its ends and at random, and the
		// one just after it, which must differ (the interval is maximal on
		// the right, so the operator assigns again as soon as it must).
		probes := []int64{lo, hi - 1, rapid.Int64Range(lo, hi-1).Draw(rt, "inside")}
		for _, p := range probes {
			if w := a.AssignWindows(p, nil); !slices.Equal(w, got) {
				rt.Fatalf("%v: t=%d gets %v, but %d in [%d, %d) gets %v", a, ts, got, p, lo, hi, w)
			}
			for _, w := range got {
				if !w.Contains(p) {
					rt.Fatalf("%v: window %v for [%d, %d) does not contain %d", a, w, lo, hi, p)
				}
			}
		}
		if w := a.AssignWindows(hi, nil); slices.Equal(w, got) && len(got) > 0 {
			rt.Fatalf("%v: t=%d: [%d, %d) could extend to %d (same windows %v)", a, ts, lo, hi, hi, w)
		}
	})
}
