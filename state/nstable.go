package state

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/weirproject/weir/internal/keyhash"
)

// The storage of namespaced state, shared by NamespacedValueState (X = V)
// and NamespacedListState (X = []V).
//
// Each key group holds an open-addressing hash table (nsGroup) from key to
// the key's namespaces (nsEntries), stored inline in the table's slots: one
// inline slot for the newest namespace (most keys have one window at a
// time) and, behind a pointer, one array for the others (sliding windows,
// sessions, and tumbling windows waiting for the watermark to fire them),
// used as a ring, oldest first, its length, capacity and start kept in the
// slot, so that reaching them costs one pointer and no header and the
// oldest (the next to fire) leaves without moving the others. Reading
// (key, ns) is one table lookup with the key alone (internal/keyhash),
// which usually touches one cache line, plus a scan of the key's few
// namespaces: the newest, the oldest, then the others newest first. Keys
// with many namespaces (long sliding windows, long allowed lateness) get an
// index map in their key group.
//
// Invariant (nsFirstMax): when a state has an order on namespaces
// (OrderNamespaces) and a key's flag is set, its first namespace is the
// greatest it holds, so a greater one is absent without a scan. The flag is
// set when the key gets its only namespace or a namespace greater than a
// flagged first, cleared by any other addition and whenever first is
// removed.
//
// The state remembers the entries of the current key found by the last
// access (valid while the backend's epoch is unchanged), so the usual
// read-modify-write of a record (Value then Update, Get then Add) costs one
// table lookup.
//
// When the last namespace of a key is removed its entries stay in the table,
// empty, for the key's next namespace (the next window of the key), so a key
// that opens and closes windows all the time does not allocate or churn the
// table. Empty entries are invisible: counts, iteration and snapshots see
// (key, namespace) pairs only. A sweep bounds them: it deletes the entries
// that were empty at the previous sweep and still are, and marks the others
// that are empty. A key group is swept after max(sweepMin, n) removals,
// where n is its number of live pairs at its previous sweep: fixing the
// period at the sweep, rather than following n down while a watermark
// fires the windows of every key, keeps it to one sweep per such burst, so
// a key whose next window opens before the burst after keeps its entries,
// and sweeping costs amortized O(1) per removal and insertion. Every empty
// entry became empty by a removal since one of the last two sweeps, so a
// key group holds at most 2*max(sweepMin, live pairs at its last two
// sweeps) empty entries.

// sweepMin is the least number of namespace removals in a key group between
// two sweeps of its empty entries.
const sweepMin = 64

// Index thresholds: a key's namespaces get an index map when it has more
// than nsIndexAbove of them, dropped when they fall to nsIndexBelow. Below
// that a scan of the slots is faster than a map access.
const (
	nsIndexAbove = 32
	nsIndexBelow = 8
)

// nsSlot is one namespace of a key and its value.
type nsSlot[N comparable, X any] struct {
	ns N
	v  X
}

// nsEntries is the namespaces of one key. It is kept small (48 bytes for a
// window namespace and a two-word value) so that many keys fit in the
// caches: the key's other namespaces are in one array of their own, behind
// more, with its length, capacity and start in the entries (no header to
// reach first). The array is allocated when the key first has two
// namespaces and kept (grown by doubling, shrunk only when mostly unused),
// so that a key whose windows overlap now and then (tumbling windows until
// the watermark fires them, sliding windows, sessions) does not allocate in
// steady state.
//
// Positions: 0 is first, i > 0 is the (i-1)th slot of more in ring order,
// which starts at more[head] and wraps around the array; positions
// 0..count()-1 are in use. Without an index the slots are in the order the
// namespaces were added: first is the newest, position 1 the oldest,
// position n the newest but one. The ring lets the oldest go (the window a
// watermark fires) without moving the others, and a lookup tries it before
// scanning the rest newest to oldest, because apart from it the newest
// namespaces are the busy ones (the current window of a key takes its
// records while older ones wait for the watermark). A key with many
// namespaces has an index in its key group (nsGroup.idx) and its slots in
// any order.
type nsEntries[N comparable, X any] struct {
	first nsSlot[N, X]
	more  *nsSlot[N, X] // element 0 of an array of moreCap() slots, or nil
	n     uint32        // slots of more in use
	flags uint16        // nsHas, nsStale, nsIndexed, nsFirstMax, and log2(moreCap())+1 << nsCapShift
	// head is the index in more of position 1 (0 when more is empty). It
	// moves only when the oldest leaves a key without an index, whose
	// array has at most 2*nsIndexAbove slots (it grows past that only
	// with an index, and shrinks to it before the index goes), and every
	// reallocation resets it, so 16 bits are plenty whatever the capacity.
	head uint16
}

