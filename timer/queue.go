package timer

import (
	"fmt"
	"slices"

	"github.com/weirproject/weir/internal/keyhash"
	"github.com/weirproject/weir/keygroup"
)

// The queue is organised by timestamp: one bucket per distinct timestamp,
// holding that timestamp's timers in registration order, and a binary
// min-heap of the buckets. Many timers usually share a timestamp (every
// key's window ends at the same instant), so an Add usually lands in an
// existing bucket (the bucket of the previous Add is remembered) and is an
// append, and a Poll is a step along a slice; the heap only moves when a
// timestamp appears or empties.
//
// Invariants (checked by checkQueue in the tests):
//
//   - every bucket in heap has live > 0 timers, and timers[head] is live;
//     b.hpos is b's slot in heap, and byTs maps exactly the timestamps of
//     the buckets in heap to them;
//   - a slot of timers[head:] is dead (removed) iff its KeyGroup is -1;
//     timers[:head] have fired and are never read; dead counts the dead
//     slots of timers[head:];
//   - timers[lazyFrom:] (lazyFrom <= len(timers)) were appended by AddNew
//     and are not known to the index yet; settle, which every operation
//     that looks a timer up calls first, brings them in (lazyFrom ==
//     len(timers) after it);
//   - when indexed, idx (an open-addressing table by key hash) holds the
//     position of every live slot of timers[head:lazyFrom], reachable by
//     linear probing from its home slot; it may also hold positions of
//     fired slots (below head), which count as absent; idxUsed counts its
//     used slots, at most half of them; a bucket not indexed has at most
//     scanMax slots in timers[head:lazyFrom] and is scanned;
//   - n is the sum of live over the buckets, and perKG[i] the live timers of
//     key group rng.Start+i;
//   - kgRefs, when not nil, lists every live timer grouped by key group (see
//     buildKeyGroupIndex); every change drops it.

// Timer is one registered timer. Its identity is (Timestamp, Key, Namespace);
// KeyGroup is carried so that a snapshot can write one key group's timers, and
// it must be the key group of Key (a function of Key).
type Timer[K comparable, N comparable] struct {
	Timestamp int64
	Key       K
	KeyGroup  int
	Namespace N
}

// queued is a timer as its bucket keeps it: without the timestamp, which
// is the bucket's (a window's timer takes 32 bytes instead of 40).
type queued[K comparable, N comparable] struct {
	Key       K
	KeyGroup  int
	Namespace N
}

// at returns the timer in slot p.
func (b *bucket[K, N]) at(p int) Timer[K, N] {
	t := &b.timers[p]
	return Timer[K, N]{Timestamp: b.ts, Key: t.Key, KeyGroup: t.KeyGroup, Namespace: t.Namespace}
}

// deadKeyGroup marks a removed slot of a bucket.
const deadKeyGroup = -1

// scanMax is the most slots a bucket holds (from its head) without an
// identity index: below it a scan is cheaper than a map access.
const scanMax = 8

// maxFreeBuckets is how many emptied buckets a queue keeps for reuse.
const maxFreeBuckets = 8

// idxSlot is one slot of a bucket's identity index, an open-addressing
// table (linear probing, at most half full) keyed by the timer's key: the
// key's hash and the timer's position in timers plus one (0: a free slot).
// Timers with the same key but other namespaces share a hash; the timer
// itself is compared.
type idxSlot struct {
	tag uint32
	pos int32
}

// bucket is the timers of one timestamp, in registration order.
type bucket[K comparable, N comparable] struct {
	ts      int64
	timers  []queued[K, N]
	head    int // timers[:head] have fired
	live    int // live timers in timers[head:]
	dead    int // dead slots in timers[head:]
	hpos    int // slot in the queue's heap
	indexed bool
	idx     []idxSlot // when indexed; kept (cleared) for reuse otherwise
	idxUsed int       // used slots of idx
	// lazyFrom: timers[lazyFrom:] came from AddNew and are not indexed yet.
	lazyFrom int
}

