package state

import (
	"encoding/binary"
	"math/bits"

	"github.com/weirproject/weir/internal/keyhash"
)

// vindex is a value state's index on the memory backend (ValueState, X1-X4):
// an open-addressing hash table, linear probing, from a key to its entry in
// the key group's map (p) together with a copy of the entry's value (val),
// so that a read of a present key touches one slot and not the entry
// behind p. The table's control bytes are apart from the slots: one byte a
// slot (ctrlEmpty, ctrlDeleted, or ctrlUsed with 7 bits of the key's hash),
// 1/32 of the slots' memory, so that the probe's first loads stay in cache
// and a slot is read only when its tag matches.
//
//	V1. A key has at most one used slot; a lookup of key k scans from
//	    hash(k)&mask to the first empty control byte, so deleted slots
//	    (tombstones) do not end a scan and an empty one does.
//	V2. Used plus deleted slots stay at or below 3/4 of the table, so
//	    every scan ends.
//	V3. A slot pointer returned by find or put is valid until the next
//	    put, del or reset of the table (put may grow it).
type vindex[K comparable, V any] struct {
	ctrl  []uint8 // one byte a slot: wide[:len(slots)]
	wide  []uint8 // ctrl and ctrlPad copies of its first bytes, so that find reads eight bytes from any slot
	slots []vslot[K, V]
	mask  uint64
	n     int // used slots
	dead  int // deleted slots
	seed  keyhash.Seed
	hf    keyhash.Hasher[K] // set with seed, before the first key
}

type vslot[K comparable, V any] struct {
	key K
	val V  // == *p (X4)
	p   *V // the key's entry in its key group's map
}

// vindexMinSlots is the smallest table made.
const vindexMinSlots = 16

// hash is the key's hash under the table's seed (keyhash.Hasher.Sum64):
// keys equal under == hash alike, for any comparable key (strings and
// integers by their value, floats so that +0 and -0 agree, interfaces by
// their dynamic value, pointers by their address). It does not allocate. A
// key that is a NaN never equals itself, so each put of one adds a slot, as
// each insert of one adds an entry to the key group's map; an interface
// holding an unhashable value panics here as it does in that map.
func (x *vindex[K, V]) hash(k K) uint64 { return x.hf.Sum64(x.seed, k) }

// find returns k's slot, or nil. It matches eight control bytes at a
// time (matchTag, matchFree: a deleted slot's byte, 1, is neither a tag nor
// free), so that its branches do not depend on how far k was displaced
// from its home slot.
func (x *vindex[K, V]) find(k K) *vslot[K, V] {
	if x.n == 0 {
		return nil
	}
	h := x.hash(k)
	tag := tagOf(h)
	for i := h & x.mask; ; i = (i + 8) & x.mask {
		w := binary.LittleEndian.Uint64(x.wide[i:])
		for m := matchTag(w, tag); m != 0; m &= m - 1 {
			j := (i + uint64(bits.TrailingZeros64(m)>>3)) & x.mask
			if s := &x.slots[j]; s.key == k {
				return s
			}
		}
		if matchFree(w) != 0 {
			return nil // k would be before the first free slot
		}
	}
}

// setCtrl sets slot i's control byte (and its copy past the end).
func (x *vindex[K, V]) setCtrl(i uint64, c uint8) {
	x.ctrl[i] = c
	if i < ctrlPad {
		x.wide[i+uint64(len(x.ctrl))] = c
	}
}

// put sets k's entry to p and its value copy to *p, adding k if absent,
// and returns its slot.
func (x *vindex[K, V]) put(k K, p *V) *vslot[K, V] {
	if 4*(x.n+x.dead+1) > 3*len(x.ctrl) {
		x.grow()
	}
	h := x.hash(k)
	tag := tagOf(h)
	free := -1
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch c := x.ctrl[i]; {
		case c == tag && x.slots[i].key == k:
			s := &x.slots[i]
			s.p, s.val = p, *p
			return s
		case c == ctrlDeleted:
			if free < 0 {
				free = int(i)
			}
		case c == ctrlEmpty:
			if free >= 0 {
				i = uint64(free)
				x.dead--
			}
			x.setCtrl(i, tag)
			x.n++
			s := &x.slots[i]
			s.key, s.p, s.val = k, p, *p
			return s
		}
	}
}

// del removes k if present.
func (x *vindex[K, V]) del(k K) {
	if x.n == 0 {
		return
	}
	h := x.hash(k)
	tag := tagOf(h)
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		c := x.ctrl[i]
		if c == tag && x.slots[i].key == k {
			x.slots[i] = vslot[K, V]{}
			x.n--
			if x.ctrl[(i+1)&x.mask] == ctrlEmpty {
				// No scan passes this slot on to a later one (V1).
				x.setCtrl(i, ctrlEmpty)
			} else {
				x.setCtrl(i, ctrlDeleted)
				x.dead++
			}
			return
		}
		if c == ctrlEmpty {
			return
		}
	}
}

// grow rehashes into a table twice the size, or the same size when the
// used slots fill at most 3/8 of it (dropping the tombstones is enough).
func (x *vindex[K, V]) grow() {
	size := len(x.ctrl)
	switch {
	case size == 0:
		size = vindexMinSlots
		x.seed, x.hf = keyhash.NewSeed(), keyhash.For[K]()
	case 8*(x.n+1) > 3*size:
		size *= 2
	}
	oldCtrl, oldSlots := x.ctrl, x.slots
	x.wide, x.slots = make([]uint8, size+ctrlPad), make([]vslot[K, V], size)
	x.ctrl = x.wide[:size]
	x.mask = uint64(size - 1)
	x.n, x.dead = 0, 0
	for i, c := range oldCtrl {
		if c < ctrlUsed {
			continue
		}
		s := &oldSlots[i]
		h := x.hash(s.key)
		j := h & x.mask
		for x.ctrl[j] != ctrlEmpty {
			j = (j + 1) & x.mask
		}
		x.setCtrl(j, tagOf(h))
		x.slots[j] = *s
		x.n++
	}
}

// reset empties the table, keeping its memory (X2).
func (x *vindex[K, V]) reset() {
	if x.n == 0 && x.dead == 0 {
		return
	}
	clear(x.wide)
	clear(x.slots)
	x.n, x.dead = 0, 0
}

// len reports the number of keys in the table.
func (x *vindex[K, V]) len() int { return x.n }
