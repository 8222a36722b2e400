package keygroup

import (
	"fmt"
	"iter"
	"math/bits"
	"strconv"
)

// DefaultLowerBound is the smallest max parallelism DefaultMaxParallelism
// picks, leaving room to scale up a job whose max parallelism was never
// configured (Flink's DEFAULT_LOWER_BOUND_MAX_PARALLELISM, 1<<7).
const DefaultLowerBound = 128

// UpperBound is the largest allowed max parallelism, inclusive (Flink's
// UPPER_BOUND_MAX_PARALLELISM, 1<<15).
const UpperBound = 32768

// Murmur scrambles a Java hash code the way Flink's MathUtils.murmurHash does
// before a key group is chosen: one 32-bit MurmurHash3 block round over h,
// a length of 4 folded in, the fmix32 finalizer, and finally a fold to a
// non-negative value (negative results are negated; math.MinInt32, which has
// no positive counterpart, becomes 0). All arithmetic wraps modulo 2^32 like
// Java int arithmetic. The result is always >= 0 (invariant I1).
func Murmur(h int32) int32 { return fold(scramble(h)) }

// scramble is Murmur before its fold: the block round, the length and
// fmix32.
func scramble(h int32) uint32 {
	c := uint32(h)
	c *= 0xcc9e2d51
	c = bits.RotateLeft32(c, 15)
	c *= 0x1b873593
	c = bits.RotateLeft32(c, 13)
	c = c*5 + 0xe6546b64
	c ^= 4
	// fmix32
	c ^= c >> 16
	c *= 0x85ebca6b
	c ^= c >> 13
	c *= 0xc2b2ae35
	c ^= c >> 16
	return c
}

// fold is Murmur's last step: the absolute value, computed without a
// branch on the sign (half of all hashes are negative: a branch would be
// mispredicted half the time), and 0 for math.MinInt32, whose absolute
// value does not fit.
func fold(c uint32) int32 {
	r := int32(c)
	m := r >> 31
	a := (r ^ m) - m
	if a < 0 {
		a = 0
	}
	return a
}

// Assign returns the key group, in [0, maxParallelism), of a key whose Java
// hash code is hash: Murmur(hash) % maxParallelism (Flink's
// KeyGroupRangeAssignment.computeKeyGroupForKeyHash). The result does not
// depend on the job's parallelism (invariant I2).
//
// Assign panics if maxParallelism is not in [1, UpperBound].
func Assign(hash int32, maxParallelism int) int {
	if maxParallelism < 1 || maxParallelism > UpperBound {
		panic(maxParallelismRangeError(maxParallelism))
	}
	m := uint32(Murmur(hash)) // non-negative
	if p := uint32(maxParallelism); p&(p-1) == 0 {
		return int(m & (p - 1)) // the default max parallelism is a power of two: no division
	}
	return int(m % uint32(maxParallelism))
}

// Assigner is Assign for one max parallelism, checked once when it is
// made, for the per-record path: its Assign does no range check, and no
// division when the max parallelism is a power of two (the default). The zero Assigner assigns every key to key group 0 (max
// parallelism 1).
type Assigner struct {
	maxP uint32 // 0 in the zero value, read as 1
	mask uint32 // maxP-1 when maxP is a power of two, else 0
	pow2 bool
}

// NewAssigner returns the Assigner of maxParallelism. It panics, as Assign
// does, if maxParallelism is not in [1, UpperBound].
func NewAssigner(maxParallelism int) Assigner {
	if maxParallelism < 1 || maxParallelism > UpperBound {
		panic(maxParallelismRangeError(maxParallelism))
	}
	p := uint32(maxParallelism)
	if p&(p-1) == 0 {
		return Assigner{maxP: p, mask: p - 1, pow2: true}
	}
	return Assigner{maxP: p}
}

