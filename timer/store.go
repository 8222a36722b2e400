package timer

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/internal/wire"
	"github.com/weirproject/weir/keygroup"
)

// The queues of a Service made by NewServiceInStore keep their timers in a
// Store (the Pebble state backend's, state.Backend.TimerStore), as Flink's
// RocksDB backend keeps timers in RocksDB: a job whose timers do not fit
// in memory runs. Memory holds, per key group, a count and a small cache
// of the key group's first timers, and a heap of the key groups by their
// first timer (Flink's KeyGroupPartitionedPriorityQueue over
// RocksDBCachingPriorityQueueSet), so that Peek and Poll do not read the
// store, and a Poll writes two deletions.
//
// Layout of one key group's entries (keys as the Store sees them):
//
//	ordered:  tag | ts^(1<<63):uint64 BE | seq:uint64 BE  ->  field(key) field(namespace)
//	identity: tag+1 | ts^(1<<63):uint64 BE | field(key) field(namespace)  ->  seq:uint64 BE
//
// tag is 0 for event time and 2 for processing time; field is a uvarint
// length and the codec's bytes, as in the snapshot format. seq is a
// counter of the service, so the ordered entries sort by (timestamp,
// registration order): I2 holds across key groups too (equal
// (timestamp, seq) of timers restored natively from several old databases
// fire in key-group order). The identity entry answers Add's duplicate
// check, Remove and Contains with one point read.
//
// Invariants of a storeQueue (checked by checkStoreQueue in the tests):
//
//   - g.n is the number of ordered entries of the queue in key group g, and
//     q.n their sum; every ordered entry has its identity entry and back;
//   - g.cache[g.h:] (the live cache) is the first len timers of g in
//     (ts, seq) order, at most cacheCap of them, and it is empty only if
//     g.n is 0; a timer of g not in the live cache has an ordered key >= g.lo;
//   - heap holds the slots of the groups with g.n > 0, ordered by their
//     first timer (ts, seq, slot); g.hpos is the group's heap position, -1
//     when not queued;
//   - no timer of g has a timestamp above g.maxTs (Add and Remove answer from
//     the cache and maxTs when they can, without reading the store);
//   - seq is above every seq of the store's entries (Reload restores it).

// Store is ordered byte storage partitioned by key group, where a Service
// made by NewServiceInStore keeps its timers (the layout above is the
// timer package's; the store sees bytes). Keys are compared as byte
// strings. A Store panics if the storage fails (a full disk): the timer API
// has no error results, and the runtime turns a panic of an operator into
// a failed job that restarts from its last checkpoint.
type Store interface {
	// Get returns the value of k in key group kg, valid until the next call
	// on the store, and whether k exists.
	Get(kg int, k []byte) ([]byte, bool)
	// Set sets the value of k in key group kg.
	Set(kg int, k, v []byte)
	// Delete deletes k from key group kg (a missing k is a no-op).
	Delete(kg int, k []byte)
	// Scan calls f, in key order, for the entries of key group kg with
	// lo <= key < hi (hi nil: no upper bound), the key and value valid
	// during the call only, until f returns false. f must not write.
	Scan(kg int, lo, hi []byte, f func(k, v []byte) bool)
}

// cacheCap is how many of a key group's first timers a storeQueue keeps in
// memory.
const cacheCap = 32

// Tags of the entries of a Store (see the layout above).
const (
	tagEvent = 0
	tagProc  = 2
)

// cached is a timer in a key group's cache, with its place in the order and
// its encoded key and namespace (the value of its ordered entry).
type cached[K comparable, N comparable] struct {
	ts     int64
	seq    uint64
	t      Timer[K, N]
	fields []byte
}

func (c *cached[K, N]) before(ts int64, seq uint64) bool {
	return c.ts < ts || c.ts == ts && c.seq < seq
}

