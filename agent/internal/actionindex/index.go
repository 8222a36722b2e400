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
// One map from (key, identity) to the run's place finds a run with one
// hash (Get is on every replayed input's path); each key's runs sit in a
// slice of their own, with their latest position, for Latest and for the
// prunes and discards, which visit the key's runs anyway. A map per key
// (key, then identity) cost a second lookup and more pointers to chase
// per Get.
type Index[ID comparable, V any] struct {
	runs map[ref[ID]]slot[ID, V]
	keys map[string]*keyRuns[ID, V]
}

// ref names a run in the index.
type ref[ID comparable] struct {
	key string
	id  ID
}

// slot is where a run is: its key's runs, and its place among them.
type slot[ID comparable, V any] struct {
	kr *keyRuns[ID, V]
	i  int
}

type keyRuns[ID comparable, V any] struct {
	key  string // the index's copy
	runs []Run[ID, V]
	// latest is the greatest position in runs (I2; runs is never empty).
	latest Position
}

// New returns an empty index.
func New[ID comparable, V any]() *Index[ID, V] {
	return &Index[ID, V]{runs: map[ref[ID]]slot[ID, V]{}, keys: map[string]*keyRuns[ID, V]{}}
}

// view is key as a string without copying it, for lookups only (the
// index keeps its own copy of a key it stores).
func view(key []byte) string { return unsafe.String(unsafe.SliceData(key), len(key)) }

// recompute sets latest from the runs (after the latest went or moved
// back).
func (kr *keyRuns[ID, V]) recompute() {
	kr.latest = kr.runs[0].Pos
	for _, r := range kr.runs[1:] {
		if kr.latest.Less(r.Pos) {
			kr.latest = r.Pos
		}
	}
}

// Get returns what is kept of run id of key, ok false when the run is not
// in the index.
func (x *Index[ID, V]) Get(key []byte, id ID) (v V, ok bool) {
	sl, ok := x.runs[ref[ID]{view(key), id}]
	if !ok {
		return v, false
	}
	return sl.kr.runs[sl.i].V, true
}

// Put records run id of key at pos with v, replacing the run's earlier
// entry, which it returns (I1). The index keeps its own copy of key.
func (x *Index[ID, V]) Put(key []byte, id ID, pos Position, v V) (old Run[ID, V], replaced bool) {
	if sl, ok := x.runs[ref[ID]{view(key), id}]; ok {
		kr := sl.kr
		old = kr.runs[sl.i]
		kr.runs[sl.i] = Run[ID, V]{ID: id, Pos: pos, V: v}
		switch {
		case kr.latest.Less(pos):
			kr.latest = pos
		case old.Pos == kr.latest && pos != old.Pos:
			kr.recompute() // the latest run moved back
		}
		return old, true
	}
	kr := x.keys[view(key)]
	if kr == nil {
		k := string(key)
		kr = &keyRuns[ID, V]{key: k, runs: make([]Run[ID, V], 0, 2), latest: pos}
		x.keys[k] = kr
	}
	kr.runs = append(kr.runs, Run[ID, V]{ID: id, Pos: pos, V: v})
	x.runs[ref[ID]{kr.key, id}] = slot[ID, V]{kr, len(kr.runs) - 1}
	if len(kr.runs) == 1 || kr.latest.Less(pos) {
		kr.latest = pos
	}
	return old, false
}

// Remove removes run id of key and returns it, ok false when it was not
// in the index.
func (x *Index[ID, V]) Remove(key []byte, id ID) (r Run[ID, V], ok bool) {
	sl, ok := x.runs[ref[ID]{view(key), id}]
	if !ok {
		return r, false
	}
	kr, i := sl.kr, sl.i
	r = kr.runs[i]
	delete(x.runs, ref[ID]{kr.key, id})
	last := len(kr.runs) - 1
	if i != last {
		kr.runs[i] = kr.runs[last]
		x.runs[ref[ID]{kr.key, kr.runs[i].ID}] = slot[ID, V]{kr, i}
	}
	kr.runs[last] = Run[ID, V]{} // let the value go
	kr.runs = kr.runs[:last]
	if last == 0 {
		delete(x.keys, kr.key)
		return r, true
	}
	if r.Pos == kr.latest {
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
	kept := kr.runs[:0]
	for _, r := range kr.runs {
		if !drop(r.Pos) {
			kept = append(kept, r)
			continue
		}
		delete(x.runs, ref[ID]{kr.key, r.ID})
		if removed != nil {
			removed(r)
		}
	}
	if len(kept) == len(kr.runs) {
		return
	}
	clear(kr.runs[len(kept):]) // let the values go
	kr.runs = kept
	if len(kept) == 0 {
		delete(x.keys, kr.key)
		return
	}
	for i, r := range kept { // places changed
		x.runs[ref[ID]{kr.key, r.ID}] = slot[ID, V]{kr, i}
	}
	kr.recompute()
}

// Len returns the number of runs in the index (I4).
func (x *Index[ID, V]) Len() int { return len(x.runs) }

// Keys returns the number of keys with runs (I2).
func (x *Index[ID, V]) Keys() int { return len(x.keys) }

// Clear removes every run.
func (x *Index[ID, V]) Clear() {
	clear(x.keys)
	clear(x.runs)
}

// All yields every key with each of its runs, in no particular order. The
// index must not change during the iteration.
func (x *Index[ID, V]) All() iter.Seq2[string, Run[ID, V]] {
	return func(yield func(string, Run[ID, V]) bool) {
		for k, kr := range x.keys {
			for _, r := range kr.runs {
				if !yield(k, r) {
					return
				}
			}
		}
	}
}
