package state

import (
	"maps"
	"slices"
	"sync/atomic"
)

// Copy-on-write snapshots of the in-memory backend.
//
// Freeze captures the backend as it is, in time proportional to the number
// of states times the number of key groups (no entry is copied): every
// state's per-key-group maps are pinned, and the Frozen view keeps
// references to them. The subtask then goes on processing. The first write
// of a state to a pinned key group that the Frozen view has not serialized
// yet copies that key group's entries of that state (a deep copy: values,
// lists and inner maps included) and writes to the copy; the Frozen view
// keeps reading the original, which nobody writes any more. A key group the
// Frozen view has already serialized (Frozen.SnapshotKeyGroup releases it)
// is written in place, without a copy.
//
// Invariants:
//
//  C1. A map referenced by a Frozen view that has not released its key
//      group is never written: every write path of every state kind calls
//      unshare for the key group first, and the read paths that cache a
//      pointer for later writes (value state, namespaced state) do not
//      cache one into a pinned key group.
//  C2. Freeze bumps the backend's epoch, so no cached pointer taken before
//      Freeze is written through after it.
//  C3. The Frozen view reads only what Freeze captured: the states' group
//      slices (copied), the pending restored entries (copied map of
//      immutable groups), and immutable fields of the backend (range, key
//      codec). It is safe to use from one other goroutine while the
//      backend's goroutine writes.
//  C4. Pins are dropped lazily: a state checks whether any Frozen view is
//      still live (an atomic counter) only on its write paths while it has
//      pins, so with no snapshot in progress the cost on the per-record path
//      is one predictable branch.

// pin is the mark one Frozen view puts on one key group.
type pin struct{ released atomic.Bool }

// cowPins is the copy-on-write bookkeeping of one state: the pins of the
// Frozen views that still reference each key group's map.
type cowPins struct {
	on   bool     // some slot may have pins
	pins [][]*pin // by key-group slot
}

// pinAll pins every slot for which has(slot) is true with ps[slot].
func (c *cowPins) pinAll(ps []*pin, has func(slot int) bool) {
	if c.pins == nil {
		c.pins = make([][]*pin, len(ps))
	}
	for i, p := range ps {
		if has(i) {
			c.pins[i] = append(c.pins[i], p)
			c.on = true
		}
	}
}

// shared reports whether a live Frozen view still reads slot's map.
func (c *cowPins) shared(slot int) bool {
	for _, p := range c.pins[slot] {
		if !p.released.Load() {
			return true
		}
	}
	return false
}

// take drops the pins of slot and reports whether the slot's map must be
// copied before it is written (a live Frozen view still reads it). live is
// the backend's count of live Frozen views: with none, every pin of the
// state is dropped at once.
func (c *cowPins) take(slot int, live *atomic.Int32) bool {
	if live.Load() == 0 {
		for i := range c.pins {
			c.pins[i] = c.pins[i][:0]
		}
		c.on = false
		return false
	}
	must := c.shared(slot)
	c.pins[slot] = c.pins[slot][:0]
	return must
}

// drop forgets the pins of slot (its map was replaced, not written).
func (c *cowPins) drop(slot int) {
	if c.on {
		c.pins[slot] = c.pins[slot][:0]
	}
}

// Frozen is a copy-on-write view of a Backend at the instant of Freeze. Its
// methods may run on another goroutine than the backend's, concurrently
// with the backend's use; a Frozen view itself is for one goroutine.
type Frozen[K comparable] struct {
	b       *Backend[K]
	tables  map[string]table
	pending map[string]*pendingState
	pins    []*pin
	closed  bool
	// psnap is the Pebble backend's view (pebble.go): a Pebble snapshot
	// instead of pins.
	psnap pebbleView
}

// Freeze returns a view of every state of the backend as it is now, for a
// snapshot taken off the backend's goroutine (an asynchronous checkpoint).
// It copies no entries. Until the view serializes a key group (or is
// closed), the first write of each state to that key group copies the
// state's entries of that key group. Close the view when done with it.
func (b *Backend[K]) Freeze() *Frozen[K] {
	if b.pb != nil {
		return b.freezePebble()
	}
	f := &Frozen[K]{b: b, tables: make(map[string]table, len(b.tables)), pins: make([]*pin, b.rng.Len())}
	for i := range f.pins {
		f.pins[i] = new(pin)
	}
	for name, t := range b.tables {
		f.tables[name] = t.freeze(f.pins)
	}
	if len(b.pending) > 0 {
		f.pending = make(map[string]*pendingState, len(b.pending))
		for name, p := range b.pending {
			f.pending[name] = &pendingState{kind: p.kind, groups: maps.Clone(p.groups)}
		}
	}
	b.frozenLive.Add(1)
	b.epoch++ // C2
	return f
}

// SnapshotKeyGroup returns the snapshot of key group kg as of Freeze, in the
// format of Backend.SnapshotKeyGroup, and releases the key group: later
// writes to it no longer copy. Call it at most once per key group.
func (f *Frozen[K]) SnapshotKeyGroup(kg int) ([]byte, error) {
	if f.closed {
		panic("state: Frozen.SnapshotKeyGroup after Close")
	}
	if f.psnap != nil {
		return f.snapshotPebble(kg)
	}
	dst, err := appendKeyGroup(nil, kg, f.b.rng, f.tables, f.pending)
	if f.b.rng.Contains(kg) {
		f.pins[kg-f.b.rng.Start].released.Store(true)
	}
	if len(dst) == 0 {
		dst = nil
	}
	return dst, err
}

