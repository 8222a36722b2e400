package keygroup

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func ranges(maxP, p int) []Range {
	rs := make([]Range, p)
	for i := range rs {
		rs[i] = RangeFor(maxP, p, i)
	}
	return rs
}

func TestRangeForSeedExamples(t *testing.T) {
	tests := []struct {
		maxP, p int
		want    string
	}{
		{128, 1, "[[0,127]]"},
		{128, 4, "[[0,31] [32,63] [64,95] [96,127]]"},
		{128, 8, "[[0,15] [16,31] [32,47] [48,63] [64,79] [80,95] [96,111] [112,127]]"},
		{10, 4, "[[0,2] [3,4] [5,7] [8,9]]"}, // sizes 3,2,3,2: interleaved
		{10, 3, "[[0,3] [4,6] [7,9]]"},
		{7, 7, "[[0,0] [1,1] [2,2] [3,3] [4,4] [5,5] [6,6]]"},
		{128, 3, "[[0,42] [43,85] [86,127]]"},
		{32768, 2, "[[0,16383] [16384,32767]]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(ranges(tt.maxP, tt.p)); got != tt.want {
			t.Errorf("ranges(maxP=%d, p=%d) = %s, want %s", tt.maxP, tt.p, got, tt.want)
		}
	}

	var sizes []int
	for _, r := range ranges(10, 4) {
		sizes = append(sizes, r.Len())
	}
	if fmt.Sprint(sizes) != "[3 2 3 2]" {
		t.Errorf("maxP 10, p 4 sizes = %v, want [3 2 3 2]", sizes)
	}
}

// checkPartition verifies invariants I3, I4 and I5 for one (maxP, p) pair
// and reports the first violation.
func checkPartition(maxP, p int) error {
	next := 0
	lo, hi := maxP/p, (maxP+p-1)/p
	for i := 0; i < p; i++ {
		r := RangeFor(maxP, p, i)
		if r.Start != next {
			return fmt.Errorf("maxP %d p %d: subtask %d starts at %d, want %d", maxP, p, i, r.Start, next)
		}
		if n := r.Len(); n < lo || n > hi || n == 0 {
			return fmt.Errorf("maxP %d p %d: subtask %d has %d key groups, want %d..%d", maxP, p, i, n, lo, hi)
		}
		for kg := r.Start; kg <= r.End; kg++ {
			if got := OperatorIndex(kg, maxP, p); got != i {
				return fmt.Errorf("maxP %d p %d: OperatorIndex(%d) = %d, but RangeFor(%d) = %v", maxP, p, kg, got, i, r)
			}
		}
		next = r.End + 1
	}
	if next != maxP {
		return fmt.Errorf("maxP %d p %d: ranges end at %d, want %d", maxP, p, next-1, maxP-1)
	}
	return nil
}

