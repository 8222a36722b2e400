package state

// ValueState is a single value per key.
//
// Values are held behind pointers so that the usual read-modify-write of
// one key (Value, then Update) costs one map lookup: Value remembers the
// entry it found, and Update writes through it while the backend's current
// key is unchanged (the backend's epoch tells).
//
// In memory the entries are in per-key-group maps (groups, I2), and vi is
// an index of the same entries over all key groups, keyed by the key alone
// (vindex, vindex.go): a read finds the current key's entry there without
// its key group, so a record made current with SetCurrentKeyLazy whose key
// has an entry never has its key group computed, and the one lookup is in
// one table rather than in one of many (fewer cache misses). A slot of vi
// holds a copy of the entry's value beside the pointer, so a read of a
// present key is one probe and no load through the pointer. The index is a
// cache of groups:
//
//	X1. Every pointer in vi is the pointer groups holds for that key
//	    (vi[k].p == groups[slot(k)][k]); a key of groups may be missing
//	    from vi (a read then looks in groups and adds it).
//	X2. Whatever replaces or drops entries of groups other than through
//	    update and Clear (ClearKeyGroup, a restore's install, the
//	    copy-on-write clone of unshare) empties vi.
//	X3. While copy-on-write pins are on (cow.on), vi is neither read nor
//	    added to: a pointer into a pinned key group must not be cached for
//	    a write (C1), and telling whether a key group is pinned needs the
//	    key group.
//	X4. A slot's copy of the value equals its entry (vi[k].val == *vi[k].p):
//	    every write of an entry that vi holds writes the slot's copy too
//	    (Update through cache and cslot, update through put). While cow.on
//	    nothing is added to vi (X3), but a key group written in place (its
//	    pins preempted, not cloned: cow.take) keeps its entries in vi, so a
//	    write then finds the key's slot in vi (viSlot) and writes its copy
//	    too.
//
// Every comparable key type is indexed so; vindex hashes it with
// internal/keyhash (integers and strings by a seeded mixer, other keys as
// maphash.Comparable), without an allocation.
type ValueState[K comparable, V any] struct {
	desc[K]
	groups     groups[map[K]*V, K, *V]
	vi         vindex[K, V] // the entries of groups by key, values inline (X1-X4)
	cache      *V           // entry of the current key, valid while cacheEpoch == b.epoch
	cslot      *vslot[K, V] // the entry's slot in vi when cache came from vi or went to it; else nil
	cacheEpoch uint64       // backend epoch when cache was set; 0: none
	vc         Codec[V]
	cow        cowPins

	// missEpoch is the backend epoch in which Value found the current key
	// absent (0: none), so that the Update inserting it does not look it
	// up again. Every write of the key's entry resets it.
	missEpoch uint64

	// ext is nil on the memory backend, whose entries are in groups. On a
	// backend that keeps the entries elsewhere (Pebble, pebble_states.go)
	// it is set at registration and holds them all.
	ext valueExt[K, V]
}

// valueExt is a ValueState's storage on a backend that is not the memory
// backend: the per-record operations and the typed iteration of a key group.
// The backend's table of the state (Backend.Table) is set with it.
type valueExt[K comparable, V any] interface {
	value() (V, bool)
	update(v V)
	clear()
	forEach(kg int, f func(K, V))
}

// Value registers (or looks up) the value state called name. Registering the
// same name with the same kind and types returns the same state; with another
// kind or type it returns an error. Values are snapshotted with
// DefaultCodec[V]().
func Value[K comparable, V any](b *Backend[K], name string) (*ValueState[K, V], error) {
	return ValueWithCodec[K, V](b, name, nil)
}

// ValueWithCodec is Value with the codec of the values for snapshots (nil
// means DefaultCodec[V]()). The codec is fixed by the first registration of
// name; registering it again returns that state and ignores vc.
func ValueWithCodec[K comparable, V any](b *Backend[K], name string, vc Codec[V]) (*ValueState[K, V], error) {
	return register(b, name, KindValue, typeName[V](), func(d desc[K]) *ValueState[K, V] {
		return &ValueState[K, V]{desc: d, groups: make(groups[map[K]*V, K, *V], b.rng.Len()), vc: codecOr(vc)}
	})
}

// MustValue is Value that panics on error.
func MustValue[K comparable, V any](b *Backend[K], name string) *ValueState[K, V] {
	return must(Value[K, V](b, name))
}

// MustValueWithCodec is ValueWithCodec that panics on error.
func MustValueWithCodec[K comparable, V any](b *Backend[K], name string, vc Codec[V]) *ValueState[K, V] {
	return must(ValueWithCodec(b, name, vc))
}

// Value returns the current key's value and whether it is set.
func (s *ValueState[K, V]) Value() (V, bool) {
	if s.cacheEpoch == s.b.epoch {
		if s.cslot != nil {
			return s.cslot.val, true
		}
		return *s.cache, true
	}
	if s.ext != nil {
		return s.ext.value()
	}
	if !s.b.hasKey {
		panicNoKey()
	}
	if !s.cow.on || s.cow.release(&s.b.frozenLive) { // X3
		if sl := s.vi.find(s.b.key); sl != nil {
			s.cache, s.cslot, s.cacheEpoch = sl.p, sl, s.b.epoch
			return sl.val, true
		}
	}
	return s.valueInGroup()
}