// kgQueue is the in-memory part of one key group of a storeQueue.
type kgQueue[K comparable, N comparable] struct {
	n     int
	cache []cached[K, N]
	h     int    // cache[:h] are fired or removed
	lo    []byte // lower bound of the ordered keys not cached
	hpos  int
	maxTs int64 // no timer of the group has a later timestamp
}

func (g *kgQueue[K, N]) live() []cached[K, N] { return g.cache[g.h:] }

// storeQueue is a queue (see Queue for its contract) whose timers live in a
// Store.
type storeQueue[K comparable, N comparable] struct {
	rng    keygroup.Range
	st     Store
	tag    byte
	kc     *codec.Codec[K] // the service's codecs
	nc     *codec.Codec[N]
	seq    *uint64 // the service's counter
	groups []kgQueue[K, N]
	heap   []int // slots of the groups with timers, a min-heap by first timer
	n      int
	kbuf   []byte // scratch for keys
	ibuf   []byte // scratch for identity keys
	fbuf   []byte // scratch for fields
}

func newStoreQueue[K comparable, N comparable](r keygroup.Range, st Store, tag byte, kc *codec.Codec[K], nc *codec.Codec[N], seq *uint64) *storeQueue[K, N] {
	q := &storeQueue[K, N]{rng: r, st: st, tag: tag, kc: kc, nc: nc, seq: seq, groups: make([]kgQueue[K, N], r.Len())}
	for i := range q.groups {
		q.groups[i].hpos, q.groups[i].maxTs = -1, math.MinInt64
	}
	return q
}

func (q *storeQueue[K, N]) Range() keygroup.Range { return q.rng }

func (q *storeQueue[K, N]) slot(kg int) int {
	if !q.rng.Contains(kg) {
		panic(fmt.Sprintf("timer: key group %d is outside this queue's key-group range %v (routing bug)",
			kg, q.rng))
	}
	return kg - q.rng.Start
}

func flipTs(ts int64) uint64 { return uint64(ts) ^ 1<<63 }

// orderedKey appends the ordered key of (ts, seq) of tag.
func orderedKey(dst []byte, tag byte, ts int64, seq uint64) []byte {
	dst = append(dst, tag)
	dst = binary.BigEndian.AppendUint64(dst, flipTs(ts))
	return binary.BigEndian.AppendUint64(dst, seq)
}

// encodeFields appends field(key) field(namespace) of t.
func (q *storeQueue[K, N]) encodeFields(dst []byte, t *Timer[K, N]) []byte {
	dst, err := wire.AppendField(dst, *q.kc, t.Key)
	if err != nil {
		panic(fmt.Sprintf("timer: encoding key %v for the timer store: %v", t.Key, err))
	}
	if dst, err = wire.AppendField(dst, *q.nc, t.Namespace); err != nil {
		panic(fmt.Sprintf("timer: encoding namespace %v for the timer store: %v", t.Namespace, err))
	}
	return dst
}

// identityKey appends the identity key of a timer of timestamp ts whose
// encoded key and namespace are fields.
func identityKey(dst []byte, tag byte, ts int64, fields []byte) []byte {
	dst = append(dst, tag+1)
	dst = binary.BigEndian.AppendUint64(dst, flipTs(ts))
	return append(dst, fields...)
}

// Answers of lookup.
const (
	unknown = iota
	absent
	present
)

// lookup tells from memory, if it can, whether t is stored, and if so its
// seq: a timer earlier than the last cached one (or any, when the whole
// group is cached) would be cached, and none is later than maxTs.
func (q *storeQueue[K, N]) lookup(g *kgQueue[K, N], t *Timer[K, N]) (int, uint64) {
	live := g.live()
	if len(live) == g.n || t.Timestamp < live[len(live)-1].ts {
		for i := range live {
			if c := &live[i]; c.ts == t.Timestamp && c.t.Key == t.Key && c.t.Namespace == t.Namespace {
				return present, c.seq
			}
		}
		return absent, 0
	}
	if t.Timestamp > g.maxTs {
		return absent, 0
	}
	return unknown, 0
}