// settle brings the timers AddNew appended into the index (or indexes the
// bucket, if they made it too long to scan).
func (b *bucket[K, N]) settle() {
	n := len(b.timers)
	if b.lazyFrom == n {
		return
	}
	from := max(b.lazyFrom, b.head)
	switch {
	case !b.indexed:
		if n-b.head > scanMax {
			b.indexAll()
		}
	case 2*(b.idxUsed+n-from) > len(b.idx):
		b.indexAll() // grows it
	default:
		for p := from; p < n; p++ {
			if t := &b.timers[p]; t.KeyGroup != deadKeyGroup {
				b.insert(keyhash.Of(t.Key), p) // room checked above: no regrowth
			}
		}
	}
	b.lazyFrom = n
}

// hashFor returns the hash of key if the bucket is indexed (else 0, unused).
func (b *bucket[K, N]) hashFor(key K) uint32 {
	if !b.indexed {
		return 0
	}
	return keyhash.Of(key)
}

// find returns the position of the live timer (key, ns), or -1; h is
// hashFor(key).
func (b *bucket[K, N]) find(h uint32, key K, ns N) int {
	if !b.indexed {
		for i := b.head; i < len(b.timers); i++ {
			t := &b.timers[i]
			if t.KeyGroup != deadKeyGroup && t.Key == key && t.Namespace == ns {
				return i
			}
		}
		return -1
	}
	_, p := b.lookup(h, key, ns)
	return p
}

// lookup returns the index slot and position of the live timer (key, ns)
// in an indexed bucket, or -1, -1. Slots of fired timers (positions below
// head) count as absent.
func (b *bucket[K, N]) lookup(h uint32, key K, ns N) (slot, pos int) {
	mask := uint32(len(b.idx) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := b.idx[i]
		if s.pos == 0 {
			return -1, -1
		}
		if p := int(s.pos - 1); s.tag == h && p >= b.head {
			if t := &b.timers[p]; t.Key == key && t.Namespace == ns {
				return int(i), p
			}
		}
	}
}

// insert adds position p, of a timer whose key hashes to h, to the index.
func (b *bucket[K, N]) insert(h uint32, p int) {
	if 2*(b.idxUsed+1) > len(b.idx) {
		b.indexAll() // grows it, and drops the slots of fired timers
		return
	}
	mask := uint32(len(b.idx) - 1)
	i := h & mask
	for b.idx[i].pos != 0 {
		i = (i + 1) & mask
	}
	b.idx[i] = idxSlot{h, int32(p + 1)}
	b.idxUsed++
}

// unindex frees index slot i, moving later slots of its probe run back so
// that every position stays reachable from its home slot.
func (b *bucket[K, N]) unindex(i uint32) {
	mask := uint32(len(b.idx) - 1)
	for j := (i + 1) & mask; b.idx[j].pos != 0; j = (j + 1) & mask {
		if home := b.idx[j].tag & mask; (j-home)&mask >= (j-i)&mask {
			b.idx[i] = b.idx[j]
			i = j
		}
	}
	b.idx[i] = idxSlot{}
	b.idxUsed--
}

// skipDead moves head past dead slots.
func (b *bucket[K, N]) skipDead() {
	for b.head < len(b.timers) && b.timers[b.head].KeyGroup == deadKeyGroup {
		b.head++
		b.dead--
	}
}

// indexAll (re)builds the index from the live slots of timers[head:], sized
// for the bucket's timers with room to grow.
func (b *bucket[K, N]) indexAll() {
	size := 4 * scanMax
	for size < 4*(len(b.timers)-b.head) {
		size *= 2
	}
	if cap(b.idx) >= size {
		b.idx = b.idx[:size]
		clear(b.idx)
	} else {
		b.idx = make([]idxSlot, size)
	}
	b.indexed, b.idxUsed, b.lazyFrom = true, 0, len(b.timers)
	mask := uint32(size - 1)
	for p := b.head; p < len(b.timers); p++ {
		t := &b.timers[p]
		if t.KeyGroup == deadKeyGroup {
			continue
		}
		h := keyhash.Of(t.Key)
		i := h & mask
		for b.idx[i].pos != 0 {
			i = (i + 1) & mask
		}
		b.idx[i] = idxSlot{h, int32(p + 1)}
		b.idxUsed++
	}
}

