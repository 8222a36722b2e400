// Package keyhash hashes keys for the in-memory hash tables of packages
// state (namespaced state) and timer (the identity index of a timestamp's
// timers). Hashes live only in memory: they are never written to snapshots,
// and a restore hashes the keys again, so they may differ between processes
// (they are seeded at start-up, like Go maps, so that keys chosen to collide
// in one process do not in another).
//
// Integer keys go through a seeded 64-bit mixer and strings through a
// seeded wyhash-style function (a few ns, about half of what
// hash/maphash.String costs); other key types use hash/maphash.Comparable.
package keyhash

import (
	"hash/maphash"
	"math/bits"
)

var (
	keySeed    = maphash.MakeSeed()
	keyIntSeed = maphash.String(keySeed, "weir")
)

// Of returns the hash of k.
func Of[K comparable](k K) uint32 {
	switch v := any(k).(type) {
	case int64:
		return uint32(mixInt(uint64(v)))
	case int:
		return uint32(mixInt(uint64(v)))
	case int32:
		return uint32(mixInt(uint64(v)))
	case uint64:
		return uint32(mixInt(v))
	case uint32:
		return uint32(mixInt(uint64(v)))
	case string:
		return uint32(strHash(v))
	}
	return uint32(maphash.Comparable(keySeed, k))
}

// mixInt is a seeded murmur3 finalizer.
func mixInt(x uint64) uint64 {
	x ^= keyIntSeed
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// wyhash constants.
const (
	wyP0 = 0xa0761d6478bd642f
	wyP1 = 0xe7037ed1a0b428db
)

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// le64 and le32 read little-endian words (the compiler merges the loads).
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// strHash is a seeded wyhash-style hash of s: short strings are read as two
// (overlapping) words, longer ones 16 bytes at a time.
func strHash(s string) uint64 {
	seed := keyIntSeed
	n := len(s)
	var a, b uint64
	switch {
	case n == 0:
	case n < 4:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	case n <= 8:
		a, b = le32(s), le32(s[n-4:])
	case n <= 16:
		a, b = le64(s), le64(s[n-8:])
	default:
		for t := s; len(t) > 16; t = t[16:] {
			seed = mum(le64(t)^wyP1, le64(t[8:])^seed)
		}
		a, b = le64(s[n-16:]), le64(s[n-8:])
	}
	return mum(wyP1^uint64(n), mum(a^wyP1, b^seed^wyP0))
}