func (q *storeQueue[K, N]) Add(t Timer[K, N]) bool {
	g := &q.groups[q.slot(t.KeyGroup)]
	q.fbuf = q.encodeFields(q.fbuf[:0], &t)
	q.ibuf = identityKey(q.ibuf[:0], q.tag, t.Timestamp, q.fbuf)
	switch k, _ := q.lookup(g, &t); k {
	case present:
		return false
	case unknown:
		if _, ok := q.st.Get(t.KeyGroup, q.ibuf); ok {
			return false
		}
	}
	q.add(t, q.fbuf, q.ibuf)
	return true
}

func (q *storeQueue[K, N]) AddNew(t Timer[K, N]) {
	q.slot(t.KeyGroup)
	q.fbuf = q.encodeFields(q.fbuf[:0], &t)
	q.ibuf = identityKey(q.ibuf[:0], q.tag, t.Timestamp, q.fbuf)
	q.add(t, q.fbuf, q.ibuf)
}

// add stores t, not queued, whose encoded key and namespace are fields and
// identity key ik.
func (q *storeQueue[K, N]) add(t Timer[K, N], fields, ik []byte) {
	i := t.KeyGroup - q.rng.Start
	*q.seq++
	seq := *q.seq
	q.kbuf = orderedKey(q.kbuf[:0], q.tag, t.Timestamp, seq)
	q.st.Set(t.KeyGroup, q.kbuf, fields)
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], seq)
	q.st.Set(t.KeyGroup, ik, sb[:])
	g := &q.groups[i]
	allCached := len(g.live()) == g.n
	g.maxTs = max(g.maxTs, t.Timestamp)
	g.n++
	q.n++
	live := g.live()
	if len(live) > 0 && !live[len(live)-1].before(t.Timestamp, seq) || allCached && len(live) < cacheCap {
		// t is among the first cached ones: insert it in order.
		g.compact()
		p, _ := slices.BinarySearchFunc(g.cache, t, func(c cached[K, N], t Timer[K, N]) int {
			if c.before(t.Timestamp, seq) {
				return -1
			}
			return 1
		})
		g.cache = slices.Insert(g.cache, p, cached[K, N]{ts: t.Timestamp, seq: seq, t: t, fields: slices.Clone(fields)})
		if len(g.cache) > cacheCap {
			last := len(g.cache) - 1
			e := &g.cache[last]
			g.lo = orderedKey(g.lo[:0], q.tag, e.ts, e.seq)
			g.cache[last] = cached[K, N]{}
			g.cache = g.cache[:last]
		}
		if p == 0 {
			q.headChanged(i)
		}
		return
	}
	// t stays in the store only.
	if allCached || bytesLess(q.kbuf, g.lo) {
		g.lo = append(g.lo[:0], q.kbuf...)
	}
}

func bytesLess(a, b []byte) bool { return string(a) < string(b) }

// compact moves the live cache to the front of its slice.
func (g *kgQueue[K, N]) compact() {
	if g.h == 0 {
		return
	}
	n := copy(g.cache, g.cache[g.h:])
	clear(g.cache[n:])
	g.cache, g.h = g.cache[:n], 0
}

// dropFirst removes the first live cached timer of slot i (whose entries
// are deleted already) and refills the cache if it emptied.
func (q *storeQueue[K, N]) dropFirst(i int) {
	g := &q.groups[i]
	g.cache[g.h] = cached[K, N]{}
	g.h++
	if g.h == len(g.cache) {
		g.cache, g.h = g.cache[:0], 0
		if g.n > 0 {
			q.refill(i)
		}
	}
	q.headChanged(i)
}

