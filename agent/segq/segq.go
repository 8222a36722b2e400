// Package segq is the segmented queue that holds watermarks back in the
// agent operator (after Flink Agents' SegmentedQueue and KeySegment).
//
// An asynchronous operator may not forward a watermark while an input that
// arrived before it is still being processed: the input's results would be
// late downstream. A single counter of unfinished inputs does not work
// under load (new inputs keep it above zero and the watermark waits
// forever), so the queue is cut into segments: every watermark closes the
// current segment and opens a new one. A segment counts, per key, the
// unfinished inputs that arrived between two watermarks. A watermark may
// leave once every segment before it is empty.
//
//	q.AddKey("A")           // A1 arrives:   [A:1]
//	q.AddKey("B")           // B1 arrives:   [A:1 B:1]
//	q.AddWatermark(wm1)     // WM1 arrives:  [A:1 B:1] wm1 []
//	q.AddKey("A")           // A2 arrives:   [A:1 B:1] wm1 [A:1]
//	q.RemoveKey("B")        // B1 finished:  [A:1] wm1 [A:1]
//	q.RemoveKey("A")        // A1 finished:  [] wm1 [A:1]
//	q.PopReady()            // -> wm1:       [A:1]
//
// # Guarantees
//
//	Q1. Order. Watermarks (or whatever marks the queue holds) leave in the
//	    order they were added, never one before an earlier one.
//	Q2. Holding. A mark leaves only when every reference added before it
//	    (AddKey before AddWatermark) has been removed.
//	Q3. No starvation. References added after a mark never hold it back:
//	    AddKey always counts into the newest segment, the one after every
//	    held mark.
//	Q4. Oldest debt first. RemoveKey(k) decrements the oldest segment holding
//	    k, so when a key's inputs finish in arrival order (one input of a key
//	    at a time, as in the agent operator) every reference is removed from
//	    the segment it was added to.
//	Q5. Empty queue. A mark added when no reference is outstanding is ready at
//	    once; several such marks all pop at once, in order.
//	Q6. Cost. AddKey, RemoveKey, AddWatermark and PopReady are O(1)
//	    (amortized: one map operation), however many watermarks are held.
//	    Flink Agents' RemoveKey scans the segments from the oldest; here each
//	    key keeps the FIFO of the segments holding it (segment id, count),
//	    so a completion finds its segment at once while a slow call holds
//	    hundreds of watermarks. OldestKeys, for diagnostics only, is
//	    O(keys with references).
//
// # Differences from Flink Agents 0.4
//
// Flink Agents' queue may hold no segment at all; a watermark added then
// opens the segment after it only, and a key added before the next pop is
// counted as if it had arrived before the watermark. Here the queue always
// has its newest (open) segment, so Q3 holds whatever the order
// of calls. The queue is not safe for concurrent use (the agent operator
// owns one per subtask and uses it from the subtask goroutine only), and,
// as in Flink Agents, it is not checkpointed: after a restore the keys with
// unfinished work are added to the first segment of a new queue, and the
// replayed stream rebuilds the rest.
package segq

// Queue is a segmented queue of references per key K and held marks M
// (watermarks, or watermarks and idle-status changes). The zero value is an
// empty queue with no clock (ages are 0); set Now before use to get ages.
type Queue[K comparable, M any] struct {
	// Now returns the current time in Unix milliseconds; it stamps marks
	// when they are added, for OldestAge. nil means ages are not tracked.
	Now func() int64

	// Segments are numbered; totals[head:] are the reference counts of the
	// live segments base, base+1, ..., oldest first. Once the queue has
	// been used, len(totals)-head == Held()+1: segment i holds the
	// references added before mark i, the last one those after every mark.
	totals []int
	head   int
	base   uint64
	marks  []held[M]
	mhead  int
	keys   map[K]*keyRefs
	free   []*keyRefs
	refs   int
}

// keyRefs is one key's references, per segment, oldest first.
type keyRefs struct {
	segs []segRef
	head int
}

type segRef struct {
	id uint64
	n  int32
}

type held[M any] struct {
	mark M
	at   int64
}

// newest returns the id of the newest segment, creating the first one if
// the queue has none.
func (q *Queue[K, M]) newest() uint64 {
	if q.head == len(q.totals) {
		q.totals = append(q.totals[:0], 0)
		q.head = 0
	}
	return q.base + uint64(len(q.totals)-1-q.head)
}

// AddKey adds one reference of key k to the newest segment (creating the
// first segment if the queue has none).
func (q *Queue[K, M]) AddKey(k K) {
	id := q.newest()
	q.totals[len(q.totals)-1]++
	q.refs++
	if q.keys == nil {
		q.keys = make(map[K]*keyRefs)
	}
	kr := q.keys[k]
	if kr == nil {
		if n := len(q.free); n > 0 {
			kr = q.free[n-1]
			q.free = q.free[:n-1]
		} else {
			kr = &keyRefs{}
		}
		q.keys[k] = kr
	}
	if n := len(kr.segs); n > kr.head && kr.segs[n-1].id == id {
		kr.segs[n-1].n++
		return
	}
	kr.segs = append(kr.segs, segRef{id: id, n: 1})
}

