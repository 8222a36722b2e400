package timer

import (
	"fmt"

	"github.com/weirproject/weir/keygroup"
)

// Timer is one registered timer. Its identity is (Timestamp, Key, Namespace);
// KeyGroup is carried so that a snapshot can write one key group's timers, and
// it must be the key group of Key (a function of Key).
type Timer[K comparable, N comparable] struct {
	Timestamp int64
	Key       K
	KeyGroup  int
	Namespace N
}

// ident is the identity of a timer inside one key group's dedupe index.
type ident[K comparable, N comparable] struct {
	ts  int64
	key K
	ns  N
}

// heapEntry is one slot of the binary heap. The timestamp is copied into the
// slot so that sifting compares contiguous memory without chasing the node.
type heapEntry struct {
	ts   int64
	node int32
}

// Queue is a priority queue set of timers ordered by timestamp (earliest
// first) with set semantics: a binary heap plus a dedupe index kept per key
// group, so that a snapshot can visit one key group's timers without scanning
// the heap.
//
// The order among timers with equal timestamps is unspecified, but it is a
// deterministic function of the sequence of operations applied to the queue.
//
// A Queue is not safe for concurrent use.
type Queue[K comparable, N comparable] struct {
	rng    keygroup.Range
	heap   []heapEntry
	timers []Timer[K, N]           // node storage, indexed by node id
	pos    []int32                 // heap slot of each node, so Remove and sifting need no hashing
	free   []int32                 // ids of unused nodes
	groups []map[ident[K, N]]int32 // index kg - rng.Start; created lazily
}

// NewQueue returns an empty queue for the key groups of r (an empty r gives a
// queue that accepts no timer).
func NewQueue[K comparable, N comparable](r keygroup.Range) *Queue[K, N] {
	return &Queue[K, N]{
		rng:    r,
		groups: make([]map[ident[K, N]]int32, r.Len()),
	}
}

// Range reports the key groups this queue accepts.
func (q *Queue[K, N]) Range() keygroup.Range { return q.rng }

// group returns the dedupe index of kg, creating it if create is set. It
// panics if kg is outside the queue's range: that is a routing bug.
func (q *Queue[K, N]) group(kg int, create bool) map[ident[K, N]]int32 {
	if !q.rng.Contains(kg) {
		panic(fmt.Sprintf("timer: key group %d is outside this queue's key-group range %v (routing bug)",
			kg, q.rng))
	}
	i := kg - q.rng.Start
	g := q.groups[i]
	if g == nil && create {
		g = make(map[ident[K, N]]int32)
		q.groups[i] = g
	}
	return g
}

// Add inserts t and reports whether it was added; it returns false if a timer
// with the same identity is already queued. It panics if t.KeyGroup is
// outside the queue's range.
func (q *Queue[K, N]) Add(t Timer[K, N]) bool {
	g := q.group(t.KeyGroup, true)
	id := ident[K, N]{ts: t.Timestamp, key: t.Key, ns: t.Namespace}
	if _, ok := g[id]; ok {
		return false
	}
	var n int32
	if k := len(q.free); k > 0 {
		n = q.free[k-1]
		q.free = q.free[:k-1]
	} else {
		n = int32(len(q.timers))
		q.timers = append(q.timers, Timer[K, N]{})
		q.pos = append(q.pos, 0)
	}
	pos := int32(len(q.heap))
	q.timers[n] = t
	q.pos[n] = pos
	q.heap = append(q.heap, heapEntry{ts: t.Timestamp, node: n})
	g[id] = n
	q.up(int(pos))
	return true
}

// Remove deletes t and reports whether it was queued; removing a missing
// timer is a no-op that returns false. It panics if t.KeyGroup is outside the
// queue's range.
func (q *Queue[K, N]) Remove(t Timer[K, N]) bool {
	g := q.group(t.KeyGroup, false)
	if g == nil {
		return false
	}
	id := ident[K, N]{ts: t.Timestamp, key: t.Key, ns: t.Namespace}
	n, ok := g[id]
	if !ok {
		return false
	}
	delete(g, id)
	q.removeAt(int(q.pos[n]))
	q.release(n)
	return true
}

// Contains reports whether a timer with t's identity is queued.
func (q *Queue[K, N]) Contains(t Timer[K, N]) bool {
	g := q.group(t.KeyGroup, false)
	if g == nil {
		return false
	}
	_, ok := g[ident[K, N]{ts: t.Timestamp, key: t.Key, ns: t.Namespace}]
	return ok
}

// Peek returns the earliest timer without removing it.
func (q *Queue[K, N]) Peek() (Timer[K, N], bool) {
	if len(q.heap) == 0 {
		var zero Timer[K, N]
		return zero, false
	}
	return q.timers[q.heap[0].node], true
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
	n := q.heap[0].node
	t := q.timers[n]
	delete(q.groups[t.KeyGroup-q.rng.Start], ident[K, N]{ts: t.Timestamp, key: t.Key, ns: t.Namespace})
	q.removeAt(0)
	q.release(n)
	return t, true
}

// Len reports the number of queued timers.
func (q *Queue[K, N]) Len() int { return len(q.heap) }

// LenKeyGroup reports the number of queued timers of key group kg.
func (q *Queue[K, N]) LenKeyGroup(kg int) int { return len(q.group(kg, false)) }

// ForEachInKeyGroup calls f for every queued timer of key group kg, in
// unspecified order, without scanning timers of other key groups. f must not
// add or remove timers of this queue. It panics if kg is outside the range.
func (q *Queue[K, N]) ForEachInKeyGroup(kg int, f func(Timer[K, N])) {
	for _, n := range q.group(kg, false) {
		f(q.timers[n])
	}
}

// release returns node n to the free list, dropping references it holds.
func (q *Queue[K, N]) release(n int32) {
	q.timers[n] = Timer[K, N]{}
	q.free = append(q.free, n)
}

// removeAt removes the heap slot i, restoring the heap property.
func (q *Queue[K, N]) removeAt(i int) {
	last := len(q.heap) - 1
	if i != last {
		q.heap[i] = q.heap[last]
		q.pos[q.heap[i].node] = int32(i)
	}
	q.heap[last] = heapEntry{}
	q.heap = q.heap[:last]
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
		q.pos[h[i].node] = int32(i)
		i = p
	}
	if i == start {
		return false
	}
	h[i] = e
	q.pos[e.node] = int32(i)
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
		q.pos[h[i].node] = int32(i)
		i = c
	}
	h[i] = e
	q.pos[e.node] = int32(i)
}
