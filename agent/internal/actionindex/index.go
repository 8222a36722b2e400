package actionindex

import "iter"

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
// A key's runs are those of its inputs since its last prune: usually few,
// so they are kept in a slice, searched in order; past smallRuns (a key
// whose inputs run ahead of the checkpoints that prune them, or a
// benchmark's hot key) a map from identity to place in the slice takes
// over, so that Put and Get stay O(1) instead of O(runs of the key).
type Index[ID comparable, V any] struct {
	keys map[string]*keyRuns[ID, V]
	n    int // I4
}

// smallRuns is the most runs a key keeps without a map from identity to
// place.
const smallRuns = 8

type keyRuns[ID comparable, V any] struct {
	runs []Run[ID, V]
	// at maps an identity to its place in runs; nil while len(runs) is
	// at most smallRuns.
	at map[ID]int
	// latest is the greatest position in runs (I2; runs is never empty).
	latest Position
}

// New returns an empty index.
func New[ID comparable, V any]() *Index[ID, V] {
	return &Index[ID, V]{keys: map[string]*keyRuns[ID, V]{}}
}

// find returns the place of id in kr.runs, or -1.
func (kr *keyRuns[ID, V]) find(id ID) int {
	if kr.at != nil {
		if i, ok := kr.at[id]; ok {
			return i
		}
		return -1
	}
	for i := range kr.runs {
		if kr.runs[i].ID == id {
			return i
		}
	}
	return -1
}

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

// reindex rebuilds at after runs changed places (or drops it once the
// runs are few again).
func (kr *keyRuns[ID, V]) reindex() {
	if len(kr.runs) <= smallRuns {
		kr.at = nil
		return
	}
	if kr.at == nil {
		kr.at = make(map[ID]int, len(kr.runs))
	} else {
		clear(kr.at)
	}
	for i, r := range kr.runs {
		kr.at[r.ID] = i
	}
}

// Get returns what is kept of run id of key, ok false when the run is not
// in the index.
func (x *Index[ID, V]) Get(key []byte, id ID) (v V, ok bool) {
	kr := x.keys[string(key)]
	if kr == nil {
		return v, false
	}
	if i := kr.find(id); i >= 0 {
		return kr.runs[i].V, true
	}
	return v, false
}

// Put records run id of key at pos with v, replacing the run's earlier
// entry, which it returns (I1). The index keeps its own copy of key.
func (x *Index[ID, V]) Put(key []byte, id ID, pos Position, v V) (old Run[ID, V], replaced bool) {
	kr := x.keys[string(key)]
	if kr == nil {
		kr = &keyRuns[ID, V]{runs: make([]Run[ID, V], 0, 2), latest: pos}
		x.keys[string(key)] = kr
	}
	if i := kr.find(id); i >= 0 {
		old = kr.runs[i]
		kr.runs[i] = Run[ID, V]{ID: id, Pos: pos, V: v}
		switch {
		case kr.latest.Less(pos):
			kr.latest = pos
		case old.Pos == kr.latest && pos != old.Pos:
			kr.recompute() // the latest run moved back
		}
		return old, true
	}
	kr.runs = append(kr.runs, Run[ID, V]{ID: id, Pos: pos, V: v})
	switch {
	case kr.at != nil:
		kr.at[id] = len(kr.runs) - 1
	case len(kr.runs) > smallRuns:
		kr.reindex()
	}
	if len(kr.runs) == 1 || kr.latest.Less(pos) {
		kr.latest = pos
	}
	x.n++
	return old, false
}

// Remove removes run id of key and returns it, ok false when it was not
// in the index.
func (x *Index[ID, V]) Remove(key []byte, id ID) (r Run[ID, V], ok bool) {
	kr := x.keys[string(key)]
	if kr == nil {
		return r, false
	}
	i := kr.find(id)
	if i < 0 {
		return r, false
	}
	r = kr.runs[i]
	last := len(kr.runs) - 1
	if i != last {
		kr.runs[i] = kr.runs[last]
		if kr.at != nil {
			kr.at[kr.runs[i].ID] = i
		}
	}
	kr.runs[last] = Run[ID, V]{} // let the value go
	kr.runs = kr.runs[:last]
	if kr.at != nil {
		delete(kr.at, id)
	}
	x.n--
	if last == 0 {
		delete(x.keys, string(key))
		return r, true
	}
	if len(kr.runs) <= smallRuns {
		kr.at = nil
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
	kr := x.keys[string(key)]
	if kr == nil {
		return
	}
	kept := kr.runs[:0]
	for _, r := range kr.runs {
		if !drop(r.Pos) {
			kept = append(kept, r)
			continue
		}
		x.n--
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
		delete(x.keys, string(key))
		return
	}
	kr.reindex()
	kr.recompute()
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
			for _, r := range kr.runs {
				if !yield(k, r) {
					return
				}
			}
		}
	}
}
