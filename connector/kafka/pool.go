package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record slabs are reused. franz-go parses each record batch of a fetch
// response into a slab ([]kgo.Record, 160 bytes per record); without
// reuse every record costs a fresh slab entry, which is most of what a
// source allocates and so most of the garbage collector's work during a
// replay. With it, the reader recycles each record once emit is done with
// it (kgo.Record.Recycle), and franz-go puts the slab back into the
// reader's slabPool once every kept record of its batch is recycled.
//
// Each reader has its own pool, a bounded free list rather than a
// sync.Pool: a sync.Pool is emptied by every other garbage collection
// (during a replay, several times a second), and handed back slabs of any
// size, so franz-go grew a slab shorter than the batch by copying it into a
// new one. Between a quarter and a half of the batches of a replay missed
// it (issue 17: 1M records, 381 batches, 95–192 misses and 83–113 slabs too
// short per run).
//
// Invariants:
//   - Only the Record structs are reused: a record's Key, Value and header
//     values point into the fetch response's (decompressed) bytes, which
//     are never pooled, so a deserializer or a dead letter may keep them
//     (as the Deserializer contract promises).
//   - A record is recycled exactly once, after its last use by the reader;
//     records the reader drops unread (a stop mid-batch, a reset) are not
//     recycled, and their slab is left to the garbage collector.
//   - GetRecords never returns a slab shorter than asked for, so franz-go
//     never grows (copies) one.
//   - The free list holds at most maxFreeSlabs slabs and maxFreeRecords
//     records: what the reader's fetchers parse between two of its polls,
//     not what a replay once peaked at.
//   - What a free list cannot keep (beyond its bounds, or left when its
//     reader closes) goes to spill, one sync.Pool for the process, so that
//     a new reader (a restarted job, a short bounded read) starts with the
//     slabs of those before it. A free list that has no slab for n takes
//     one from spill only if it is long enough, and drops a shorter one.

// maxFreeSlabs and maxFreeRecords bound one reader's free list. A fetch of
// the default 1 MiB per partition holds a few dozen batches of a few
// thousand small records; the free list keeps about one such fetch: at
// most 20 MiB of zeroed slabs, kept for the reader's life once a replay
// has grown them (while it reads ahead, a reader holds up to
// BufferedFetches such fetches anyway).
const (
	maxFreeSlabs   = 64
	maxFreeRecords = 1 << 17
)

// slabPool is one reader's free record slabs; it implements
// kgo.PoolRecords. Its fetch goroutines take slabs and its subtask
// goroutine (Poll, recycling the records it emitted) gives them back: a
// lock per batch of records, none per record.
type slabPool struct {
	mu      sync.Mutex
	free    [][]kgo.Record
	records int // total capacity of free
}

// GetRecords returns the smallest free slab of at least n records, or a
// new one of exactly n.
func (p *slabPool) GetRecords(n int) []kgo.Record {
	p.mu.Lock()
	best := -1
	for i, s := range p.free {
		if c := cap(s); c >= n && (best < 0 || c < cap(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		s := p.free[best]
		last := len(p.free) - 1
		p.free[best] = p.free[last]
		p.free[last] = nil
		p.free = p.free[:last]
		p.records -= cap(s)
		p.mu.Unlock()
		return s
	}
	p.mu.Unlock()
	if v, ok := spill.Get().(*[]kgo.Record); ok && cap(*v) >= n {
		return *v
	}
	return make([]kgo.Record, n)
}

// spill holds the slabs the readers' free lists could not keep, for any
// reader of the process (see the invariants above).
var spill sync.Pool

// spillSlab puts recs into spill.
func spillSlab(recs []kgo.Record) { spill.Put(&recs) }

// release moves the free list into spill; the reader calls it when it
// closes. A nil pool has nothing to release.
func (p *slabPool) release() {
	if p == nil {
		return
	}
	p.mu.Lock()
	free := p.free
	p.free, p.records = nil, 0
	p.mu.Unlock()
	for _, s := range free {
		spillSlab(s)
	}
}

// PutRecords takes back a slab that franz-go has zeroed. A full free list
// keeps the larger slabs (a small one fits fewer batches): it drops its
// smallest ones for recs if that makes room, and recs otherwise.
func (p *slabPool) PutRecords(recs []kgo.Record) {
	c := cap(recs)
	if c == 0 {
		return
	}
	if c > maxFreeRecords {
		spillSlab(recs)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fits := func(slabs, records int) bool { return slabs < maxFreeSlabs && records+c <= maxFreeRecords }
	if !fits(len(p.free), p.records) {
		// Would dropping every smaller slab make room?
		slabs, records := len(p.free), p.records
		for _, s := range p.free {
			if cap(s) < c {
				slabs--
				records -= cap(s)
			}
		}
		if !fits(slabs, records) {
			spillSlab(recs)
			return
		}
		for !fits(len(p.free), p.records) {
			small := 0
			for i, s := range p.free {
				if cap(s) < cap(p.free[small]) {
					small = i
				}
			}
			spillSlab(p.free[small])
			p.records -= cap(p.free[small])
			last := len(p.free) - 1
			p.free[small] = p.free[last]
			p.free[last] = nil
			p.free = p.free[:last]
		}
	}
	p.free = append(p.free, recs)
	p.records += c
}