// valueInGroup is Value for a key not found in the index: it looks in the
// key's key group and adds what it finds to the index (X1).
func (s *ValueState[K, V]) valueInGroup() (V, bool) {
	i := s.b.slotIndex()
	p := s.groups[i][s.b.key]
	if p == nil {
		s.missEpoch = s.b.epoch
		var zero V
		return zero, false
	}
	var sl *vslot[K, V]
	if s.cow.on {
		if s.cow.shared(i) {
			return *p, true // no cached pointer into a frozen map (C1)
		}
		sl = s.viSlot() // X4
	} else {
		sl = s.vi.put(s.b.key, p) // X1
	}
	s.cache, s.cslot, s.cacheEpoch = p, sl, s.b.epoch
	return *p, true
}

// viSlot returns the current key's slot in vi, or nil: the slot a write
// while cow.on must keep equal to the entry (X4).
func (s *ValueState[K, V]) viSlot() *vslot[K, V] {
	if s.vi.n == 0 {
		return nil
	}
	return s.vi.find(s.b.key)
}

// indexReset empties the index (X2).
func (s *ValueState[K, V]) indexReset() { s.vi.reset() }

// Update sets the current key's value.
func (s *ValueState[K, V]) Update(v V) {
	if s.cacheEpoch == s.b.epoch {
		*s.cache = v
		if s.cslot != nil {
			s.cslot.val = v // X4
		}
		return
	}
	s.update(v)
}

// update is Update without the cached entry, kept apart so that Update
// inlines.
func (s *ValueState[K, V]) update(v V) {
	if s.ext != nil {
		s.ext.update(v)
		return
	}
	i := s.ownSlot()
	m := s.groups[i]
	if m == nil {
		m = make(map[K]*V)
		s.groups[i] = m
	}
	var p *V
	if s.missEpoch != s.b.epoch { // else Value just found the key absent
		p = m[s.b.key]
	}
	if p == nil {
		p = new(V)
		m[s.b.key] = p
	}
	*p = v
	var sl *vslot[K, V]
	if !s.cow.on { // X3
		sl = s.vi.put(s.b.key, p) // X1, X4: the slot's copy is v
	} else if sl = s.viSlot(); sl != nil {
		sl.val = v // X4
	}
	s.cache, s.cslot, s.cacheEpoch, s.missEpoch = p, sl, s.b.epoch, 0
}

// SnapshotMayRead reports whether a snapshot in progress may still read
// the values of this state: a copy-on-write Frozen view (I10) that is not
// closed yet, on a state that had entries when it was frozen. While it
// may, a value that refers to memory (a slice, a map, a pointer) and was
// read with Value must not be edited in place, not even just before the
// Update that stores it: the view can hold the same memory (the key group
// is serialized at that Update, after the edit, or read from a copy that
// shares the value's memory, C1). When it reports false, no view reads
// this state, and editing what Value returned before storing it with
// Update is safe until the next Freeze. On a backend other than memory it
// always reports true (values there may be held by a write-back cache).
//
// It costs one predictable branch without a snapshot in progress (C5).
func (s *ValueState[K, V]) SnapshotMayRead() bool {
	if s.ext != nil {
		return true
	}
	return s.cow.on && !s.cow.release(&s.b.frozenLive)
}

// Clear removes the current key's value.
func (s *ValueState[K, V]) Clear() {
	if s.ext != nil {
		s.ext.clear()
		return
	}
	i := s.ownSlot()
	delete(s.groups[i], s.b.key)
	s.vi.del(s.b.key) // X1
	s.cache, s.cslot, s.cacheEpoch, s.missEpoch = nil, nil, 0, 0
}

// numKeys reports the number of keys with a value, over all key groups.
func (s *ValueState[K, V]) numKeys() int { return s.groups.numKeys() }

// numKeysInKeyGroup reports the number of keys with a value in key group kg.
func (s *ValueState[K, V]) numKeysInKeyGroup(kg int) int {
	return numKeysInGroup(&s.desc, s.groups, kg)
}

// forEach calls f for every (key, value) of key group kg, in unspecified
// order. f must not modify this state.
func (s *ValueState[K, V]) forEach(kg int, f func(K, V)) {
	if s.ext != nil {
		s.ext.forEach(kg, f)
		return
	}
	for k, v := range s.groups[s.b.checkKeyGroup(kg)] {
		f(k, *v)
	}
}

// clearKeyGroup drops every value of key group kg.
func (s *ValueState[K, V]) clearKeyGroup(kg int) {
	clearGroup(&s.desc, s.groups, &s.cow, kg)
	s.indexReset() // X2
	s.cache, s.cslot, s.cacheEpoch, s.missEpoch = nil, nil, 0, 0
}

// forEachAny implements table.
func (s *ValueState[K, V]) forEachAny(kg int, f func(key, namespace, value any)) {
	s.forEach(kg, func(k K, v V) { f(k, nil, v) })
}
