package keygroup

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestNewRangeRejectsInvalid(t *testing.T) {
	for _, c := range []struct {
		start, end int
		want       string
	}{
		{-1, 3, "start must be >= 0"},
		{5, 4, "end must be >= the start"},
		{0, UpperBound, "must be < 32768"},
	} {
		if _, err := NewRange(c.start, c.end); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRange(%d, %d) = %v, want an error saying %q", c.start, c.end, err, c.want)
		}
	}
	r, err := NewRange(3, 3)
	if err != nil || r != (Range{3, 3}) || r.Len() != 1 {
		t.Fatalf("NewRange(3, 3) = %v, %v", r, err)
	}
}

// TestRangeIntersectAndAll: a key group is in the intersection exactly
// when it is in both ranges; disjoint ranges give EmptyRange; All yields
// each key group of the range once, ascending, and nothing else.
func TestRangeIntersectAndAll(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rng := func(name string) Range {
			return Range{Start: rapid.IntRange(-1, 40).Draw(t, name+".start"), End: rapid.IntRange(-2, 40).Draw(t, name+".end")}
		}
		a, b := rng("a"), rng("b")
		i := a.Intersect(b)
		for kg := -3; kg <= 42; kg++ {
			if i.Contains(kg) != (a.Contains(kg) && b.Contains(kg)) {
				t.Fatalf("%v ∩ %v = %v: key group %d", a, b, i, kg)
			}
		}
		if i.Empty() && i != EmptyRange {
			t.Fatalf("%v ∩ %v = %v, want EmptyRange", a, b, i)
		}
		got := slices.Collect(a.All())
		if len(got) != a.Len() || !slices.IsSorted(got) {
			t.Fatalf("All(%v) = %v", a, got)
		}
		for _, kg := range got {
			if !a.Contains(kg) {
				t.Fatalf("All(%v) yields %d", a, kg)
			}
		}
		if len(got) > 1 && got[len(got)-1]-got[0] != len(got)-1 {
			t.Fatalf("All(%v) = %v: not every key group once", a, got)
		}
	})
}