// nsEntries flags.
const (
	nsHas      = 1 << 0 // first is in use (when not, the key has no namespace)
	nsStale    = 1 << 1 // empty at the last sweep of its key group
	nsIndexed  = 1 << 2 // the key's positions are in its group's index
	nsFirstMax = 1 << 3 // first is the greatest namespace of the key (nsTable.before)
	nsCapShift = 4      // flags >> nsCapShift is log2(capacity of more) + 1, 0 without more
)

func (e *nsEntries[N, X]) has() bool     { return e.flags&nsHas != 0 }
func (e *nsEntries[N, X]) stale() bool   { return e.flags&nsStale != 0 }
func (e *nsEntries[N, X]) indexed() bool { return e.flags&nsIndexed != 0 }

func (e *nsEntries[N, X]) setFlag(f uint16, on bool) {
	if on {
		e.flags |= f
	} else {
		e.flags &^= f
	}
}

// moreCap is the capacity of the array behind more.
func (e *nsEntries[N, X]) moreCap() int {
	if c := e.flags >> nsCapShift; c > 0 {
		return 1 << (c - 1)
	}
	return 0
}

// ring returns the array behind more, moreCap() long.
func (e *nsEntries[N, X]) ring() []nsSlot[N, X] {
	if e.more == nil {
		return nil
	}
	return unsafe.Slice(e.more, e.moreCap())
}

// moreAt returns slot i of more in ring order (position i+1).
func (e *nsEntries[N, X]) moreAt(i int) *nsSlot[N, X] {
	r := e.ring()
	return &r[(int(e.head)+i)&(len(r)-1)]
}

// setMore makes arr (a power of two long, at least max(n, 1)) the array
// behind more, holding the slots of more in ring order from arr[0].
func (e *nsEntries[N, X]) setMore(arr []nsSlot[N, X]) {
	for i := range int(e.n) {
		arr[i] = *e.moreAt(i)
	}
	e.head = 0
	e.more = &arr[0]
	e.flags = e.flags&(1<<nsCapShift-1) | uint16(bits.Len(uint(len(arr))))<<nsCapShift
}

func (e *nsEntries[N, X]) count() int {
	if !e.has() {
		return 0
	}
	return 1 + int(e.n)
}

func (e *nsEntries[N, X]) at(pos int) *nsSlot[N, X] {
	if pos == 0 {
		return &e.first
	}
	return e.moreAt(pos - 1)
}

// pos returns the position of ns, or -1; ix is the key's index if it is
// indexed.
func (e *nsEntries[N, X]) pos(ns N, ix map[N]int32) int {
	if !e.has() {
		return -1
	}
	if e.first.ns == ns {
		return 0
	}
	if e.n == 0 {
		return -1
	}
	if ix != nil {
		if p, ok := ix[ns]; ok && p > 0 {
			return int(p)
		}
		return -1
	}
	r := e.ring()
	mask, h := len(r)-1, int(e.head)
	if r[h].ns == ns {
		return 1 // the oldest
	}
	for i := int(e.n) - 1; i > 0; i-- {
		if r[(h+i)&mask].ns == ns {
			return i + 1
		}
	}
	return -1
}

// nsMinMore is the capacity of the array a key gets for its second
// namespace.
const nsMinMore = 2