// unindexAll drops the index, keeping its storage.
func (b *bucket[K, N]) unindexAll() {
	if b.indexed {
		clear(b.idx)
		b.indexed, b.idxUsed = false, 0
	}
}

// compact drops the fired and dead slots when they are the larger part of
// timers (amortized O(1) per slot), so that a bucket that keeps taking and
// losing timers does not grow without bound.
func (b *bucket[K, N]) compact() {
	waste := b.head + b.dead
	if waste < 2*scanMax || waste < len(b.timers)/2 {
		return
	}
	j := 0
	for _, t := range b.timers[b.head:] {
		if t.KeyGroup != deadKeyGroup {
			b.timers[j] = t
			j++
		}
	}
	clear(b.timers[j:])
	b.timers = b.timers[:j]
	b.head, b.dead = 0, 0
	if len(b.timers) > scanMax {
		b.indexAll()
	} else {
		b.unindexAll()
		b.lazyFrom = len(b.timers)
	}
}

// heapEntry is one slot of the heap of buckets. The timestamp is copied into
// the slot so that sifting compares contiguous memory without chasing the
// bucket.
type heapEntry[K comparable, N comparable] struct {
	ts int64
	b  *bucket[K, N]
}

// kgRef locates a live timer for the key-group index.
type kgRef[K comparable, N comparable] struct {
	b *bucket[K, N]
	p int
}

// Queue is a priority queue set of timers ordered by timestamp (earliest
// first) with set semantics on (Timestamp, Key, Namespace).
//
// Timers with equal timestamps come out in the order they were added (a
// timer added again after it was polled or removed counts as new), so the
// order is a deterministic function of the sequence of operations.
//
// A Queue is not safe for concurrent use.
type Queue[K comparable, N comparable] struct {
	rng   keygroup.Range
	heap  []heapEntry[K, N] // min-heap by ts
	byTs  map[int64]*bucket[K, N]
	last  *bucket[K, N] // the bucket of the last Add, if still queued
	free  []*bucket[K, N]
	n     int
	perKG []int32 // live timers per key group, index kg - rng.Start

	// kgRefs is every live timer grouped by key group (kg - rng.Start),
	// the group of index i at kgRefs[kgOff[i]:kgOff[i+1]], each group in
	// firing order; built by the first ForEachInKeyGroup after a change.
	kgRefs []kgRef[K, N]
	kgOff  []int
}

// NewQueue returns an empty queue for the key groups of r (an empty r gives a
// queue that accepts no timer).
func NewQueue[K comparable, N comparable](r keygroup.Range) *Queue[K, N] {
	return &Queue[K, N]{
		rng:   r,
		byTs:  make(map[int64]*bucket[K, N]),
		perKG: make([]int32, r.Len()),
	}
}

// Range reports the key groups this queue accepts.
func (q *Queue[K, N]) Range() keygroup.Range { return q.rng }

// slot returns kg - rng.Start. It panics if kg is outside the queue's range:
// that is a routing bug.
func (q *Queue[K, N]) slot(kg int) int {
	if !q.rng.Contains(kg) {
		panic(fmt.Sprintf("timer: key group %d is outside this queue's key-group range %v (routing bug)",
			kg, q.rng))
	}
	return kg - q.rng.Start
}

// bucketOf returns the queued bucket of ts, or nil.
func (q *Queue[K, N]) bucketOf(ts int64) *bucket[K, N] {
	if b := q.last; b != nil && b.ts == ts {
		return b
	}
	return q.byTs[ts]
}

// Add inserts t and reports whether it was added; it returns false if a timer
// with the same identity is already queued. It panics if t.KeyGroup is
// outside the queue's range.
func (q *Queue[K, N]) Add(t Timer[K, N]) bool {
	if b := q.bucketOf(t.Timestamp); b != nil {
		b.settle()
		if b.find(b.hashFor(t.Key), t.Key, t.Namespace) >= 0 {
			q.last = b
			return false
		}
	}
	q.AddNew(t) // indexed when the bucket is next looked up
	return true
}