// Assign returns Assign(hash, maxParallelism) for the Assigner's max
// parallelism.
func (a Assigner) Assign(hash int32) int {
	m := uint32(Murmur(hash))
	if a.pow2 || a.maxP == 0 {
		return int(m & a.mask)
	}
	return int(m % a.maxP)
}

// OperatorIndex returns the index of the subtask, in [0, parallelism), that
// owns keyGroup when a job with the given max parallelism runs with the given
// parallelism: keyGroup * parallelism / maxParallelism (Flink's
// KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup). It agrees with
// RangeFor (invariant I4).
//
// OperatorIndex panics if Validate(maxParallelism, parallelism) fails or
// keyGroup is not in [0, maxParallelism).
func OperatorIndex(keyGroup, maxParallelism, parallelism int) int {
	if err := Validate(maxParallelism, parallelism); err != nil {
		panic(err)
	}
	if keyGroup < 0 || keyGroup >= maxParallelism {
		panic(fmt.Sprintf("keygroup: key group %d out of range [0, %d)", keyGroup, maxParallelism))
	}
	return keyGroup * parallelism / maxParallelism
}

// Router is OperatorIndex for one max parallelism and parallelism, checked
// once when it is made, for the per-record path: its Operator does no range
// check, and no division when the max parallelism is a power of two (the
// default). The zero Router sends every key group to operator 0.
type Router struct {
	maxP, par int
	shift     uint // log2(maxP) when pow2
	pow2      bool
}

// NewRouter returns the Router of maxParallelism and parallelism. It
// panics, as OperatorIndex does, if Validate(maxParallelism, parallelism)
// fails.
func NewRouter(maxParallelism, parallelism int) Router {
	if err := Validate(maxParallelism, parallelism); err != nil {
		panic(err)
	}
	r := Router{maxP: maxParallelism, par: parallelism}
	if maxParallelism&(maxParallelism-1) == 0 {
		r.pow2, r.shift = true, uint(bits.TrailingZeros(uint(maxParallelism)))
	}
	return r
}

// Operator returns OperatorIndex(keyGroup, maxParallelism, parallelism) for
// the Router's max parallelism and parallelism; keyGroup must be in
// [0, maxParallelism).
func (r Router) Operator(keyGroup int) int {
	if r.pow2 || r.maxP == 0 {
		return keyGroup * r.par >> r.shift
	}
	return keyGroup * r.par / r.maxP
}

// Range is an inclusive range of key groups [Start, End]. A Range with
// End < Start is empty.
type Range struct {
	Start, End int
}

// Contains reports whether key group kg lies in r.
func (r Range) Contains(kg int) bool {
	return r.Start <= kg && kg <= r.End
}

// Len returns the number of key groups in r (0 if r is empty).
func (r Range) Len() int {
	if r.End < r.Start {
		return 0
	}
	return r.End - r.Start + 1
}

// EmptyRange is the canonical empty range (Flink's EMPTY_KEY_GROUP_RANGE):
// what Intersect returns for disjoint ranges.
var EmptyRange = Range{Start: 0, End: -1}

// NewRange returns the range [start, end] of key groups, checked: start
// must be >= 0, end >= start and end < UpperBound (Flink's
// KeyGroupRange.of). A literal Range is not checked; use NewRange for
// ranges that come from outside (flags, files, messages).
func NewRange(start, end int) (Range, error) {
	switch {
	case start < 0:
		return Range{}, fmt.Errorf("keygroup: range [%d,%d]: the start must be >= 0", start, end)
	case end < start:
		return Range{}, fmt.Errorf("keygroup: range [%d,%d]: the end must be >= the start (EmptyRange is the empty range)", start, end)
	case end >= UpperBound:
		return Range{}, fmt.Errorf("keygroup: range [%d,%d]: key groups must be < %d", start, end, UpperBound)
	}
	return Range{Start: start, End: end}, nil
}

// Empty reports whether r holds no key group.
func (r Range) Empty() bool { return r.End < r.Start }

