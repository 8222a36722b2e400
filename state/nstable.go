package state

// The storage of namespaced state, shared by NamespacedValueState (X = V)
// and NamespacedListState (X = []V).
//
// Each key group holds a map from key to the key's namespaces (nsEntries):
// one inline slot for the newest namespace (most keys have one window at a
// time) and, behind a pointer, a slice for the others (sliding windows,
// sessions, and tumbling windows waiting for the watermark to fire them).
// Reading (key, ns) is one map access with the key alone, which for int64
// and string keys takes the runtime's fast paths, plus a scan of the key's
// few slots, newest first; keys with many namespaces (an ordering buffer
// keyed by timestamp, long sliding windows) get an index map on top.
//
// The state remembers the entries of the current key found by the last
// access (valid while the backend's epoch is unchanged), so the usual
// read-modify-write of a record (Value then Update, Get then Add) costs one
// map access.
//
// When the last namespace of a key is removed its entries stay in the map,
// empty, for the key's next namespace (the next window of the key), so a key
// that opens and closes windows all the time does not allocate or churn the
// map. Empty entries are invisible: counts, iteration and snapshots see
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
// caches: what a key with one namespace does not use is behind x.
//
// Positions: 0 is first, i > 0 is x.more[i-1]; positions 0..count()-1 are
// in use. Without an index the slots are in the order the namespaces were
// added, newest first: first, then more from its end to its start. Lookups
// scan in that order, because the newest namespaces are the busy ones (the
// current window of a key takes its records while older ones wait for the
// watermark to fire them). With an index the order is arbitrary.
type nsEntries[N comparable, X any] struct {
	first nsSlot[N, X]
	has   bool // first is in use (when false, the key has no namespace)
	stale bool // empty at the last sweep of its key group
	x     *nsMore[N, X]
}

// nsInline is the number of namespaces after the first that nsMore holds
// without another allocation.
const nsInline = 3

// nsMore is the namespaces of a key after its first. Once a key has had two
// namespaces it keeps its nsMore, so that a key whose windows overlap now
// and then (tumbling windows until the watermark fires them, sliding
// windows, sessions) does not allocate in steady state.
type nsMore[N comparable, X any] struct {
	more   []nsSlot[N, X] // inline[:0] until it outgrows it
	idx    map[N]int32    // position by namespace, when the key has many
	inline [nsInline]nsSlot[N, X]
}

func (e *nsEntries[N, X]) count() int {
	if !e.has {
		return 0
	}
	if e.x == nil {
		return 1
	}
	return 1 + len(e.x.more)
}

func (e *nsEntries[N, X]) at(pos int) *nsSlot[N, X] {
	if pos == 0 {
		return &e.first
	}
	return &e.x.more[pos-1]
}

// find returns the slot of ns, or nil. The pointer is valid until the next
// change of e's namespaces.
func (e *nsEntries[N, X]) find(ns N) *nsSlot[N, X] {
	if e.has && e.first.ns == ns {
		return &e.first
	}
	if e.x == nil {
		return nil
	}
	if p := e.x.pos(ns); p > 0 {
		return &e.x.more[p-1]
	}
	return nil
}

// pos returns the position of ns, or -1.
func (e *nsEntries[N, X]) pos(ns N) int {
	if !e.has {
		return -1
	}
	if e.first.ns == ns {
		return 0
	}
	if e.x == nil {
		return -1
	}
	return e.x.pos(ns)
}

// pos returns the position of ns (> 0) if it is in more, else -1.
func (x *nsMore[N, X]) pos(ns N) int {
	if x.idx != nil {
		if p, ok := x.idx[ns]; ok && p > 0 {
			return int(p)
		}
		return -1
	}
	for i := len(x.more) - 1; i >= 0; i-- {
		if x.more[i].ns == ns {
			return i + 1
		}
	}
	return -1
}

// add adds namespace ns, which e does not hold, in front, and returns its
// slot.
func (e *nsEntries[N, X]) add(ns N, v X) *nsSlot[N, X] {
	if !e.has {
		e.first = nsSlot[N, X]{ns, v}
		e.has, e.stale = true, false
		return &e.first
	}
	if e.x == nil {
		e.x = new(nsMore[N, X])
		e.x.more = e.x.inline[:0]
	}
	x := e.x
	x.more = append(x.more, e.first)
	e.first = nsSlot[N, X]{ns, v}
	n := len(x.more) // position of the old first
	if x.idx != nil {
		x.idx[x.more[n-1].ns] = int32(n)
		x.idx[ns] = 0
	} else if n+1 > nsIndexAbove {
		x.idx = make(map[N]int32, 2*(n+1))
		for p := range n + 1 {
			x.idx[e.at(p).ns] = int32(p)
		}
	}
	return &e.first
}