// AddNew inserts t, which the caller knows is not queued (for example a
// window's timer registered with the window's first record, before which
// the window had no timers): it skips Add's look-up, so adding to an
// existing timestamp is an append. The index catches up when the bucket is
// next looked up. Adding a timer that is queued already breaks the set
// semantics (it would fire twice). It panics if t.KeyGroup is outside the
// queue's range.
func (q *Queue[K, N]) AddNew(t Timer[K, N]) {
	i := q.slot(t.KeyGroup)
	b := q.bucketOf(t.Timestamp)
	if b == nil {
		b = q.newBucket(t.Timestamp)
	} else {
		b.compact()
	}
	q.last = b
	b.timers = append(b.timers, queued[K, N]{t.Key, t.KeyGroup, t.Namespace})
	q.added(b, i)
}

// added counts a timer appended to b, of key-group slot i.
func (q *Queue[K, N]) added(b *bucket[K, N], i int) {
	b.live++
	q.n++
	q.perKG[i]++
	q.kgRefs = nil
}

// Remove deletes t and reports whether it was queued; removing a missing
// timer is a no-op that returns false. It panics if t.KeyGroup is outside the
// queue's range.
func (q *Queue[K, N]) Remove(t Timer[K, N]) bool {
	q.slot(t.KeyGroup)
	b := q.bucketOf(t.Timestamp)
	if b == nil {
		return false
	}
	b.settle()
	var p int
	if b.indexed {
		var slot int
		if slot, p = b.lookup(keyhash.Of(t.Key), t.Key, t.Namespace); p >= 0 {
			b.unindex(uint32(slot))
		}
	} else {
		p = b.find(0, t.Key, t.Namespace)
	}
	if p < 0 {
		return false
	}
	i := b.timers[p].KeyGroup - q.rng.Start // the queued timer's
	b.timers[p] = queued[K, N]{KeyGroup: deadKeyGroup}
	b.live--
	b.dead++
	q.n--
	q.perKG[i]--
	q.kgRefs = nil
	if b.live == 0 {
		q.dropBucket(b)
		return true
	}
	b.skipDead()
	b.compact()
	return true
}

// Contains reports whether a timer with t's identity is queued.
func (q *Queue[K, N]) Contains(t Timer[K, N]) bool {
	q.slot(t.KeyGroup)
	b := q.bucketOf(t.Timestamp)
	if b == nil {
		return false
	}
	b.settle()
	return b.find(b.hashFor(t.Key), t.Key, t.Namespace) >= 0
}

// Peek returns the earliest timer without removing it.
func (q *Queue[K, N]) Peek() (Timer[K, N], bool) {
	if len(q.heap) == 0 {
		var zero Timer[K, N]
		return zero, false
	}
	b := q.heap[0].b
	return b.at(b.head), true
}

// PeekTimestamp returns the timestamp of the earliest timer.
func (q *Queue[K, N]) PeekTimestamp() (int64, bool) {
	if len(q.heap) == 0 {
		return 0, false
	}
	return q.heap[0].ts, true
}

// Poll removes and returns the earliest timer.
func (q *Queue[K, N]) Poll() (Timer[K, N], bool) {
	if len(q.heap) == 0 {
		var zero Timer[K, N]
		return zero, false
	}
	b := q.heap[0].b
	t := b.at(b.head)
	b.head++
	b.live--
	q.n--
	q.perKG[t.KeyGroup-q.rng.Start]--
	q.kgRefs = nil
	if b.live == 0 {
		q.dropBucket(b)
	} else {
		b.skipDead()
	}
	return t, true
}

// Len reports the number of queued timers.
func (q *Queue[K, N]) Len() int { return q.n }

// LenKeyGroup reports the number of queued timers of key group kg. It panics
// if kg is outside the range.
func (q *Queue[K, N]) LenKeyGroup(kg int) int { return int(q.perKG[q.slot(kg)]) }

