package ordering

import "github.com/weirproject/weir/internal/mutant"

// heldQueue holds the sort's records until the watermark releases them, in
// the order (timestamp, tiebreak, arrival) of heldRec.less.
//
// Invariants:
//
//	H1. Every record pushed and not yet released is in exactly one place:
//	    a run (its chunks from chunks[0][head] on) or the spill heap.
//	H2. Each run is sorted by less (a record is appended to a run only if
//	    it is not less than the run's last record), so its head is its
//	    smallest record.
//	H3. release(wm) emits every held record with ts <= wm in less order,
//	    exactly the order a single heap would pop them in (less is a total
//	    order: seq is unique), and nothing else.
//
// Design: the sort's input is mostly many sorted streams interleaved: each
// Kafka partition (the first tiebreak value) delivers its records in
// timestamp order, above all while it catches up on history. So records are
// appended to a run per first tiebreak value (O(1), no comparison beyond
// the run's tail) and released by merging the runs' heads through a heap of
// runs (log of the number of partitions, not of the records held). A record
// that would break its run's order (out-of-order input, or input without a
// tiebreak) goes to the spill heap instead, which takes part in the merge
// as one more source. The obvious design, one heap of all records, pays
// O(log n) moves of whole records per pop; with a catch-up's hundreds of
// thousands of records held, that was the sort's main cost.
//
// Bounds: at most maxRuns runs (distinct first tiebreak values) are kept;
// records of further values go to the spill heap, so a tiebreak with
// unbounded distinct first values degrades to the single heap, never to
// unbounded run bookkeeping.
type heldQueue[T any] struct {
	runs  []*heldRun[T]
	runOf map[int64]*heldRun[T]
	spill []heldRec[T] // min-heap by less
	n     int          // records held
	merge []*heldRun[T]
	// chunk is the capacity of a run's chunks (0: runChunk); free holds
	// emptied chunks for reuse, at most maxFreeChunks.
	chunk int
	free  [][]heldRec[T]
}

// maxRuns bounds the runs of a heldQueue.
const maxRuns = 1024

// runChunk is the number of records per chunk of a run, maxFreeChunks how
// many emptied chunks a queue keeps for reuse. A run grows and shrinks by
// whole chunks: no record is ever copied to grow a run, and the memory of a
// catch-up goes back chunk by chunk as it is released.
const (
	runChunk      = 1024
	maxFreeChunks = 64
)

// heldRun is a sorted run of records of one first tiebreak value, in
// chunks: chunks[0][head:], chunks[1], ... are held (every chunk but the
// last is full; records before head were released).
type heldRun[T any] struct {
	chunks [][]heldRec[T]
	head   int
}

func (r *heldRun[T]) top() *heldRec[T] { return &r.chunks[0][r.head] }

func (r *heldRun[T]) empty() bool {
	return len(r.chunks) == 0 || (len(r.chunks) == 1 && r.head == len(r.chunks[0]))
}

func (r *heldRun[T]) last() *heldRec[T] {
	c := r.chunks[len(r.chunks)-1]
	return &c[len(c)-1]
}

// push holds h.
func (q *heldQueue[T]) push(h heldRec[T]) {
	q.n++
	run := q.runOf[h.t1]
	if run == nil && len(q.runs) < maxRuns {
		if q.runOf == nil {
			q.runOf = map[int64]*heldRun[T]{}
		}
		run = &heldRun[T]{}
		q.runOf[h.t1] = run
		q.runs = append(q.runs, run)
	}
	if run == nil || (!run.empty() && h.less(run.last()) && !mutant.On(mutant.SortArrivalOrder)) {
		q.pushSpill(h)
		return
	}
	if n := len(run.chunks); n == 0 || len(run.chunks[n-1]) == cap(run.chunks[n-1]) {
		run.chunks = append(run.chunks, q.newChunk())
	}
	n := len(run.chunks) - 1
	run.chunks[n] = append(run.chunks[n], h)
}

