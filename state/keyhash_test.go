package state

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
	check("int64", func(i int) uint32 { return keyHash(int64(i)) })
	check("int64 stride 1024", func(i int) uint32 { return keyHash(int64(i) << 10) })
	check("int", func(i int) uint32 { return keyHash(i) })
	check("int32", func(i int) uint32 { return keyHash(int32(i)) })
	check("uint64", func(i int) uint32 { return keyHash(uint64(i)) })
	check("uint32", func(i int) uint32 { return keyHash(uint32(i)) })
	check("short string", func(i int) uint32 { return keyHash(fmt.Sprint(i)) })
	check("string", func(i int) uint32 { return keyHash(fmt.Sprint("user-", i)) })
	check("long string", func(i int) uint32 { return keyHash(fmt.Sprintf("a rather long key of a user, number %08d", i)) })
	check("struct", func(i int) uint32 { return keyHash(struct{ a, b int }{i, 7}) })
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "abcdefgh", "abcdefghi", "abcdefghijklmnopq"} {
		if keyHash(s) != keyHash(string([]byte(s))) {
			t.Fatalf("hash of %q is not a function of its bytes", s)
		}
	}
}