// refill loads the first timers of slot i, whose cache is empty, from the
// store.
func (q *storeQueue[K, N]) refill(i int) {
	g := &q.groups[i]
	kg := q.rng.Start + i
	lo := g.lo
	if len(lo) == 0 {
		lo = []byte{q.tag}
	}
	var err error
	q.st.Scan(kg, lo, []byte{q.tag + 1}, func(k, v []byte) bool {
		var c cached[K, N]
		if c, err = q.decode(kg, k, v); err != nil {
			return false
		}
		g.cache = append(g.cache, c)
		return len(g.cache) < cacheCap
	})
	if err != nil {
		panic(fmt.Sprintf("timer: reading the timers of key group %d from the store: %v", kg, err))
	}
	if len(g.cache) == 0 {
		panic(fmt.Sprintf("timer: the store holds none of the %d timers the queue counts in key group %d (was it changed behind the service's back? call Reload)", g.n, kg))
	}
	e := &g.cache[len(g.cache)-1]
	g.lo = orderedKey(g.lo[:0], q.tag, e.ts, e.seq)
}

// decode decodes an ordered entry of key group kg.
func (q *storeQueue[K, N]) decode(kg int, k, v []byte) (cached[K, N], error) {
	return decodeEntry(kg, k, v, *q.kc, *q.nc)
}

func decodeEntry[K comparable, N comparable](kg int, k, v []byte, kc codec.Codec[K], nc codec.Codec[N]) (cached[K, N], error) {
	if len(k) != 17 {
		return cached[K, N]{}, fmt.Errorf("%w: malformed timer entry key %x", codec.ErrCorruptSnapshot, k)
	}
	c := cached[K, N]{ts: int64(binary.BigEndian.Uint64(k[1:]) ^ 1<<63), seq: binary.BigEndian.Uint64(k[9:])}
	r := wire.NewReader(v, codec.ErrCorruptSnapshot)
	var err error
	c.t = Timer[K, N]{Timestamp: c.ts, KeyGroup: kg}
	if c.t.Key, err = wire.DecodeField(r, kc, "key"); err != nil {
		return c, err
	}
	if c.t.Namespace, err = wire.DecodeField(r, nc, "namespace"); err != nil {
		return c, err
	}
	if !r.Done() {
		return c, r.Corrupt("%d bytes after the namespace", r.Remaining())
	}
	c.fields = slices.Clone(v)
	return c, nil
}

func (q *storeQueue[K, N]) Remove(t Timer[K, N]) bool {
	i := q.slot(t.KeyGroup)
	g := &q.groups[i]
	q.fbuf = q.encodeFields(q.fbuf[:0], &t)
	q.ibuf = identityKey(q.ibuf[:0], q.tag, t.Timestamp, q.fbuf)
	k, seq := q.lookup(g, &t)
	switch k {
	case absent:
		return false
	case unknown:
		v, ok := q.st.Get(t.KeyGroup, q.ibuf)
		if !ok {
			return false
		}
		if len(v) != 8 {
			panic(fmt.Sprintf("timer: malformed timer identity entry in key group %d: value %x", t.KeyGroup, v))
		}
		seq = binary.BigEndian.Uint64(v)
	}
	q.st.Delete(t.KeyGroup, q.ibuf)
	q.kbuf = orderedKey(q.kbuf[:0], q.tag, t.Timestamp, seq)
	q.st.Delete(t.KeyGroup, q.kbuf)
	g.n--
	q.n--
	live := g.live()
	p, found := slices.BinarySearchFunc(live, seq, func(c cached[K, N], seq uint64) int {
		switch {
		case c.before(t.Timestamp, seq):
			return -1
		case c.ts == t.Timestamp && c.seq == seq:
			return 0
		}
		return 1
	})
	switch {
	case !found:
	case p == 0:
		q.dropFirst(i)
	default:
		p += g.h
		g.cache = slices.Delete(g.cache, p, p+1)
	}
	return true
}

