package bench

import (
	"fmt"
	"math/rand/v2"
)

// KeyOrder is the order in which the records of a keyed engine scenario
// (keyed count, window sum) bring their keys. Both sides of a scenario read
// the same pre-generated sequence (KeySequence), made before either is
// timed, so drawing the keys costs neither side anything.
type KeyOrder int

const (
	// KeysUniform draws every record's key uniformly at random over the
	// keys (a seeded sequence): the default, since real traffic does not
	// arrive in a fixed cycle of keys.
	KeysUniform KeyOrder = iota
	// KeysZipf draws keys from a Zipf distribution with exponent 1.1 (a few
	// hot keys, a long tail), the ranks given to keys in a seeded random
	// permutation.
	KeysZipf
	// KeysRoundRobin brings the keys in the same cycle again and again, the
	// shape of the benchmarks before issue 31: with it a hand-written loop's
	// per-key memory, allocated in that order, is walked in address order
	// and prefetched by the hardware.
	KeysRoundRobin
)

// String is the order's name in benchmark and scenario names.
func (o KeyOrder) String() string {
	switch o {
	case KeysUniform:
		return "uniform"
	case KeysZipf:
		return "zipf"
	case KeysRoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("KeyOrder(%d)", int(o))
}

// KeyOrders lists the orders, the default first.
var KeyOrders = []KeyOrder{KeysUniform, KeysZipf, KeysRoundRobin}

// keySeed seeds the uniform and Zipf sequences: every run draws the same.
const keySeed = 31

// zipfS is the exponent of KeysZipf: with 10k keys the hottest key brings
// about 15 % of the records, the hottest 100 about 65 %.
const zipfS = 1.1

// KeySequence returns the key index (0 <= index < keys) of each of n
// records in order o. For KeysRoundRobin record i has key (i*stride) %
// keys (stride 1 is the cycle 0, 1, 2, ...; the keyed count's stride is
// 7919, as eventAt's).
func KeySequence(o KeyOrder, n int64, keys int, stride int64) []int32 {
	seq := make([]int32, n)
	k := int64(keys)
	switch o {
	case KeysUniform:
		r := rand.New(rand.NewPCG(keySeed, 1))
		for i := range seq {
			seq[i] = int32(r.IntN(keys))
		}
	case KeysZipf:
		r := rand.New(rand.NewPCG(keySeed, 2))
		perm := r.Perm(keys)
		z := rand.NewZipf(r, zipfS, 1, uint64(keys-1))
		for i := range seq {
			seq[i] = int32(perm[z.Uint64()])
		}
	case KeysRoundRobin:
		for i := range seq {
			seq[i] = int32((int64(i) * stride) % k)
		}
	default:
		panic("bench: unknown key order " + o.String())
	}
	return seq
}
