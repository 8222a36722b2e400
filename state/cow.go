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
// references to them. The subtask then goes on processing while the Frozen
// view serializes key group after key group on another goroutine. When the
// subtask is about to write a state in a key group the view has not
// serialized yet, it serializes that key group itself, right then, and the
// view takes those bytes instead of serializing the key group again: the
// work is done once either way, and nothing is copied. Only when the view is
// serializing that very key group at that moment does the subtask copy the
// key group's entries of the state and write to the copy, the view reading
// the original. The copy is one level deep: the key group's map, each value
// (copied by assignment), each list's elements and each inner map of a map
// state are new, but memory a value refers to (a slice or map inside it) is
// shared with the original; a state whose values refer to memory edits it
// in place only while ValueState.SnapshotMayRead reports false (I10 in
// doc.go).
//
// Invariants:
//
//  C1. A map referenced by a Frozen view that has not finished its key
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
//  C4. Each key group of a view is serialized exactly once, by whichever
//      goroutine claims its pin first (an atomic compare-and-swap); the
//      other one waits for it (the view) or copies (the subtask, which
//      never waits).
//  C5. Pins are dropped lazily: a state checks whether any Frozen view is
//      still live (an atomic counter) only on its write paths while it has
//      pins (and value state also on a read, to use its index again, X3),
//      so with no snapshot in progress the cost on the per-record path is
//      one predictable branch.

// pin is the mark one Frozen view puts on one key group.
type pin struct {
	state atomic.Int32  // pinPending, pinView, pinSubtask or pinDone
	done  chan struct{} // closed when the key group is serialized
	// blob and err are the key group's snapshot when the subtask made it
	// (valid once done is closed).
	blob []byte
	err  error
	// serialize writes the key group's snapshot from the view.
	serialize func() ([]byte, error)
}

// The states of a pin.
const (
	pinPending int32 = iota // nobody serialized the key group yet
	pinView                 // the Frozen view is serializing it
	pinSubtask              // the subtask is serializing it
	pinDone                 // serialized (or the view was closed)
)

// finished reports whether the key group no longer needs protection.
func (p *pin) finished() bool { return p.state.Load() == pinDone }

// preempt is called by the subtask before it writes the key group: it
// serializes the key group itself if nobody has (C4), and reports whether
// the view is serializing it right now (the subtask must then copy).
func (p *pin) preempt() (mustCopy bool) {
	if p.state.CompareAndSwap(pinPending, pinSubtask) {
		p.blob, p.err = p.serialize()
		p.state.Store(pinDone)
		close(p.done)
		return false
	}
	return p.state.Load() == pinView
}

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
			c.pins[i] = append(slices.DeleteFunc(c.pins[i], (*pin).finished), p)
			c.on = true
		}
	}
}

// shared reports whether a live Frozen view still reads slot's map.
func (c *cowPins) shared(slot int) bool {
	for _, p := range c.pins[slot] {
		if !p.finished() {
			return true
		}
	}
	return false
}

// take drops the pins of slot before the subtask writes its map: the key
// group is serialized for every view that has not done so (C4), and take
// reports whether the map must be copied first (a view is reading it right
// now). live is the backend's count of live Frozen views: with none, every
// pin of the state is dropped at once.
func (c *cowPins) take(slot int, live *atomic.Int32) bool {
	if c.release(live) {
		return false
	}
	must := false
	for _, p := range c.pins[slot] {
		if p.preempt() {
			must = true
		}
	}
	c.pins[slot] = c.pins[slot][:0]
	return must
}

// release drops every pin of the state when no Frozen view is live, and
// reports whether it did (c.on is then false). A read path that needs the
// pins off (ValueState's index, X3) calls it: a state whose records only
// read and write through cached entries would otherwise keep them until
// its next write path.
func (c *cowPins) release(live *atomic.Int32) bool {
	if live.Load() != 0 {
		return false
	}
	for i := range c.pins {
		c.pins[i] = c.pins[i][:0]
	}
	c.on = false
	return true
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
	closed bool
	view   frozenView
}