func (q *storeQueue[K, N]) Contains(t Timer[K, N]) bool {
	g := &q.groups[q.slot(t.KeyGroup)]
	if k, _ := q.lookup(g, &t); k != unknown {
		return k == present
	}
	q.fbuf = q.encodeFields(q.fbuf[:0], &t)
	q.ibuf = identityKey(q.ibuf[:0], q.tag, t.Timestamp, q.fbuf)
	_, ok := q.st.Get(t.KeyGroup, q.ibuf)
	return ok
}

func (q *storeQueue[K, N]) first() *cached[K, N] {
	if len(q.heap) == 0 {
		return nil
	}
	g := &q.groups[q.heap[0]]
	return &g.cache[g.h]
}

func (q *storeQueue[K, N]) Peek() (Timer[K, N], bool) {
	if c := q.first(); c != nil {
		return c.t, true
	}
	var zero Timer[K, N]
	return zero, false
}

func (q *storeQueue[K, N]) PeekTimestamp() (int64, bool) {
	if c := q.first(); c != nil {
		return c.ts, true
	}
	return 0, false
}

func (q *storeQueue[K, N]) Poll() (Timer[K, N], bool) {
	if len(q.heap) == 0 {
		var zero Timer[K, N]
		return zero, false
	}
	i := q.heap[0]
	g := &q.groups[i]
	c := &g.cache[g.h]
	t := c.t
	kg := q.rng.Start + i
	q.ibuf = identityKey(q.ibuf[:0], q.tag, c.ts, c.fields)
	q.st.Delete(kg, q.ibuf)
	q.kbuf = orderedKey(q.kbuf[:0], q.tag, c.ts, c.seq)
	q.st.Delete(kg, q.kbuf)
	g.n--
	q.n--
	q.dropFirst(i)
	return t, true
}

func (q *storeQueue[K, N]) Len() int { return q.n }

func (q *storeQueue[K, N]) LenKeyGroup(kg int) int { return q.groups[q.slot(kg)].n }

// ForEachInKeyGroup scans the key group's timers in the store, in firing
// order. A timer the codecs cannot decode panics (the store is written by
// this service with the same codecs).
func (q *storeQueue[K, N]) ForEachInKeyGroup(kg int, f func(Timer[K, N])) {
	if q.groups[q.slot(kg)].n == 0 {
		return
	}
	var err error
	q.st.Scan(kg, []byte{q.tag}, []byte{q.tag + 1}, func(k, v []byte) bool {
		var c cached[K, N]
		if c, err = q.decode(kg, k, v); err != nil {
			return false
		}
		f(c.t)
		return true
	})
	if err != nil {
		panic(fmt.Sprintf("timer: reading the timers of key group %d from the store: %v", kg, err))
	}
}

// reload rebuilds the in-memory part from the store and returns the highest
// seq found.
func (q *storeQueue[K, N]) reload() (uint64, error) {
	var maxSeq uint64
	q.heap, q.n = q.heap[:0], 0
	for i := range q.groups {
		g := &q.groups[i]
		*g = kgQueue[K, N]{hpos: -1, lo: g.lo[:0], maxTs: math.MinInt64}
		kg := q.rng.Start + i
		var err error
		q.st.Scan(kg, []byte{q.tag}, []byte{q.tag + 1}, func(k, v []byte) bool {
			if len(k) != 17 {
				err = fmt.Errorf("%w: malformed timer entry key %x", codec.ErrCorruptSnapshot, k)
				return false
			}
			maxSeq = max(maxSeq, binary.BigEndian.Uint64(k[9:]))
			g.maxTs = int64(binary.BigEndian.Uint64(k[1:]) ^ 1<<63) // the last is the latest
			if len(g.cache) < cacheCap {
				var c cached[K, N]
				if c, err = q.decode(kg, k, v); err != nil {
					return false
				}
				g.cache = append(g.cache, c)
				g.lo = append(g.lo[:0], k...)
			}
			g.n++
			return true
		})
		if err != nil {
			return 0, fmt.Errorf("timer: reloading key group %d: %w", kg, err)
		}
		q.n += g.n
		q.headChanged(i)
	}
	return maxSeq, nil
}

