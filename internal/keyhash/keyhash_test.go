package keyhash

import (
	"fmt"
	"hash/maphash"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestKeyHashSpreads checks that the hashes of typical keys spread over the
// slots of a table (low bits) and rarely collide, for each kind of key.
func TestKeyHashSpreads(t *testing.T) {
	const n = 1 << 14
	check := func(name string, h func(i int) uint32) {
		t.Helper()
		seen := make(map[uint32]bool, n)
		buckets := make([]int, 256)
		for i := range n {
			v := h(i)
			seen[v] = true
			buckets[v&255]++
		}
		if len(seen) < n-4 {
			t.Errorf("%s: %d distinct hashes of %d keys", name, len(seen), n)
		}
		for b, c := range buckets {
			if c < n/256/2 || c > n/256*2 {
				t.Errorf("%s: slot %d of 256 gets %d of %d keys", name, b, c, n)
				break
			}
		}
	}
	check("int64", func(i int) uint32 { return Of(int64(i)) })
	check("int64 stride 1024", func(i int) uint32 { return Of(int64(i) << 10) })
	check("int", func(i int) uint32 { return Of(i) })
	check("int32", func(i int) uint32 { return Of(int32(i)) })
	check("uint64", func(i int) uint32 { return Of(uint64(i)) })
	check("uint32", func(i int) uint32 { return Of(uint32(i)) })
	check("short string", func(i int) uint32 { return Of(fmt.Sprint(i)) })
	check("string", func(i int) uint32 { return Of(fmt.Sprint("user-", i)) })
	check("long string", func(i int) uint32 { return Of(fmt.Sprintf("a rather long key of a user, number %08d", i)) })
	check("struct", func(i int) uint32 { return Of(struct{ a, b int }{i, 7}) })
	// Sum64's top byte (the value index's tags) spreads as well.
	seed, top := NewSeed(), func(h uint64) uint32 { return uint32(h>>56 | h<<8) }
	check("int64 Sum64 top", func(i int) uint32 { return top(For[int64]().Sum64(seed, int64(i))) })
	check("string Sum64 top", func(i int) uint32 { return top(For[string]().Sum64(seed, fmt.Sprint("user-", i))) })
	check("struct Sum64 top", func(i int) uint32 { return top(For[struct{ a, b int }]().Sum64(seed, struct{ a, b int }{i, 7})) })
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "abcdefgh", "abcdefghi", "abcdefghijklmnopq"} {
		if Of(s) != Of(string([]byte(s))) {
			t.Fatalf("hash of %q is not a function of its bytes", s)
		}
	}
}

// Under the process's seed, Sum64 (truncated) is Of for every key type:
// negative and extreme integers, empty and long strings, named types
// (which Of does not classify: they take its generic path, and so must a
// Hasher), structs, and the zero Hasher.
func TestSum64IsOf(t *testing.T) {
	type name int64
	type pair struct {
		a int32
		b string
	}
	rapid.Check(t, func(t *rapid.T) {
		i := rapid.Int64().Draw(t, "i")
		s := rapid.String().Draw(t, "s")
		same(t, For[int64](), i)
		same(t, For[int](), int(i))
		same(t, For[int32](), int32(i))
		same(t, For[uint64](), uint64(i))
		same(t, For[uint32](), uint32(i))
		same(t, For[string](), s)
		same(t, For[name](), name(i))
		same(t, For[pair](), pair{int32(i), s})
		same(t, Hasher[string]{}, s)
		same(t, Hasher[int64]{}, i)
		same(t, Hasher[pair]{}, pair{int32(i), s})
	})
}

var processSeed = Seed{m: keySeed, w: keyIntSeed}

func same[K comparable](t *rapid.T, h Hasher[K], k K) {
	if got, want := uint32(h.Sum64(processSeed, k)), Of(k); got != want {
		t.Fatalf("%T %v: Sum64 %x, Of %x", k, k, got, want)
	}
}

// BenchmarkSum64 compares Sum64 with maphash.Comparable (what the value
// state's index used before) on int64 and string keys, called from generic
// code as the index calls them.
func BenchmarkSum64(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
	}
	ints := func(i int) int64 { return int64(i) }
	strs := func(i int) string { return keys[i&1023] }
	b.Run("int64/maphash", func(b *testing.B) { benchMaphash(b, ints) })
	b.Run("int64/Sum64", func(b *testing.B) { benchSum64(b, For[int64](), ints) })
	b.Run("string/maphash", func(b *testing.B) { benchMaphash(b, strs) })
	b.Run("string/Sum64", func(b *testing.B) { benchSum64(b, For[string](), strs) })
}

//go:noinline
func benchMaphash[K comparable](b *testing.B, key func(int) K) {
	seed := maphash.MakeSeed()
	var s uint64
	for i := range b.N {
		s += maphash.Comparable(seed, key(i))
	}
	sinkHash = s
}

//go:noinline
func benchSum64[K comparable](b *testing.B, h Hasher[K], key func(int) K) {
	seed := NewSeed()
	var s uint64
	for i := range b.N {
		s += h.Sum64(seed, key(i))
	}
	sinkHash = s
}

var sinkHash uint64

// Sum64 hashes keys equal under == alike (floats' zeros, interfaces by
// their dynamic value), and two seeds give two functions.
func TestSum64(t *testing.T) {
	s1, s2 := NewSeed(), NewSeed()
	if got, want := For[float64]().Sum64(s1, 0.0), For[float64]().Sum64(s1, math.Copysign(0, -1)); got != want {
		t.Fatalf("+0 and -0 hash to %x and %x", got, want)
	}
	if got, want := For[any]().Sum64(s1, any(int64(7))), For[any]().Sum64(s1, any(int64(7))); got != want {
		t.Fatalf("equal interfaces hash to %x and %x", got, want)
	}
	// Two seeds: the hashes of 1,000 keys differ under each (nearly all).
	same := 0
	for i := range 1000 {
		k := fmt.Sprint("user-", i)
		if For[string]().Sum64(s1, k) == For[string]().Sum64(s2, k) {
			same++
		}
		if For[int]().Sum64(s1, i) == For[int]().Sum64(s2, i) {
			same++
		}
	}
	if same > 2 {
		t.Fatalf("%d of 2,000 keys hash alike under two seeds", same)
	}
}