// add adds namespace ns, which e does not hold, in front, and returns its
// slot and whether the key needs an index now. greatest says ns is greater
// than every namespace e holds (nsFirstMax). ix is the key's index if it is
// indexed; add keeps it up to date.
func (e *nsEntries[N, X]) add(ns N, v X, greatest bool, ix map[N]int32) (*nsSlot[N, X], bool) {
	if !e.has() {
		e.first = nsSlot[N, X]{ns, v}
		e.flags = e.flags&^nsStale | nsHas | nsFirstMax
		return &e.first, false
	}
	e.setFlag(nsFirstMax, greatest)
	n := int(e.n)
	if n == e.moreCap() {
		e.setMore(make([]nsSlot[N, X], max(nsMinMore, 2*n)))
	}
	moved := e.moreAt(n)
	*moved = e.first
	e.n++
	e.first = nsSlot[N, X]{ns, v}
	if ix != nil {
		ix[moved.ns] = int32(n + 1)
		ix[ns] = 0
		return &e.first, false
	}
	return &e.first, n+2 > nsIndexAbove
}

// buildIndex returns an index of e's positions.
func (e *nsEntries[N, X]) buildIndex() map[N]int32 {
	ix := make(map[N]int32, 2*e.count())
	for p := range e.count() {
		ix[e.at(p).ns] = int32(p)
	}
	return ix
}

// remove removes the namespace at position pos, and reports whether the
// key should drop its index (it has few namespaces left). ix is the key's
// index if it is indexed; remove keeps it up to date.
func (e *nsEntries[N, X]) remove(pos int, ix map[N]int32) (dropIndex bool) {
	if e.n == 0 {
		e.first = nsSlot[N, X]{}
		e.flags &^= nsHas
		return ix != nil
	}
	last := int(e.n) // position of the last slot
	if pos == 0 {
		// Another namespace becomes first. Whether it is the greatest is
		// not known: without an index it is if the key's namespaces came in
		// order, unless an index (since dropped) reordered its slots; with
		// one, the last slot takes its place.
		e.flags &^= nsFirstMax
	}
	freed := e.at(last) // the slot that falls out of use
	switch {
	case ix != nil:
		// Any order: the last slot takes pos.
		delete(ix, e.at(pos).ns)
		if pos != last {
			*e.at(pos) = *freed
			ix[e.at(pos).ns] = int32(pos)
		}
	case pos == 0:
		// The newest but one becomes first.
		e.first = *freed
	case pos == 1:
		// The oldest: the ring starts after it.
		freed = e.at(1)
		e.head = uint16((int(e.head) + 1) & (e.moreCap() - 1))
	default:
		// Keep the order.
		for p := pos; p < last; p++ {
			*e.at(p) = *e.at(p + 1)
		}
	}
	*freed = nsSlot[N, X]{} // release what it referenced
	e.n--
	if e.n == 0 {
		e.head = 0
	}
	// Keep the storage for the key's next namespaces, unless the key had
	// many once and has few now.
	if c := e.moreCap(); c > 2*nsIndexAbove && int(e.n) < c/4 {
		e.setMore(make([]nsSlot[N, X], max(nsMinMore, 1<<bits.Len(uint(e.n)))))
	}
	return ix != nil && int(e.n)+1 <= nsIndexBelow
}

// nsGroup is the namespaced state of one key group: the entries of its keys,
// inline in an open-addressing hash table (linear probing, at most 3/4
// full, deletion by backward shift). Compared with a Go map of pointers, a
// lookup touches one slot, usually one cache line, and no separate entry.
// Slots move when the table grows or a sweep deletes, so pointers to
// entries are valid until the next insertion of a key or sweep.
//
// Beside the slots, one control byte a slot (ctrl.go; no tombstones here).
// A lookup reads the key's home byte and, unless the key is there, the
// eight bytes from there at once, and goes only to the slots whose byte
// matches: it touches the key's slot and no other (a key displaced from
// its home by a collision would otherwise cost a second slot, a second
// cache line).
type nsGroup[K comparable, N comparable, X any] struct {
	slots   []nsKeySlot[K, N, X] // nil or a power of two long
	ctrl    []uint8              // len(slots)+ctrlPad control bytes (nil with slots)
	keys    int                  // used slots (keys with entries, live or empty)
	n       int                  // (key, namespace) pairs
	removed int                  // namespaces removed since the last sweep
	every   int                  // removals between sweeps: the live pairs at the last sweep
	idx     map[K]map[N]int32    // positions by namespace of the keys that have many (nsIndexed)
}