// remove removes the namespace at position pos.
func (e *nsEntries[N, X]) remove(pos int) {
	if e.x == nil || len(e.x.more) == 0 {
		e.first = nsSlot[N, X]{}
		e.has = false
		return
	}
	x := e.x
	last := len(x.more) // position of the last slot
	switch {
	case x.idx != nil:
		// Any order: the last slot takes pos.
		delete(x.idx, e.at(pos).ns)
		if pos != last {
			*e.at(pos) = x.more[last-1]
			x.idx[e.at(pos).ns] = int32(pos)
		}
	case pos == 0:
		// The next newest becomes first.
		e.first = x.more[last-1]
	default:
		// Keep the order.
		copy(x.more[pos-1:], x.more[pos:])
	}
	x.more[last-1] = nsSlot[N, X]{} // release what it referenced
	x.more = x.more[:last-1]
	if x.idx != nil && last <= nsIndexBelow {
		// Back to scanning: the order does not matter for correctness.
		x.idx = nil
	}
	// Keep the storage for the key's next namespaces, unless the key had
	// many once and has few now.
	if c := cap(x.more); c > 2*nsIndexAbove && len(x.more) < c/4 {
		if len(x.more) <= nsInline {
			x.more = append(x.inline[:0], x.more...)
		} else {
			x.more = append([]nsSlot[N, X](nil), x.more...)
		}
	}
}

// nsGroup is the namespaced state of one key group: the entries of its keys
// by key.
type nsGroup[K comparable, N comparable, X any] struct {
	m       map[K]*nsEntries[N, X]
	n       int // (key, namespace) pairs
	removed int // namespaces removed since the last sweep
	every   int // removals between sweeps: the live pairs at the last sweep
}

// lookupOrNew returns the entries of key k, creating them if needed.
//
// Entries are allocated one by one, so in the order keys arrive, not in
// chunks per key group: keys that arrive one after the other (from all key
// groups) then have their entries next to each other, which pays when they
// come back in that order. (Chunks per key group made snapshots faster but
// the window benchmarks slower; with keys in random order they were even.)
func (g *nsGroup[K, N, X]) lookupOrNew(k K) *nsEntries[N, X] {
	if e := g.m[k]; e != nil {
		return e
	}
	if g.m == nil {
		g.m = make(map[K]*nsEntries[N, X])
	}
	e := new(nsEntries[N, X])
	g.m[k] = e
	return e
}

// nsBatch is the number of entries eachBatched loads before using them.
const nsBatch = 32

// eachBatched calls f for every key of g with namespaces, its entries and
// their count, like ranging over g.m (the order is unspecified), until f
// returns an error. It is for walking a whole key group (snapshots): it
// loads the entries of a batch of keys first, so that their cache misses
// overlap instead of adding up, and only then calls f for them.
func (g *nsGroup[K, N, X]) eachBatched(f func(K, *nsEntries[N, X], int) error) error {
	var ks [nsBatch]K
	var es [nsBatch]*nsEntries[N, X]
	var cs [nsBatch]int
	n := 0
	flush := func() error {
		for i, e := range es[:n] {
			cs[i] = e.count() // independent loads
		}
		for i, e := range es[:n] {
			if cs[i] == 0 {
				continue
			}
			if err := f(ks[i], e, cs[i]); err != nil {
				return err
			}
		}
		n = 0
		return nil
	}
	for k, e := range g.m {
		ks[n], es[n] = k, e
		if n++; n == nsBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// set stores v under (k, ns), replacing any value there.
func (g *nsGroup[K, N, X]) set(k K, ns N, v X) {
	e := g.lookupOrNew(k)
	if sl := e.find(ns); sl != nil {
		sl.v = v
		return
	}
	e.add(ns, v)
	g.n++
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
// are, and marks the empty ones.
func (g *nsGroup[K, N, X]) sweep() {
	g.removed, g.every = 0, g.n
	for k, e := range g.m {
		if e.has {
			continue
		}
		if e.stale {
			delete(g.m, k)
		} else {
			e.stale = true
		}
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
	e := t.groups[i].m[t.b.key]
	if e != nil && !(t.cow.on && t.cow.shared(i)) { // no cached pointer into a frozen map (C1)
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
		return nil
	}
	return e.find(ns)
}

// slot returns the current key's slot of ns, adding it with the zero value
// if absent.
func (t *nsTable[K, N, X]) slot(ns N) *nsSlot[N, X] {
	e := t.entriesForWrite()
	if sl := e.find(ns); sl != nil {
		return sl
	}
	var zero X
	t.groups[t.b.slot].n++
	return e.add(ns, zero)
}

// put stores v under the current key and ns.
func (t *nsTable[K, N, X]) put(ns N, v X) {
	e := t.entriesForWrite()
	if sl := e.find(ns); sl != nil {
		sl.v = v
		return
	}
	t.groups[t.b.slot].n++
	e.add(ns, v)
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
	pos := e.pos(ns)
	if pos < 0 {
		return v, false
	}
	v = e.at(pos).v
	e.remove(pos)
	if t.groups[t.b.slot].removed1() {
		// Defensive: the sweep only marks the current key's entries (they
		// were live a moment ago), but it deletes entries.
		t.cache, t.cacheEpoch = nil, 0
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
	t.group(kg).eachBatched(func(k K, e *nsEntries[N, X], count int) error {
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
	t.cache, t.cacheEpoch = nil, 0
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
		for k, e := range staged.m {
			for p := range e.count() {
				sl := e.at(p)
				g.set(k, sl.ns, sl.v)
			}
		}
	}
	t.cache, t.cacheEpoch = nil, 0 // the current key's entries may have been replaced
}