// frozenView is what a Frozen view reads: a frozenMem of pinned key groups
// on the memory backend, a Pebble snapshot on Pebble (pebble.go).
type frozenView interface {
	// appendSnapshot is Frozen.AppendSnapshotKeyGroup.
	appendSnapshot(dst []byte, kg int) ([]byte, error)
	// close is Frozen.Close, called once.
	close()
}

// frozenMem is the frozenView of the memory backend: frozen copies of the
// states that read key groups pinned at Freeze.
type frozenMem[K comparable] struct {
	b       *Backend[K]
	tables  map[string]table
	pending map[string]*pendingState
	pins    []*pin
	// perEntry is the size per entry of the last key group serialized, to
	// size the next one (written by both goroutines).
	perEntry atomic.Int64
}

// Freeze returns a view of every state of the backend as it is now, for a
// snapshot taken off the backend's goroutine (an asynchronous checkpoint).
// It copies no entries. Until the view serializes a key group (or is
// closed), the first write of each state to that key group copies the
// state's entries of that key group. Close the view when done with it.
func (b *Backend[K]) Freeze() *Frozen[K] { return b.store.freeze() }

// freezeMem is Freeze on the memory backend.
func (b *Backend[K]) freezeMem() *Frozen[K] {
	f := &frozenMem[K]{b: b, tables: make(map[string]table, len(b.tables)), pins: make([]*pin, b.rng.Len())}
	f.perEntry.Store(int64(b.snapBytesPerEntry))
	for i := range f.pins {
		kg := b.rng.Start + i
		f.pins[i] = &pin{done: make(chan struct{}), serialize: func() ([]byte, error) {
			dst, err := f.appendKeyGroup(nil, kg)
			if len(dst) == 0 {
				dst = nil
			}
			return dst, err
		}}
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
	return &Frozen[K]{view: f}
}

// SnapshotKeyGroup returns the snapshot of key group kg as of Freeze, in the
// format of Backend.SnapshotKeyGroup, and releases the key group: later
// writes to it no longer copy. Call it at most once per key group.
func (f *Frozen[K]) SnapshotKeyGroup(kg int) ([]byte, error) {
	dst, err := f.AppendSnapshotKeyGroup(nil, kg)
	if len(dst) == 0 {
		dst = nil
	}
	return dst, err
}

// AppendSnapshotKeyGroup is SnapshotKeyGroup appending to dst, for callers
// that reuse a buffer; dst grows at most once.
func (f *Frozen[K]) AppendSnapshotKeyGroup(dst []byte, kg int) ([]byte, error) {
	if f.closed {
		panic("state: Frozen.SnapshotKeyGroup after Close")
	}
	return f.view.appendSnapshot(dst, kg)
}

func (f *frozenMem[K]) appendSnapshot(dst []byte, kg int) ([]byte, error) {
	if !f.b.rng.Contains(kg) {
		return appendKeyGroup(dst, kg, f.b.rng, f.tables, f.pending)
	}
	p := f.pins[kg-f.b.rng.Start]
	if p.state.CompareAndSwap(pinPending, pinView) {
		dst, err := f.appendKeyGroup(dst, kg)
		p.state.Store(pinDone)
		close(p.done)
		return dst, err
	}
	// The subtask serialized it (or is doing so) before writing to it.
	<-p.done
	blob, err := p.blob, p.err
	p.blob = nil
	return append(dst, blob...), err
}

// appendKeyGroup serializes key group kg (in range) from the view, sizing
// dst from the previous key groups.
func (f *frozenMem[K]) appendKeyGroup(dst []byte, kg int) ([]byte, error) {
	entries := 0
	for _, t := range f.tables {
		entries += t.numKeysInKeyGroup(kg)
	}
	per := int(f.perEntry.Load())
	if per == 0 {
		per = 16
	}
	if need := 64 + entries*per + entries*per/8; cap(dst)-len(dst) < need {
		dst = append(make([]byte, 0, len(dst)+need), dst...)
	}
	start := len(dst)
	dst, err := appendKeyGroup(dst, kg, f.b.rng, f.tables, f.pending)
	if err == nil && entries > 0 {
		f.perEntry.Store(int64(max(1, (len(dst)-start)/entries)))
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
	f.view.close()
}

func (f *frozenMem[K]) close() {
	for _, p := range f.pins {
		// A pin the subtask holds is finished by the subtask.
		if p.state.CompareAndSwap(pinPending, pinDone) {
			close(p.done)
		}
	}
	f.b.frozenLive.Add(-1)
}

// cloneValues copies a value state's key-group map and its values (by
// assignment: memory a value refers to stays shared); the copies share one
// allocation.
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

// cloneLists copies a list state's key-group map and each list's elements.
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

// cloneMaps copies a map state's key-group map and each inner map.
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

// clone copies a namespaced key group; cloneX copies one value.
func (g *nsGroup[K, N, X]) clone(cloneX func(X) X) nsGroup[K, N, X] {
	out := *g
	if g.slots == nil {
		return out
	}
	out.slots = slices.Clone(g.slots)
	out.ctrl = slices.Clone(g.ctrl)
	for i := range out.slots {
		s := &out.slots[i]
		if !s.used {
			continue
		}
		e := &s.e
		e.first.v = cloneX(e.first.v)
		if e.more != nil {
			e.setMore(make([]nsSlot[N, X], e.moreCap()))
			for j := range int(e.n) {
				sl := e.moreAt(j)
				sl.v = cloneX(sl.v)
			}
		}
	}
	if g.idx != nil {
		out.idx = cloneMaps(g.idx)
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
	fz.vi = vindex[K, V]{} // the view reads groups only (C3)
	fz.cache, fz.cslot, fz.cacheEpoch = nil, nil, 0
	fz.cow = cowPins{}
	return &fz
}

// ownSlot returns the current key's key-group slot, made the state's own
// for a write (C1): every write path of value, list and map state starts
// with it.
func (s *ValueState[K, V]) ownSlot() int {
	i := s.b.slotIndex()
	if s.cow.on {
		s.unshare(i)
	}
	return i
}

// unshare makes slot's map the state's own before a write (C1).
func (s *ValueState[K, V]) unshare(slot int) {
	if s.cow.take(slot, &s.b.frozenLive) {
		s.groups[slot] = cloneValues(s.groups[slot])
		s.indexReset() // X2: it points into the frozen map
		s.cache, s.cslot, s.cacheEpoch = nil, nil, 0
	}
}

func (s *ListState[K, V]) freeze(ps []*pin) table {
	s.cow.pinAll(ps, func(i int) bool { return s.groups[i] != nil })
	fz := *s
	fz.groups = slices.Clone(s.groups)
	fz.cow = cowPins{}
	return &fz
}

func (s *ListState[K, V]) ownSlot() int {
	i := s.b.slotIndex()
	if s.cow.on {
		s.unshare(i)
	}
	return i
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
	fz.forget()
	return &fz
}

func (s *MapState[K, UK, UV]) ownSlot() int {
	i := s.b.slotIndex()
	if s.cow.on {
		s.unshare(i)
	}
	return i
}

func (s *MapState[K, UK, UV]) unshare(slot int) {
	if s.cow.take(slot, &s.b.frozenLive) {
		s.groups[slot] = cloneMaps(s.groups[slot])
		s.forget()
	}
}

// freeze pins t's key groups and returns a copy of t reading the groups of
// now.
func (t *nsTable[K, N, X]) freeze(ps []*pin) nsTable[K, N, X] {
	t.cow.pinAll(ps, func(i int) bool { return t.groups[i].slots != nil })
	fz := *t
	fz.groups = slices.Clone(t.groups)
	fz.cow = cowPins{}
	return fz
}

func (t *nsTable[K, N, X]) unshare(slot int) {
	if t.cow.take(slot, &t.b.frozenLive) {
		t.groups[slot] = t.groups[slot].clone(t.cloneX)
		t.forget()
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