// nsKeySlot is one slot of a key group's table.
type nsKeySlot[K comparable, N comparable, X any] struct {
	hash uint32 // low bits of keyhash.Of(key); the home slot is hash & mask
	used bool
	key  K
	e    nsEntries[N, X]
}

// nsMinSlots is the size of a key group's table when it gets its first key.
const nsMinSlots = 8

// setCtrl sets slot i's control byte (and its copy past the end).
func (g *nsGroup[K, N, X]) setCtrl(i uint32, c uint8) {
	g.ctrl[i] = c
	if i < ctrlPad {
		g.ctrl[int(i)+len(g.slots)] = c
	}
}

// find returns the slot index of key k, whose hash is h, or -1. A key in
// its home slot (most keys) is found by that slot's control byte alone;
// the others by matching eight bytes at a time.
func (g *nsGroup[K, N, X]) find(k K, h uint32) int {
	mask := uint32(len(g.slots) - 1)
	tag := nsTag(h)
	home := h & mask
	if g.ctrl[home] == tag {
		if s := &g.slots[home]; s.hash == h && s.key == k {
			return int(home)
		}
	}
	for i := home; ; i = (i + 8) & mask {
		w := binary.LittleEndian.Uint64(g.ctrl[i:])
		for m := matchTag(w, tag); m != 0; m &= m - 1 {
			j := (i + uint32(bits.TrailingZeros64(m)>>3)) & mask
			if s := &g.slots[j]; s.hash == h && s.key == k {
				return int(j)
			}
		}
		if matchFree(w) != 0 {
			return -1 // k would be before the first free slot
		}
	}
}

// newNsGroup returns an empty group sized for about keys keys.
func newNsGroup[K comparable, N comparable, X any](keys int) *nsGroup[K, N, X] {
	g := &nsGroup[K, N, X]{}
	if keys > 0 {
		g.resize(keys)
	}
	return g
}

// lookup returns the entries of key k, nil if it has none.
func (g *nsGroup[K, N, X]) lookup(k K) *nsEntries[N, X] {
	if g.keys == 0 {
		return nil
	}
	if i := g.find(k, keyhash.Of(k)); i >= 0 {
		return &g.slots[i].e
	}
	return nil
}

// lookupOrNew returns the entries of key k, creating them if needed.
func (g *nsGroup[K, N, X]) lookupOrNew(k K) *nsEntries[N, X] {
	h := keyhash.Of(k)
	if g.keys > 0 {
		if i := g.find(k, h); i >= 0 {
			return &g.slots[i].e
		}
	}
	if 4*(g.keys+1) > 3*len(g.slots) {
		g.resize(g.keys + 1)
	}
	s := g.place(h)
	s.hash, s.used, s.key = h, true, k
	g.keys++
	return &s.e
}

