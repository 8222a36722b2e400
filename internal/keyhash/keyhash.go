// Package keyhash hashes keys for the in-memory hash tables of packages
// state (namespaced state, and the value state's index) and timer (the
// identity index of a timestamp's timers). Hashes live only in memory: they
// are never written to snapshots, and a restore hashes the keys again, so
// they may differ between processes (they are seeded at start-up, like Go
// maps, so that keys chosen to collide in one process do not in another;
// a table may also take a seed of its own, Seed).
//
// Integer keys go through a seeded 64-bit mixer and strings through a
// seeded wyhash-style function (a few ns, about half of what
// hash/maphash.String costs); other key types use hash/maphash.Comparable.
package keyhash

import (
	"hash/maphash"
	"math/bits"
	"unsafe"
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

// Hasher hashes keys of type K (Sum64) with the type classified once, in
// For, as Of classifies it at every call (a type switch that generic code
// resolves at run time). The zero Hasher is valid: it classifies K at
// every call.
type Hasher[K comparable] struct{ kind uint8 }

// Kinds of Hasher: which of Of's cases K falls in.
const (
	kindNone   = iota // the zero Hasher: K not classified yet (Sum64 does it at each call)
	kindOther         // maphash.Comparable
	kindWord          // int64, uint64, or an 8-byte int
	kindInt32         // int32, or a 4-byte int
	kindUint32        // uint32
	kindString        // string
)

// For returns the Hasher of K.
func For[K comparable]() Hasher[K] {
	var zero K
	switch any(zero).(type) {
	case int64, uint64:
		return Hasher[K]{kindWord}
	case int:
		if unsafe.Sizeof(zero) == 8 {
			return Hasher[K]{kindWord}
		}
		return Hasher[K]{kindInt32}
	case int32:
		return Hasher[K]{kindInt32}
	case uint32:
		return Hasher[K]{kindUint32}
	case string:
		return Hasher[K]{kindString}
	}
	return Hasher[K]{kindOther}
}

// Seed selects one of the functions Sum64 computes: tables that want
// their own hash function (so that keys copied between two tables in one
// table's slot order do not pile up in the other) each make one.
type Seed struct {
	m maphash.Seed // for the types Of hashes with maphash
	w uint64       // for integers and strings
}

// NewSeed returns a random Seed.
func NewSeed() Seed {
	m := maphash.MakeSeed()
	return Seed{m: m, w: maphash.String(m, "weir")}
}

// Sum64 returns the 64-bit hash of k under seed: integers and strings as
// Of hashes them (with seed's own value), other keys as maphash.Comparable
// does, so that keys equal under == hash alike (floats' +0 and -0, an
// interface by its dynamic value). All 64 bits are mixed: a table may take
// its index from the low bits and a tag from the high ones.
func (h Hasher[K]) Sum64(seed Seed, k K) uint64 {
	p := unsafe.Pointer(&k)
	switch h.kind {
	case kindWord:
		return mixSeeded(seed.w, *(*uint64)(p))
	case kindInt32:
		return mixSeeded(seed.w, uint64(*(*int32)(p)))
	case kindUint32:
		return mixSeeded(seed.w, uint64(*(*uint32)(p)))
	case kindString:
		return strSeeded(seed.w, *(*string)(p))
	case kindNone:
		return For[K]().Sum64(seed, k)
	}
	return maphash.Comparable(seed.m, k)
}

// mixInt is a seeded murmur3 finalizer.
func mixInt(x uint64) uint64 { return mixSeeded(keyIntSeed, x) }

// mixSeeded mixes x under seed.
func mixSeeded(seed, x uint64) uint64 {
	x ^= seed
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
func strHash(s string) uint64 { return strSeeded(keyIntSeed, s) }

// strSeeded hashes s under seed.
func strSeeded(seed uint64, s string) uint64 {
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