// Intersect returns the key groups in both r and o, or EmptyRange when
// they share none (Flink's KeyGroupRange.getIntersection).
func (r Range) Intersect(o Range) Range {
	i := Range{Start: max(r.Start, o.Start), End: min(r.End, o.End)}
	if i.Empty() {
		return EmptyRange
	}
	return i
}

// All yields the key groups of r in ascending order (none if r is empty).
func (r Range) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for kg := r.Start; kg <= r.End; kg++ {
			if !yield(kg) {
				return
			}
		}
	}
}

// String formats r as "[Start,End]", for example "[0,31]".
func (r Range) String() string {
	return "[" + strconv.Itoa(r.Start) + "," + strconv.Itoa(r.End) + "]"
}

// RangeFor returns the key groups owned by subtask index when a job with the
// given max parallelism runs with the given parallelism (Flink's
// KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex):
//
//	Start = (index*maxParallelism + parallelism - 1) / parallelism
//	End   = ((index+1)*maxParallelism - 1) / parallelism
//
// The ranges of subtasks 0..parallelism-1 partition [0, maxParallelism)
// into contiguous, non-empty pieces whose sizes differ by at most one
// (invariants I3, I5). When the sizes differ, the larger and smaller ranges
// are spread out rather than bunched: max parallelism 10 over 4 subtasks
// gives sizes 3, 2, 3, 2.
//
// RangeFor panics if Validate(maxParallelism, parallelism) fails or index is
// not in [0, parallelism).
func RangeFor(maxParallelism, parallelism, index int) Range {
	if err := Validate(maxParallelism, parallelism); err != nil {
		panic(err)
	}
	if index < 0 || index >= parallelism {
		panic(fmt.Sprintf("keygroup: subtask index %d out of range [0, %d)", index, parallelism))
	}
	return Range{
		Start: (index*maxParallelism + parallelism - 1) / parallelism,
		End:   ((index+1)*maxParallelism - 1) / parallelism,
	}
}

// DefaultMaxParallelism returns the max parallelism to use for a job with the
// given parallelism when none was configured: parallelism*1.5 rounded up to a
// power of two, clamped to [DefaultLowerBound, UpperBound] (Flink's
// KeyGroupRangeAssignment.computeDefaultMaxParallelism). The result always
// admits the parallelism (invariant I8). Because the max parallelism can
// never change once a job has state, configure it explicitly for jobs that
// may need to grow.
//
// DefaultMaxParallelism panics if parallelism is not in [1, UpperBound].
func DefaultMaxParallelism(parallelism int) int {
	if parallelism < 1 || parallelism > UpperBound {
		panic(parallelismRangeError(parallelism))
	}
	return min(max(roundUpPow2(parallelism+parallelism/2), DefaultLowerBound), UpperBound)
}

// roundUpPow2 returns the smallest power of two >= x, for 1 <= x <= 1<<30.
func roundUpPow2(x int) int {
	return 1 << bits.Len(uint(x-1))
}

// Validate reports whether a job may run with the given max parallelism and
// parallelism: both must be in [1, UpperBound] and parallelism must not exceed
// maxParallelism. The returned error explains what to change.
func Validate(maxParallelism, parallelism int) error {
	if maxParallelism < 1 || maxParallelism > UpperBound {
		return maxParallelismRangeError(maxParallelism)
	}
	if parallelism < 1 || parallelism > UpperBound {
		return parallelismRangeError(parallelism)
	}
	if parallelism > maxParallelism {
		return fmt.Errorf("keygroup: parallelism %d exceeds max parallelism %d; "+
			"raise the max parallelism (fixed for the life of the job's state)",
			parallelism, maxParallelism)
	}
	return nil
}

func maxParallelismRangeError(maxParallelism int) error {
	return fmt.Errorf("keygroup: max parallelism %d out of range [1, %d]", maxParallelism, UpperBound)
}

func parallelismRangeError(parallelism int) error {
	return fmt.Errorf("keygroup: parallelism %d out of range [1, %d]", parallelism, UpperBound)
}