// ForEachInKeyGroup calls f for every queued timer of key group kg, in the
// order they would be polled. f must not add or remove timers of this queue.
// It panics if kg is outside the range.
//
// The first call after a change of the queue groups all its timers by key
// group in one pass (O(n + b log b) for n timers with b distinct
// timestamps), so visiting every key group (a snapshot) costs that once;
// later calls visit only kg's timers.
func (q *Queue[K, N]) ForEachInKeyGroup(kg int, f func(Timer[K, N])) {
	i := q.slot(kg)
	if q.perKG[i] == 0 {
		return
	}
	if q.kgRefs == nil {
		q.buildKeyGroupIndex()
	}
	for _, r := range q.kgRefs[q.kgOff[i]:q.kgOff[i+1]] {
		f(r.b.at(r.p))
	}
}

// buildKeyGroupIndex fills kgRefs and kgOff (a counting sort by key group
// of the timers in firing order).
func (q *Queue[K, N]) buildKeyGroupIndex() {
	q.kgOff = slices.Grow(q.kgOff[:0], len(q.perKG)+1)[:len(q.perKG)+1]
	next := make([]int, len(q.perKG))
	off := 0
	for i, c := range q.perKG {
		q.kgOff[i], next[i] = off, off
		off += int(c)
	}
	q.kgOff[len(q.perKG)] = off
	refs := make([]kgRef[K, N], q.n)
	hs := slices.Clone(q.heap)
	slices.SortFunc(hs, func(a, b heapEntry[K, N]) int { return compareInt64(a.ts, b.ts) })
	for _, h := range hs {
		b := h.b
		for p := b.head; p < len(b.timers); p++ {
			if kg := b.timers[p].KeyGroup; kg != deadKeyGroup {
				i := kg - q.rng.Start
				refs[next[i]] = kgRef[K, N]{b, p}
				next[i]++
			}
		}
	}
	q.kgRefs = refs
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// newBucket returns an empty bucket for ts, queued.
func (q *Queue[K, N]) newBucket(ts int64) *bucket[K, N] {
	var b *bucket[K, N]
	if k := len(q.free); k > 0 {
		b = q.free[k-1]
		q.free[k-1] = nil
		q.free = q.free[:k-1]
	} else {
		b = new(bucket[K, N])
	}
	b.ts = ts
	b.hpos = len(q.heap)
	q.heap = append(q.heap, heapEntry[K, N]{ts, b})
	q.up(b.hpos)
	q.byTs[ts] = b
	return b
}

// dropBucket unqueues the empty bucket b and keeps it for reuse.
func (q *Queue[K, N]) dropBucket(b *bucket[K, N]) {
	q.removeAt(b.hpos)
	delete(q.byTs, b.ts)
	if q.last == b {
		q.last = nil
	}
	clear(b.timers) // release what fired and removed timers referenced
	b.timers = b.timers[:0]
	b.head, b.live, b.dead, b.lazyFrom = 0, 0, 0, 0
	b.unindexAll()
	if len(q.free) < maxFreeBuckets {
		q.free = append(q.free, b)
	}
}

// removeAt removes the heap slot i, restoring the heap property.
func (q *Queue[K, N]) removeAt(i int) {
	h := q.heap
	last := len(h) - 1
	if i != last {
		h[i] = h[last]
		h[i].b.hpos = i
	}
	h[last] = heapEntry[K, N]{}
	q.heap = h[:last]
	if i < last {
		if !q.up(i) {
			q.down(i)
		}
	}
}

// up sifts slot i towards the root and reports whether it moved.
func (q *Queue[K, N]) up(i int) bool {
	h := q.heap
	e := h[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if h[p].ts <= e.ts {
			break
		}
		h[i] = h[p]
		h[i].b.hpos = i
		i = p
	}
	if i == start {
		return false
	}
	h[i] = e
	e.b.hpos = i
	return true
}

// down sifts slot i towards the leaves.
func (q *Queue[K, N]) down(i int) {
	h := q.heap
	n := len(h)
	e := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].ts < h[c].ts {
			c = r
		}
		if e.ts <= h[c].ts {
			break
		}
		h[i] = h[c]
		h[i].b.hpos = i
		i = c
	}
	h[i] = e
	e.b.hpos = i
}
