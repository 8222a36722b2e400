package state

// Control bytes: the two open-addressing tables of the memory backend (the
// value index, vindex.go, and the namespaced tables, nstable.go) keep one
// byte a slot apart from their slots, which a lookup reads before any slot:
// ctrlEmpty for a free slot, ctrlUsed with 7 bits of the key's hash for a
// used one (and, in the value index, ctrlDeleted for a tombstone). Eight
// consecutive bytes are matched at once (matchTag, matchFree), so that a
// lookup reads only the slots whose byte matches and its branches do not
// depend on how far a key sits from its home slot (a branch per probed slot
// is mispredicted about as often as keys are displaced by collisions). A
// table's control bytes are followed by ctrlPad copies of its first ones,
// so that eight bytes can be read from any slot.

const (
	ctrlEmpty   = 0
	ctrlDeleted = 1
	ctrlUsed    = 0x80 // | the hash's top 7 bits
	ctrlPad     = 7
)

// tagOf is the used byte of a key whose 64-bit hash is h (the value
// index), nsTag of one whose 32-bit hash is h (the namespaced tables):
// ctrlUsed with the hash's top 7 bits, which the tables' home slots (the
// low bits) do not use.
func tagOf(h uint64) uint8 { return ctrlUsed | uint8(h>>57) }
func nsTag(h uint32) uint8 { return ctrlUsed | uint8(h>>25) }

// Byte-parallel matching of eight control bytes (w, one per byte, the
// first slot in the low byte): a word with bit 7 set in each byte equal to
// the tag, or to ctrlEmpty. A byte can be reported beside a matching byte
// below it where it is not one (the borrow of the subtraction): every
// match is checked against its slot, and whether a free byte is among the
// eight is exact (a report needs a true match below it).
const (
	bytesLow  = 0x0101010101010101
	bytesHigh = 0x8080808080808080
)

func matchTag(w uint64, tag uint8) uint64 {
	x := w ^ (bytesLow * uint64(tag))
	return (x - bytesLow) &^ x & bytesHigh
}

func matchFree(w uint64) uint64 { return (w - bytesLow) &^ w & bytesHigh }