// place returns the first free slot from the home slot of hash h, its
// control byte set for h.
func (g *nsGroup[K, N, X]) place(h uint32) *nsKeySlot[K, N, X] {
	mask := uint32(len(g.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if s := &g.slots[i]; !s.used {
			g.setCtrl(i, nsTag(h))
			return s
		}
	}
}

// resize moves the used slots to a table sized for keys keys (at most half
// full).
func (g *nsGroup[K, N, X]) resize(keys int) {
	size := nsMinSlots
	for size < 2*keys {
		size *= 2
	}
	old := g.slots
	g.slots = make([]nsKeySlot[K, N, X], size)
	g.ctrl = make([]uint8, size+ctrlPad)
	for i := range old {
		if s := &old[i]; s.used {
			*g.place(s.hash) = *s
		}
	}
}

// deleteAt frees slot i, moving later slots of its probe run back so that
// every key stays reachable from its home slot.
func (g *nsGroup[K, N, X]) deleteAt(i uint32) {
	mask := uint32(len(g.slots) - 1)
	for j := (i + 1) & mask; g.slots[j].used; j = (j + 1) & mask {
		// Slot j may fill the hole at i if its home is not in (i, j].
		if home := g.slots[j].hash & mask; (j-home)&mask >= (j-i)&mask {
			g.slots[i] = g.slots[j]
			g.setCtrl(i, g.ctrl[j])
			i = j
		}
	}
	g.slots[i] = nsKeySlot[K, N, X]{}
	g.setCtrl(i, 0)
	g.keys--
}

// each calls f for every key of g with namespaces, its entries and their
// count, in slot order (unspecified), until f returns an error. f must not
// change g.
func (g *nsGroup[K, N, X]) each(f func(K, *nsEntries[N, X], int) error) error {
	for i := range g.slots {
		s := &g.slots[i]
		if !s.used {
			continue
		}
		if c := s.e.count(); c > 0 {
			if err := f(s.key, &s.e, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// set stores v under (k, ns), replacing any value there.
func (g *nsGroup[K, N, X]) set(k K, ns N, v X) {
	e := g.lookupOrNew(k)
	if p := e.pos(ns, g.index(k, e)); p >= 0 {
		e.at(p).v = v
		return
	}
	g.addNs(k, e, ns, v, false)
	g.n++
}

// index returns the index of key k, whose entries are e, or nil if it has
// none.
func (g *nsGroup[K, N, X]) index(k K, e *nsEntries[N, X]) map[N]int32 {
	if !e.indexed() {
		return nil
	}
	return g.idx[k]
}

// addNs adds namespace ns, which key k (entries e) does not hold, in front,
// and returns its slot; it gives the key an index when it gets many.
// greatest is as for nsEntries.add.
func (g *nsGroup[K, N, X]) addNs(k K, e *nsEntries[N, X], ns N, v X, greatest bool) *nsSlot[N, X] {
	sl, needIndex := e.add(ns, v, greatest, g.index(k, e))
	if needIndex {
		if g.idx == nil {
			g.idx = map[K]map[N]int32{}
		}
		g.idx[k] = e.buildIndex()
		e.setFlag(nsIndexed, true)
		sl = &e.first
	}
	return sl
}

// removeNs removes the namespace at position pos of key k (entries e); the
// key loses its index when it has few namespaces left.
func (g *nsGroup[K, N, X]) removeNs(k K, e *nsEntries[N, X], pos int) {
	if e.remove(pos, g.index(k, e)) {
		delete(g.idx, k)
		e.setFlag(nsIndexed, false)
	}
}

// removed1 records the removal of one namespace and sweeps when due. It
// reports whether it swept.
func (g *nsGroup[K, N, X]) removed1() bool {
	g.n--
	g.removed++
	if g.removed < max(sweepMin, g.every) {
		return false
	}
	g.sweep()
	return true
}

// sweep deletes the entries that were empty at the previous sweep and still
// are, and marks the empty ones; then it shrinks the table if it is mostly
// free.
func (g *nsGroup[K, N, X]) sweep() {
	g.removed, g.every = 0, g.n
	if g.keys == 0 {
		return
	}
	// Start after a free slot (there is one: the table is at most 3/4
	// full) and go round once: a deletion only moves slots of the probe
	// run being walked back into it, so no slot is visited twice.
	mask := uint32(len(g.slots) - 1)
	start := uint32(0)
	for g.slots[start].used {
		start++
	}
	i := (start + 1) & mask
	for k := 0; k < len(g.slots); {
		if s := &g.slots[i]; s.used && !s.e.has() {
			if s.e.stale() {
				g.deleteAt(i)
				continue // slot i may hold a slot moved back now
			}
			s.e.setFlag(nsStale, true)
		}
		i = (i + 1) & mask
		k++
	}
	if len(g.slots) > nsMinSlots && 8*g.keys < len(g.slots) {
		g.resize(g.keys)
	}
}

// nsTable is the storage of a namespaced state (see the top of this file).
type nsTable[K comparable, N comparable, X any] struct {
	b          *Backend[K]
	groups     []nsGroup[K, N, X]
	cache      *nsEntries[N, X] // the current key's, valid while cacheEpoch == b.epoch
	cacheEpoch uint64           // 0: no cached entry
	cow        cowPins
	cloneX     func(X) X // deep copy of a value, for copy-on-write
	// before orders namespaces, if the state was told an order
	// (OrderNamespaces): then a key whose first namespace is its greatest
	// (nsFirstMax) does not hold any namespace after it, which saves the
	// scan of its namespaces when a new greatest one comes (the next
	// window of a key, while older ones wait for the watermark).
	before func(a, b N) bool
	// The position of namespace memoNs among the current key's entries
	// (-1: absent) as the last get found it, valid while memoEpoch ==
	// b.epoch; every change of a key's namespaces through this table, and
	// everything that resets the cache, resets it. It saves the scan of the
	// write that follows a read of the same namespace (Value then Update or
	// Clear, Get then Add): for a new window, or the oldest of a key's
	// windows firing, that scan is the longest.
	memoNs    N
	memoPos   int
	memoEpoch uint64 // 0: no memo
}

// greatest reports whether ns is known to be greater than every namespace
// of e (e holds none, or its greatest is first and before it).
func (t *nsTable[K, N, X]) greatest(e *nsEntries[N, X], ns N) bool {
	if !e.has() {
		return true
	}
	return t.before != nil && e.flags&nsFirstMax != 0 && t.before(e.first.ns, ns)
}

// memo returns the remembered position of ns for the current key, if any.
func (t *nsTable[K, N, X]) memo(ns N) (int, bool) {
	if t.memoEpoch == t.b.epoch && t.memoNs == ns {
		return t.memoPos, true
	}
	return 0, false
}

// remember records the position of ns for the current key.
func (t *nsTable[K, N, X]) remember(ns N, pos int) {
	t.memoNs, t.memoPos, t.memoEpoch = ns, pos, t.b.epoch
}

// forget drops the memo and the cached entries.
func (t *nsTable[K, N, X]) forget() {
	t.cache, t.cacheEpoch, t.memoEpoch = nil, 0, 0
}

func newNsTable[K comparable, N comparable, X any](b *Backend[K], cloneX func(X) X) nsTable[K, N, X] {
	return nsTable[K, N, X]{b: b, groups: make([]nsGroup[K, N, X], b.rng.Len()), cloneX: cloneX}
}

// entries returns the current key's entries, nil if it has none.
func (t *nsTable[K, N, X]) entries() *nsEntries[N, X] {
	if t.cacheEpoch == t.b.epoch {
		return t.cache
	}
	i := t.b.slotIndex()
	e := t.groups[i].lookup(t.b.key)
	if e != nil && !(t.cow.on && t.cow.shared(i)) { // no cached pointer into a frozen table (C1)
		t.cache, t.cacheEpoch = e, t.b.epoch
	}
	return e
}

// entriesForWrite returns the current key's entries, creating them if
// needed.
func (t *nsTable[K, N, X]) entriesForWrite() *nsEntries[N, X] {
	if t.cacheEpoch == t.b.epoch {
		return t.cache
	}
	i := t.b.slotIndex()
	if t.cow.on {
		t.unshare(i)
	}
	e := t.groups[i].lookupOrNew(t.b.key)
	t.cache, t.cacheEpoch = e, t.b.epoch
	return e
}

// get returns the current key's slot of ns, or nil.
func (t *nsTable[K, N, X]) get(ns N) *nsSlot[N, X] {
	e := t.entries()
	if e == nil {
		t.remember(ns, -1)
		return nil
	}
	if e.has() && e.first.ns == ns {
		return &e.first // the common case, cheaper than the memo
	}
	p := -1
	if !t.greatest(e, ns) {
		p = e.pos(ns, t.groups[t.b.slot].index(t.b.key, e))
	}
	t.remember(ns, p)
	if p < 0 {
		return nil
	}
	return e.at(p)
}

// posForWrite returns the position of ns among e (the current key's
// entries), using the memo of a preceding get.
func (t *nsTable[K, N, X]) posForWrite(e *nsEntries[N, X], ns N) int {
	if e.has() && e.first.ns == ns {
		return 0
	}
	if p, ok := t.memo(ns); ok {
		return p
	}
	if t.greatest(e, ns) {
		return -1
	}
	return e.pos(ns, t.groups[t.b.slot].index(t.b.key, e))
}

// slot returns the current key's slot of ns, adding it with the zero value
// if absent, and whether it was there.
func (t *nsTable[K, N, X]) slot(ns N) (*nsSlot[N, X], bool) {
	e := t.entriesForWrite()
	if p := t.posForWrite(e, ns); p >= 0 {
		return e.at(p), true
	}
	var zero X
	g := &t.groups[t.b.slot]
	g.n++
	t.remember(ns, 0) // add puts ns first
	return g.addNs(t.b.key, e, ns, zero, t.greatest(e, ns)), false
}

// put stores v under the current key and ns.
func (t *nsTable[K, N, X]) put(ns N, v X) {
	e := t.entriesForWrite()
	if p := t.posForWrite(e, ns); p >= 0 {
		e.at(p).v = v
		return
	}
	g := &t.groups[t.b.slot]
	g.n++
	t.remember(ns, 0) // add puts ns first
	g.addNs(t.b.key, e, ns, v, t.greatest(e, ns))
}

// take removes the current key's namespace ns and returns its value.
func (t *nsTable[K, N, X]) take(ns N) (X, bool) {
	var v X
	if t.cow.on && t.cacheEpoch != t.b.epoch {
		t.unshare(t.b.slotIndex())
	}
	e := t.entries()
	if e == nil {
		return v, false
	}
	pos := t.posForWrite(e, ns)
	if pos < 0 {
		return v, false
	}
	v = e.at(pos).v
	t.groups[t.b.slot].removeNs(t.b.key, e, pos)
	t.memoEpoch = 0 // positions after pos moved
	if t.groups[t.b.slot].removed1() {
		// Defensive: the sweep only marks the current key's entries (they
		// were live a moment ago), but it moves and deletes entries.
		t.forget()
	}
	return v, true
}

func (t *nsTable[K, N, X]) numKeys() int {
	n := 0
	for i := range t.groups {
		n += t.groups[i].n
	}
	return n
}

func (t *nsTable[K, N, X]) group(kg int) *nsGroup[K, N, X] {
	return &t.groups[t.b.checkKeyGroup(kg)]
}

func (t *nsTable[K, N, X]) forEach(kg int, f func(K, N, X)) {
	t.group(kg).each(func(k K, e *nsEntries[N, X], count int) error {
		for p := range count {
			sl := e.at(p)
			f(k, sl.ns, sl.v)
		}
		return nil
	})
}

func (t *nsTable[K, N, X]) clearKeyGroup(kg int) {
	*t.group(kg) = nsGroup[K, N, X]{}
	t.cow.drop(kg - t.b.rng.Start)
	t.forget()
}

// install adds the entries of staged (made by decoding a snapshot) to key
// group kg, adopting them when the key group is empty.
func (t *nsTable[K, N, X]) install(kg int, staged *nsGroup[K, N, X]) {
	if t.cow.on {
		t.unshare(t.b.checkKeyGroup(kg))
	}
	g := t.group(kg)
	switch {
	case staged.n == 0:
	case g.n == 0:
		*g = *staged
	default:
		staged.each(func(k K, e *nsEntries[N, X], count int) error {
			for p := range count {
				sl := e.at(p)
				g.set(k, sl.ns, sl.v)
			}
			return nil
		})
	}
	t.forget() // the current key's entries may have been replaced
}