// Close releases every key group; the view must not be used after. Closing
// twice is a no-op.
func (f *Frozen[K]) Close() {
	if f.closed {
		return
	}
	f.closed = true
	if f.psnap != nil {
		f.closePebble()
		return
	}
	for _, p := range f.pins {
		p.released.Store(true)
	}
	f.tables, f.pending = nil, nil
	f.b.frozenLive.Add(-1)
}

// cloneValues deep-copies a value state's key-group map; the values share
// one allocation.
func cloneValues[K comparable, V any](m map[K]*V) map[K]*V {
	if m == nil {
		return nil
	}
	out := make(map[K]*V, len(m))
	vals := make([]V, len(m))
	i := 0
	for k, p := range m {
		vals[i] = *p
		out[k] = &vals[i]
		i++
	}
	return out
}

// cloneLists deep-copies a list state's key-group map.
func cloneLists[K comparable, V any](m map[K][]V) map[K][]V {
	if m == nil {
		return nil
	}
	out := make(map[K][]V, len(m))
	for k, vs := range m {
		out[k] = slices.Clone(vs)
	}
	return out
}

// cloneMaps deep-copies a map state's key-group map.
func cloneMaps[K comparable, UK comparable, UV any](m map[K]map[UK]UV) map[K]map[UK]UV {
	if m == nil {
		return nil
	}
	out := make(map[K]map[UK]UV, len(m))
	for k, inner := range m {
		out[k] = maps.Clone(inner)
	}
	return out
}

// clone deep-copies a namespaced key group; cloneX copies one value.
func (g *nsGroup[K, N, X]) clone(cloneX func(X) X) nsGroup[K, N, X] {
	out := *g
	if g.m == nil {
		return out
	}
	out.m = make(map[K]*nsEntries[N, X], len(g.m))
	es := make([]nsEntries[N, X], len(g.m))
	i := 0
	for k, e := range g.m {
		c := &es[i]
		i++
		*c = *e
		c.first.v = cloneX(e.first.v)
		if e.x != nil {
			x := new(nsMore[N, X])
			if len(e.x.more) <= nsInline {
				x.more = append(x.inline[:0], e.x.more...)
			} else {
				x.more = slices.Clone(e.x.more)
			}
			for j := range x.more {
				x.more[j].v = cloneX(x.more[j].v)
			}
			x.idx = maps.Clone(e.x.idx)
			c.x = x
		}
		out.m[k] = c
	}
	return out
}

func identity[X any](x X) X { return x }

// The freeze hooks of the five kinds: a shallow copy of the state whose
// group slice is a copy, so that it keeps reading the maps of Freeze time
// (C3), and pins on the key groups that have entries.

func (s *ValueState[K, V]) freeze(ps []*pin) table {
	s.cow.pinAll(ps, func(i int) bool { return s.groups[i] != nil })
	fz := *s
	fz.groups = slices.Clone(s.groups)
	fz.cow = cowPins{}
	return &fz
}

// unshare makes slot's map the state's own before a write (C1).
func (s *ValueState[K, V]) unshare(slot int) {
	if s.cow.take(slot, &s.b.frozenLive) {
		s.groups[slot] = cloneValues(s.groups[slot])
		s.cache, s.cacheEpoch = nil, 0
	}
}

func (s *ListState[K, V]) freeze(ps []*pin) table {
	s.cow.pinAll(ps, func(i int) bool { return s.groups[i] != nil })
	fz := *s
	fz.groups = slices.Clone(s.groups)
	fz.cow = cowPins{}
	return &fz
}

func (s *ListState[K, V]) unshare(slot int) {
	if s.cow.take(slot, &s.b.frozenLive) {
		s.groups[slot] = cloneLists(s.groups[slot])
	}
}

func (s *MapState[K, UK, UV]) freeze(ps []*pin) table {
	s.cow.pinAll(ps, func(i int) bool { return s.groups[i] != nil })
	fz := *s
	fz.groups = slices.Clone(s.groups)
	fz.cow = cowPins{}
	return &fz
}

func (s *MapState[K, UK, UV]) unshare(slot int) {
	if s.cow.take(slot, &s.b.frozenLive) {
		s.groups[slot] = cloneMaps(s.groups[slot])
	}
}

// freeze pins t's key groups and returns a copy of t reading the groups of
// now.
func (t *nsTable[K, N, X]) freeze(ps []*pin) nsTable[K, N, X] {
	t.cow.pinAll(ps, func(i int) bool { return t.groups[i].m != nil })
	fz := *t
	fz.groups = slices.Clone(t.groups)
	fz.cow = cowPins{}
	return fz
}

func (t *nsTable[K, N, X]) unshare(slot int) {
	if t.cow.take(slot, &t.b.frozenLive) {
		t.groups[slot] = t.groups[slot].clone(t.cloneX)
		t.cache, t.cacheEpoch = nil, 0
	}
}

func (s *NamespacedValueState[K, N, V]) freeze(ps []*pin) table {
	fz := *s
	fz.t = s.t.freeze(ps)
	return &fz
}

func (s *NamespacedListState[K, N, V]) freeze(ps []*pin) table {
	fz := *s
	fz.t = s.t.freeze(ps)
	return &fz
}