// RemoveKey removes one reference of k from the oldest segment holding k,
// and reports whether there was one. A false result means the caller's
// bookkeeping is off (a reference removed twice).
func (q *Queue[K, M]) RemoveKey(k K) bool {
	kr := q.keys[k]
	if kr == nil {
		return false
	}
	first := &kr.segs[kr.head]
	q.totals[q.head+int(first.id-q.base)]--
	q.refs--
	if first.n--; first.n > 0 {
		return true
	}
	kr.head++
	if kr.head == len(kr.segs) {
		delete(q.keys, k)
		kr.segs, kr.head = kr.segs[:0], 0
		if cap(kr.segs) <= 8 && len(q.free) < 1024 {
			q.free = append(q.free, kr)
		}
	}
	return true
}

// AddWatermark queues mark m behind every reference added so far and opens
// a new segment for the references added after it.
func (q *Queue[K, M]) AddWatermark(m M) {
	q.newest() // the segment before m exists, even when empty
	var at int64
	if q.Now != nil {
		at = q.Now()
	}
	q.marks = append(q.marks, held[M]{mark: m, at: at})
	q.totals = append(q.totals, 0)
}

// PopReady removes and returns the oldest held mark if the oldest segment
// is empty (every reference added before the mark has been removed). Call
// it in a loop to release every ready mark, oldest first.
func (q *Queue[K, M]) PopReady() (M, bool) {
	var zero M
	if q.mhead == len(q.marks) || q.totals[q.head] != 0 {
		return zero, false
	}
	q.head++
	q.base++
	m := q.marks[q.mhead].mark
	q.marks[q.mhead] = held[M]{}
	q.mhead++
	q.compact()
	return m, true
}

// compact reclaims the popped prefixes of totals and marks once they make
// up half of the slices, so the slices do not grow without bound.
func (q *Queue[K, M]) compact() {
	if q.mhead == len(q.marks) {
		q.marks = q.marks[:0]
		q.mhead = 0
	} else if q.mhead > 32 && q.mhead*2 > len(q.marks) {
		n := copy(q.marks, q.marks[q.mhead:])
		clear(q.marks[n:])
		q.marks = q.marks[:n]
		q.mhead = 0
	}
	if q.head > 32 && q.head*2 > len(q.totals) {
		n := copy(q.totals, q.totals[q.head:])
		q.totals = q.totals[:n]
		q.head = 0
	}
}

// Held returns the number of marks waiting.
func (q *Queue[K, M]) Held() int { return len(q.marks) - q.mhead }

// Segments returns the number of live segments (Held()+1 once the queue has
// been used, 0 before).
func (q *Queue[K, M]) Segments() int { return len(q.totals) - q.head }

// Refs returns the number of references outstanding over all segments.
func (q *Queue[K, M]) Refs() int { return q.refs }

// KeyRefs returns the number of references key k has outstanding, over all
// segments (0 for a key the queue does not hold). For diagnostics and
// tests; O(segments holding k).
func (q *Queue[K, M]) KeyRefs(k K) int {
	kr := q.keys[k]
	if kr == nil {
		return 0
	}
	n := 0
	for _, s := range kr.segs[kr.head:] {
		n += int(s.n)
	}
	return n
}

// NewestHolds reports whether the newest (open) segment, the one after
// every held mark, holds a reference of key k. For diagnostics and tests;
// O(1).
func (q *Queue[K, M]) NewestHolds(k K) bool {
	kr := q.keys[k]
	if kr == nil || len(kr.segs) == kr.head || q.head == len(q.totals) {
		return false
	}
	return kr.segs[len(kr.segs)-1].id == q.base+uint64(len(q.totals)-1-q.head)
}

// Oldest returns the oldest held mark and the time (Now) it was added; ok
// is false when no mark is held.
func (q *Queue[K, M]) Oldest() (m M, addedAt int64, ok bool) {
	if q.mhead == len(q.marks) {
		return m, 0, false
	}
	h := q.marks[q.mhead]
	return h.mark, h.at, true
}

// OldestAge returns how long (ms, by Now) the oldest held mark has waited,
// or 0 when no mark is held or Now is nil.
func (q *Queue[K, M]) OldestAge() int64 {
	if q.mhead == len(q.marks) || q.Now == nil {
		return 0
	}
	return max(0, q.Now()-q.marks[q.mhead].at)
}

// OldestKeys returns up to limit keys (all when limit <= 0) holding the
// oldest held mark back, with their reference counts in the oldest
// segment, in unspecified order. It is empty when no mark is held. It
// visits every key with references: use it for diagnostics.
func (q *Queue[K, M]) OldestKeys(limit int) map[K]int {
	out := map[K]int{}
	if q.mhead == len(q.marks) {
		return out
	}
	for k, kr := range q.keys {
		if limit > 0 && len(out) >= limit {
			break
		}
		if f := kr.segs[kr.head]; f.id == q.base {
			out[k] = int(f.n)
		}
	}
	return out
}

// OldestKeyCount returns the number of distinct keys holding the oldest
// held mark back (0 when no mark is held). Like OldestKeys it visits every
// key with references.
func (q *Queue[K, M]) OldestKeyCount() int {
	if q.mhead == len(q.marks) {
		return 0
	}
	n := 0
	for _, kr := range q.keys {
		if kr.segs[kr.head].id == q.base {
			n++
		}
	}
	return n
}