// TestPartitionGrid checks exhaustively that every key group is owned by
// exactly one subtask and that OperatorIndex agrees with RangeFor, for every
// 1 <= p <= maxP <= 200 and for selected large max parallelisms.
func TestPartitionGrid(t *testing.T) {
	for maxP := 1; maxP <= 200; maxP++ {
		for p := 1; p <= maxP; p++ {
			if err := checkPartition(maxP, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, maxP := range []int{256, 1000, 4096, 32767, UpperBound} {
		for _, p := range []int{1, 2, 3, 7, 100, 127, 128, 129, 255, 1000, 4095, 4096, 32767, 32768} {
			if p > maxP {
				continue
			}
			if err := checkPartition(maxP, p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPartitionProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxP := rapid.IntRange(1, UpperBound).Draw(t, "maxP")
		p := rapid.IntRange(1, maxP).Draw(t, "p")
		kg := rapid.IntRange(0, maxP-1).Draw(t, "kg")

		owner := OperatorIndex(kg, maxP, p)
		if owner < 0 || owner >= p {
			t.Fatalf("OperatorIndex(%d, %d, %d) = %d out of [0, %d)", kg, maxP, p, owner, p)
		}
		owners := 0
		for _, i := range []int{owner - 1, owner, owner + 1} {
			if i < 0 || i >= p {
				continue
			}
			if RangeFor(maxP, p, i).Contains(kg) {
				owners++
				if i != owner {
					t.Fatalf("key group %d in range of %d, OperatorIndex says %d", kg, i, owner)
				}
			}
		}
		if owners != 1 {
			t.Fatalf("key group %d owned by %d neighbouring subtasks", kg, owners)
		}
		// Neighbouring ranges are adjacent and sizes differ by at most one.
		i := rapid.IntRange(0, p-1).Draw(t, "i")
		r := RangeFor(maxP, p, i)
		if n := r.Len(); n != maxP/p && n != maxP/p+1 {
			t.Fatalf("RangeFor(%d, %d, %d) = %v has %d key groups", maxP, p, i, r, n)
		}
		if i == 0 && r.Start != 0 {
			t.Fatalf("first range %v does not start at 0", r)
		}
		if i == p-1 && r.End != maxP-1 {
			t.Fatalf("last range %v does not end at %d", r, maxP-1)
		}
		if i > 0 && RangeFor(maxP, p, i-1).End+1 != r.Start {
			t.Fatalf("range %d %v not adjacent to range %d %v", i-1, RangeFor(maxP, p, i-1), i, r)
		}
	})
}

// TestKeyGroupIndependentOfParallelism is invariant I2: rescaling moves key
// groups, not keys.
func TestKeyGroupIndependentOfParallelism(t *testing.T) {
	h, _ := HasherFor[string]()
	for i := 0; i < 1000; i++ {
		key := fmt.Sprintf("key-%d", i)
		kg := KeyGroupOf(h, key, 128)
		for _, p := range []int{1, 2, 3, 4, 5, 8, 64, 127, 128} {
			owner := OperatorIndex(kg, 128, p)
			if !RangeFor(128, p, owner).Contains(kg) {
				t.Fatalf("key %q kg %d: owner %d at p=%d does not contain it", key, kg, owner, p)
			}
		}
	}
}

func TestRangeMethods(t *testing.T) {
	r := Range{Start: 3, End: 5}
	if r.Len() != 3 || r.String() != "[3,5]" {
		t.Errorf("Range{3,5}: Len %d String %q", r.Len(), r.String())
	}
	for kg, want := range map[int]bool{2: false, 3: true, 4: true, 5: true, 6: false} {
		if r.Contains(kg) != want {
			t.Errorf("Range{3,5}.Contains(%d) = %v", kg, !want)
		}
	}
	empty := Range{Start: 0, End: -1}
	if empty.Len() != 0 || empty.Contains(0) || empty.Contains(-1) {
		t.Errorf("empty range misbehaves: Len %d", empty.Len())
	}
}

func TestDefaultMaxParallelism(t *testing.T) {
	// Expected values from Flink's computeDefaultMaxParallelism formula run
	// in Java (with MathUtils.roundUpToPowerOfTwo re-typed from Flink).
	tests := []struct{ p, want int }{
		{1, 128}, {2, 128}, {64, 128}, {85, 128}, {86, 256}, {100, 256}, {128, 256},
		{171, 256}, {172, 512}, {1000, 2048}, {10922, 16384}, {10923, 16384},
		{21845, 32768}, {21846, 32768}, {32767, 32768}, {32768, 32768},
	}
	for _, tt := range tests {
		if got := DefaultMaxParallelism(tt.p); got != tt.want {
			t.Errorf("DefaultMaxParallelism(%d) = %d, want %d", tt.p, got, tt.want)
		}
	}
	// Invariant I8 over the whole domain.
	for p := 1; p <= UpperBound; p++ {
		m := DefaultMaxParallelism(p)
		if m < DefaultLowerBound || m > UpperBound || m&(m-1) != 0 {
			t.Fatalf("DefaultMaxParallelism(%d) = %d", p, m)
		}
		if err := Validate(m, p); err != nil {
			t.Fatalf("DefaultMaxParallelism(%d) = %d: %v", p, m, err)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		maxP, p int
		want    string // "" for valid
	}{
		{1, 1, ""},
		{128, 4, ""},
		{128, 128, ""},
		{UpperBound, UpperBound, ""},
		{128, 300, "keygroup: parallelism 300 exceeds max parallelism 128; raise the max parallelism (fixed for the life of the job's state)"},
		{0, 1, "keygroup: max parallelism 0 out of range [1, 32768]"},
		{-5, 1, "keygroup: max parallelism -5 out of range [1, 32768]"},
		{32769, 1, "keygroup: max parallelism 32769 out of range [1, 32768]"},
		{128, 0, "keygroup: parallelism 0 out of range [1, 32768]"},
		{128, -1, "keygroup: parallelism -1 out of range [1, 32768]"},
		{UpperBound, 40000, "keygroup: parallelism 40000 out of range [1, 32768]"},
	}
	for _, tt := range tests {
		err := Validate(tt.maxP, tt.p)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Validate(%d, %d) = %v, want nil", tt.maxP, tt.p, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("Validate(%d, %d) = %v, want %q", tt.maxP, tt.p, err, tt.want)
		}
	}
}

func TestPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"Assign maxP 0", func() { Assign(1, 0) }, "max parallelism 0 out of range"},
		{"Assign maxP too big", func() { Assign(1, UpperBound+1) }, "max parallelism 32769 out of range"},
		{"OperatorIndex p > maxP", func() { OperatorIndex(0, 4, 5) }, "exceeds max parallelism"},
		{"OperatorIndex kg too big", func() { OperatorIndex(128, 128, 4) }, "key group 128 out of range [0, 128)"},
		{"OperatorIndex kg negative", func() { OperatorIndex(-1, 128, 4) }, "key group -1 out of range"},
		{"RangeFor index too big", func() { RangeFor(128, 4, 4) }, "subtask index 4 out of range [0, 4)"},
		{"RangeFor index negative", func() { RangeFor(128, 4, -1) }, "subtask index -1 out of range"},
		{"RangeFor maxP 0", func() { RangeFor(0, 1, 0) }, "max parallelism 0 out of range"},
		{"DefaultMaxParallelism 0", func() { DefaultMaxParallelism(0) }, "parallelism 0 out of range"},
		{"DefaultMaxParallelism too big", func() { DefaultMaxParallelism(UpperBound + 1) }, "parallelism 32769 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("no panic")
				}
				if msg := fmt.Sprint(r); !strings.Contains(msg, tt.want) {
					t.Fatalf("panic %q does not contain %q", msg, tt.want)
				}
			}()
			tt.f()
		})
	}
}

