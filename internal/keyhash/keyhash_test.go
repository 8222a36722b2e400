package keyhash

import (
	"fmt"
	"testing"
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
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "abcdefgh", "abcdefghi", "abcdefghijklmnopq"} {
		if Of(s) != Of(string([]byte(s))) {
			t.Fatalf("hash of %q is not a function of its bytes", s)
		}
	}
}