// headChanged restores the heap after the first timer of slot i changed,
// was added or went.
func (q *storeQueue[K, N]) headChanged(i int) {
	g := &q.groups[i]
	switch {
	case g.n == 0 && g.hpos >= 0:
		q.removeAt(g.hpos)
	case g.n == 0:
	case g.hpos < 0:
		g.hpos = len(q.heap)
		q.heap = append(q.heap, i)
		q.up(g.hpos)
	default:
		if !q.up(g.hpos) {
			q.down(g.hpos)
		}
	}
}

func (q *storeQueue[K, N]) less(a, b int) bool {
	ga, gb := &q.groups[a], &q.groups[b]
	ca, cb := &ga.cache[ga.h], &gb.cache[gb.h]
	if ca.ts != cb.ts {
		return ca.ts < cb.ts
	}
	if ca.seq != cb.seq {
		return ca.seq < cb.seq
	}
	return a < b
}

func (q *storeQueue[K, N]) removeAt(p int) {
	h := q.heap
	last := len(h) - 1
	q.groups[h[p]].hpos = -1
	if p != last {
		h[p] = h[last]
		q.groups[h[p]].hpos = p
	}
	q.heap = h[:last]
	if p < last && !q.up(p) {
		q.down(p)
	}
}

func (q *storeQueue[K, N]) up(p int) bool {
	h := q.heap
	moved := false
	for p > 0 {
		parent := (p - 1) / 2
		if !q.less(h[p], h[parent]) {
			break
		}
		h[p], h[parent] = h[parent], h[p]
		q.groups[h[p]].hpos = p
		q.groups[h[parent]].hpos = parent
		p = parent
		moved = true
	}
	return moved
}

func (q *storeQueue[K, N]) down(p int) {
	h := q.heap
	n := len(h)
	for {
		c := 2*p + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && q.less(h[r], h[c]) {
			c = r
		}
		if !q.less(h[c], h[p]) {
			return
		}
		h[p], h[c] = h[c], h[p]
		q.groups[h[p]].hpos = p
		q.groups[h[c]].hpos = c
		p = c
	}
}

// AppendStoreSnapshot appends the snapshot of key group kg in the format
// of SnapshotKeyGroup, read from st, which holds timers in the layout of
// NewServiceInStore (a frozen view of the Pebble backend, for the
// asynchronous part of a snapshot). It rewrites bytes: the entries hold the
// codecs' bytes already, so no codec runs. It appends nothing for a key
// group without timers, and on a malformed entry returns dst with its
// original length and an error wrapping codec.ErrCorruptSnapshot.
func AppendStoreSnapshot(dst []byte, kg int, st Store) ([]byte, error) {
	orig := len(dst)
	var lists [2][]byte
	var counts [2]uint64
	var bad error
	for i, tag := range []byte{tagEvent, tagProc} {
		st.Scan(kg, []byte{tag}, []byte{tag + 1}, func(k, v []byte) bool {
			if len(k) != 17 {
				bad = fmt.Errorf("%w: malformed timer entry key %x in key group %d", codec.ErrCorruptSnapshot, k, kg)
				return false
			}
			lists[i] = binary.AppendVarint(lists[i], int64(binary.BigEndian.Uint64(k[1:])^1<<63))
			lists[i] = append(lists[i], v...)
			counts[i]++
			return true
		})
		if bad != nil {
			return dst[:orig], fmt.Errorf("timer: snapshot of key group %d: %w", kg, bad)
		}
	}
	if counts[0] == 0 && counts[1] == 0 {
		return dst, nil
	}
	dst = binary.AppendUvarint(dst, SnapshotVersion)
	dst = binary.AppendUvarint(dst, uint64(kg))
	for i := range lists {
		dst = binary.AppendUvarint(dst, counts[i])
		dst = append(dst, lists[i]...)
	}
	return dst, nil
}