// TestAssignerMatchesAssign: an Assigner gives Assign's key group for every
// hash, for powers of two and other max parallelisms, and the zero
// Assigner is max parallelism 1.
func TestAssignerMatchesAssign(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxP := rapid.OneOf(rapid.IntRange(1, UpperBound), rapid.SampledFrom([]int{1, 2, 128, 4096, UpperBound})).Draw(t, "maxP")
		a := NewAssigner(maxP)
		for range 20 {
			h := rapid.Int32().Draw(t, "hash")
			if got, want := a.Assign(h), Assign(h, maxP); got != want {
				t.Fatalf("Assigner(%d).Assign(%d) = %d, Assign = %d", maxP, h, got, want)
			}
			if got := (Assigner{}).Assign(h); got != 0 {
				t.Fatalf("zero Assigner gave %d for %d", got, h)
			}
		}
	})
	for _, bad := range []int{0, -1, UpperBound + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewAssigner(%d) did not panic", bad)
				}
			}()
			NewAssigner(bad)
		}()
	}
}

// TestRouterMatchesOperatorIndex: a Router gives OperatorIndex's subtask for
// every key group, for powers of two and other max parallelisms, the zero
// Router sends everything to 0, and bad parallelisms panic.
func TestRouterMatchesOperatorIndex(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxP := rapid.OneOf(rapid.SampledFrom([]int{1, 2, 128, 4096, UpperBound}), rapid.IntRange(1, UpperBound)).Draw(t, "maxP")
		par := rapid.IntRange(1, maxP).Draw(t, "par")
		r := NewRouter(maxP, par)
		for _, kg := range []int{0, maxP - 1, rapid.IntRange(0, maxP-1).Draw(t, "kg")} {
			if got, want := r.Operator(kg), OperatorIndex(kg, maxP, par); got != want {
				t.Fatalf("Router(%d, %d).Operator(%d) = %d, OperatorIndex = %d", maxP, par, kg, got, want)
			}
			if got := (Router{}).Operator(kg); got != 0 {
				t.Fatalf("zero Router gave %d for %d", got, kg)
			}
		}
	})
	for _, bad := range [][2]int{{0, 1}, {UpperBound + 1, 1}, {128, 0}, {128, 129}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewRouter(%d, %d) did not panic", bad[0], bad[1])
				}
			}()
			NewRouter(bad[0], bad[1])
		}()
	}
}