func (q *heldQueue[T]) newChunk() []heldRec[T] {
	if n := len(q.free); n > 0 {
		c := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		return c
	}
	size := q.chunk
	if size <= 0 {
		size = runChunk
	}
	return make([]heldRec[T], 0, size)
}

// pop removes r's top (already emitted), recycling an emptied chunk.
func (q *heldQueue[T]) pop(r *heldRun[T]) {
	c := r.chunks[0]
	var zero heldRec[T]
	c[r.head] = zero
	r.head++
	if r.head < len(c) {
		return
	}
	if len(r.chunks) == 1 && len(c) < cap(c) {
		// The run's only chunk, not full: appends continue in it.
		return
	}
	r.chunks[0] = nil
	r.chunks = r.chunks[1:]
	r.head = 0
	if len(q.free) < maxFreeChunks {
		q.free = append(q.free, c[:0])
	}
	if len(r.chunks) == 0 {
		r.chunks = nil
	}
}

func (q *heldQueue[T]) pushSpill(h heldRec[T]) {
	q.spill = append(q.spill, h)
	hp := q.spill
	i := len(hp) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !hp[i].less(&hp[p]) {
			break
		}
		hp[i], hp[p] = hp[p], hp[i]
		i = p
	}
}

func (q *heldQueue[T]) popSpill() heldRec[T] {
	hp := q.spill
	top := hp[0]
	n := len(hp) - 1
	hp[0] = hp[n]
	var zero heldRec[T]
	hp[n] = zero
	hp = hp[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && hp[r].less(&hp[l]) {
			m = r
		}
		if !hp[m].less(&hp[i]) {
			break
		}
		hp[i], hp[m] = hp[m], hp[i]
		i = m
	}
	q.spill = hp
	return top
}

// len returns the number of records held.
func (q *heldQueue[T]) len() int { return q.n }

// release emits, in less order, every held record with ts <= wm (H3), and
// returns how many.
func (q *heldQueue[T]) release(wm int64, emit func(*heldRec[T])) int {
	// The merge heap: runs whose head is due, by head.
	m := q.merge[:0]
	for _, r := range q.runs {
		if !r.empty() && r.top().ts <= wm {
			m = append(m, r)
		}
	}
	for i := len(m)/2 - 1; i >= 0; i-- {
		siftDownRuns(m, i)
	}
	released := 0
	for {
		var r *heldRun[T]
		if len(m) > 0 {
			r = m[0]
		}
		if len(q.spill) > 0 && q.spill[0].ts <= wm && (r == nil || q.spill[0].less(r.top())) {
			h := q.popSpill()
			emit(&h)
			released++
			continue
		}
		if r == nil {
			break
		}
		emit(r.top())
		q.pop(r)
		released++
		if !r.empty() && r.top().ts <= wm {
			siftDownRuns(m, 0)
			continue
		}
		last := len(m) - 1
		m[0] = m[last]
		m[last] = nil
		m = m[:last]
		if len(m) > 0 {
			siftDownRuns(m, 0)
		}
	}
	q.merge = m[:0]
	q.n -= released
	if len(q.spill) == 0 && cap(q.spill) > 1<<16 {
		q.spill = nil
	}
	return released
}

func siftDownRuns[T any](m []*heldRun[T], i int) {
	n := len(m)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && m[r].top().less(m[l].top()) {
			c = r
		}
		if !m[c].top().less(m[i].top()) {
			return
		}
		m[i], m[c] = m[c], m[i]
		i = c
	}
}

// all returns every held record, in no particular order.
func (q *heldQueue[T]) all() []heldRec[T] {
	out := make([]heldRec[T], 0, q.n)
	for _, r := range q.runs {
		for i, c := range r.chunks {
			if i == 0 {
				c = c[r.head:]
			}
			out = append(out, c...)
		}
	}
	return append(out, q.spill...)
}
