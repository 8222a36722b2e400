package actionindex

import (
	"iter"
	"unsafe"
)

// Position orders the runs of one key: by input sequence number, then by
// triggering event, then by the action's place among the event's actions.
// It has agent.Position's fields, so either converts to the other
// (actionindex.Position(p)); agent cannot be imported here, as agent's own
// MemoryStore uses the index.
type Position struct {
	Seq     int64
	EventID int64
	Action  int
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	if p.Seq != q.Seq {
		return p.Seq < q.Seq
	}
	if p.EventID != q.EventID {
		return p.EventID < q.EventID
	}
	return p.Action < q.Action
}

// Run is one live run: its identity within its key, its position and what
// the store keeps of it.
type Run[ID comparable, V any] struct {
	ID  ID
	Pos Position
	V   V
}

// Index is the live runs of a store, by key (the encoded key) and run
// identity. The zero value is not usable: call New.
//
// Each key has a small map of its runs, with their latest position: Get
// hashes the key, then the run's identity in a map of a few entries (a
// key rarely has more than a few live runs). One map from (key, identity)
// over every run was tried and cost more per Get in both stores' replay
// benchmarks (BENCHMARKS.md, "The rebuild before and after"): its probes
// into one large table miss the cache where the small maps' do not.
type Index[ID comparable, V any] struct {
	keys map[string]*keyRuns[ID, V]
	n    int // runs in the index (I4)
}

// entry is what the index keeps of a run besides its identity.
type entry[V any] struct {
	pos Position
	v   V
}

type keyRuns[ID comparable, V any] struct {
	key  string // the index's copy
	runs map[ID]entry[V]
	// latest is the greatest position in runs (I2; runs is never empty).
	latest Position
}

// New returns an empty index.
func New[ID comparable, V any]() *Index[ID, V] {
	return &Index[ID, V]{keys: map[string]*keyRuns[ID, V]{}}
}

// view is key as a string without copying it, for lookups only (the
// index keeps its own copy of a key it stores).
func view(key []byte) string { return unsafe.String(unsafe.SliceData(key), len(key)) }

// recompute sets latest from the runs (after the latest went or moved
// back; runs is not empty).
func (kr *keyRuns[ID, V]) recompute() {
	first := true
	for _, e := range kr.runs {
		if first || kr.latest.Less(e.pos) {
			kr.latest, first = e.pos, false
		}
	}
}

// Get returns what is kept of run id of key, ok false when the run is not
// in the index.
func (x *Index[ID, V]) Get(key []byte, id ID) (v V, ok bool) {
	kr := x.keys[view(key)]
	if kr == nil {
		return v, false
	}
	e, ok := kr.runs[id]
	return e.v, ok
}

// Put records run id of key at pos with v, replacing the run's earlier
// entry, which it returns (I1). The index keeps its own copy of key.
func (x *Index[ID, V]) Put(key []byte, id ID, pos Position, v V) (old Run[ID, V], replaced bool) {
	kr := x.keys[view(key)]
	if kr == nil {
		k := string(key)
		kr = &keyRuns[ID, V]{key: k, runs: make(map[ID]entry[V], 2), latest: pos}
		x.keys[k] = kr
	}
	if e, ok := kr.runs[id]; ok {
		old, replaced = Run[ID, V]{ID: id, Pos: e.pos, V: e.v}, true
	} else {
		x.n++
	}
	kr.runs[id] = entry[V]{pos, v}
	switch {
	case len(kr.runs) == 1 || kr.latest.Less(pos):
		kr.latest = pos
	case replaced && old.Pos == kr.latest && pos != old.Pos:
		kr.recompute() // the latest run moved back
	}
	return old, replaced
}

// Remove removes run id of key and returns it, ok false when it was not
// in the index.
func (x *Index[ID, V]) Remove(key []byte, id ID) (r Run[ID, V], ok bool) {
	kr := x.keys[view(key)]
	if kr == nil {
		return r, false
	}
	e, ok := kr.runs[id]
	if !ok {
		return r, false
	}
	delete(kr.runs, id)
	x.n--
	r = Run[ID, V]{ID: id, Pos: e.pos, V: e.v}
	if len(kr.runs) == 0 {
		delete(x.keys, kr.key)
	} else if e.pos == kr.latest {
		kr.recompute()
	}
	return r, true
}

// Latest returns the greatest position among the runs of key, ok false
// when it has none (I2).
func (x *Index[ID, V]) Latest(key []byte) (pos Position, ok bool) {
	kr := x.keys[string(key)]
	if kr == nil {
		return pos, false
	}
	return kr.latest, true
}

// DiscardFrom removes the runs of key at positions from on (not before
// from), calling removed, if not nil, with each (I3).
func (x *Index[ID, V]) DiscardFrom(key []byte, from Position, removed func(Run[ID, V])) {
	x.removeIf(key, func(p Position) bool { return !p.Less(from) }, removed)
}

// Prune removes the runs of key whose sequence number is at most seq,
// calling removed, if not nil, with each (I3).
func (x *Index[ID, V]) Prune(key []byte, seq int64, removed func(Run[ID, V])) {
	x.removeIf(key, func(p Position) bool { return p.Seq <= seq }, removed)
}

func (x *Index[ID, V]) removeIf(key []byte, drop func(Position) bool, removed func(Run[ID, V])) {
	kr := x.keys[view(key)]
	if kr == nil {
		return
	}
	gone := false
	for id, e := range kr.runs {
		if !drop(e.pos) {
			continue
		}
		delete(kr.runs, id) // deleting the entry being visited is allowed
		x.n--
		gone = true
		if removed != nil {
			removed(Run[ID, V]{ID: id, Pos: e.pos, V: e.v})
		}
	}
	switch {
	case len(kr.runs) == 0:
		delete(x.keys, kr.key)
	case gone:
		kr.recompute()
	}
}

// Len returns the number of runs in the index (I4).
func (x *Index[ID, V]) Len() int { return x.n }

// Keys returns the number of keys with runs (I2).
func (x *Index[ID, V]) Keys() int { return len(x.keys) }

// Clear removes every run.
func (x *Index[ID, V]) Clear() {
	clear(x.keys)
	x.n = 0
}

// All yields every key with each of its runs, in no particular order. The
// index must not change during the iteration.
func (x *Index[ID, V]) All() iter.Seq2[string, Run[ID, V]] {
	return func(yield func(string, Run[ID, V]) bool) {
		for k, kr := range x.keys {
			for id, e := range kr.runs {
				if !yield(k, Run[ID, V]{ID: id, Pos: e.pos, V: e.v}) {
					return
				}
			}
		}
	}
}
