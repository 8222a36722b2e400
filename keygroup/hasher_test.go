package keygroup

import (
	"fmt"
	"math"
	"testing"
)

type userID string
type tenant int32
type seq int64
type counter int
type flag bool

func TestHasherForSupportedKinds(t *testing.T) {
	str, ok := HasherFor[string]()
	if !ok || str("hello") != 99162322 || str("") != 0 {
		t.Errorf("HasherFor[string]: ok=%v", ok)
	}
	named, ok := HasherFor[userID]()
	if !ok || named("a\U0001F600b") != HashString("a\U0001F600b") || named("a\U0001F600b") != 57849694 {
		t.Errorf("HasherFor[userID]: ok=%v", ok)
	}
	i32, ok := HasherFor[int32]()
	if !ok || i32(math.MinInt32) != math.MinInt32 || i32(-42) != -42 {
		t.Errorf("HasherFor[int32]: ok=%v", ok)
	}
	t32, ok := HasherFor[tenant]()
	if !ok || t32(7) != 7 {
		t.Errorf("HasherFor[tenant]: ok=%v", ok)
	}
	i64, ok := HasherFor[int64]()
	if !ok || i64(-42) != 41 || i64(math.MaxInt64) != math.MinInt32 {
		t.Errorf("HasherFor[int64]: ok=%v", ok)
	}
	s64, ok := HasherFor[seq]()
	if !ok || s64(1<<32) != 1 {
		t.Errorf("HasherFor[seq]: ok=%v", ok)
	}
	// Go int is a Java long: -1 hashes to 0 (Long.hashCode), not -1.
	in, ok := HasherFor[int]()
	if !ok || in(-1) != 0 || in(42) != 42 || in(-42) != 41 {
		t.Errorf("HasherFor[int]: ok=%v", ok)
	}
	cn, ok := HasherFor[counter]()
	if !ok || cn(-1) != 0 {
		t.Errorf("HasherFor[counter]: ok=%v", ok)
	}
	b, ok := HasherFor[bool]()
	if !ok || b(true) != 1231 || b(false) != 1237 {
		t.Errorf("HasherFor[bool]: ok=%v", ok)
	}
	fb, ok := HasherFor[flag]()
	if !ok || fb(true) != 1231 || fb(false) != 1237 {
		t.Errorf("HasherFor[flag]: ok=%v", ok)
	}
}

func TestHasherForUnsupportedKinds(t *testing.T) {
	check := func(name string, h any, ok bool) {
		t.Helper()
		if ok {
			t.Errorf("HasherFor[%s] unexpectedly supported", name)
		}
		if fmt.Sprint(h) != "<nil>" {
			t.Errorf("HasherFor[%s] returned non-nil hasher", name)
		}
	}
	h1, ok1 := HasherFor[uint32]()
	check("uint32", h1, ok1)
	h2, ok2 := HasherFor[int16]()
	check("int16", h2, ok2)
	h3, ok3 := HasherFor[float64]()
	check("float64", h3, ok3)
	h4, ok4 := HasherFor[any]()
	check("any", h4, ok4)
	h5, ok5 := HasherFor[struct{ A string }]()
	check("struct", h5, ok5)
	h6, ok6 := HasherFor[[2]int32]()
	check("array", h6, ok6)
	h7, ok7 := HasherFor[*string]()
	check("*string", h7, ok7)
}

func TestKeyGroupOf(t *testing.T) {
	h, _ := HasherFor[userID]()
	for _, v := range javaStringVectors {
		if got := KeyGroupOf(h, userID(v.in), 32768); got != v.kg32768 {
			t.Errorf("KeyGroupOf(%q, 32768) = %d, want %d", v.in, got, v.kg32768)
		}
	}
	hi, _ := HasherFor[int64]()
	for _, v := range javaInt64Vectors {
		if got := KeyGroupOf(hi, v.in, 128); got != v.kg128 {
			t.Errorf("KeyGroupOf(%d, 128) = %d, want %d", v.in, got, v.kg128)
		}
	}
}

// TestHasherZeroAlloc is invariant I7.
func TestHasherZeroAlloc(t *testing.T) {
	hs, _ := HasherFor[string]()
	hu, _ := HasherFor[userID]()
	hi, _ := HasherFor[int]()
	hb, _ := HasherFor[bool]()
	key := "user-\u4e2d\u6587-\U0001F600-12345"
	var sink int
	allocs := testing.AllocsPerRun(1000, func() {
		sink += KeyGroupOf(hs, key, 128)
		sink += KeyGroupOf(hu, userID(key), 128)
		sink += KeyGroupOf(hi, sink, 128)
		sink += KeyGroupOf(hb, sink&1 == 0, 128)
	})
	if allocs != 0 {
		t.Fatalf("hashers allocate %v times per run, want 0", allocs)
	}
	_ = sink
}
