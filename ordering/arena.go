package ordering

import (
	"fmt"

	"github.com/weirproject/weir/state"
)

// encodedQueue holds the sort's records encoded (SortOptions.HeldCodec): a
// heldQueue of spans, each naming its record's bytes in an arena of byte
// slabs. Nothing it keeps per held record contains a pointer (heldRec[span]
// is a few integers, the slabs are []byte), so the garbage collector never
// scans the held records: with a catch-up's hundreds of thousands of
// records held, scanning them was a large part of each GC cycle when they
// were held as values of a T with strings in it.
//
// Invariants (beside H1-H3 of the span queue):
//
//	A1. A span's bytes are those HeldCodec.Append gave for its record;
//	    they are not written again until the record is released.
//	A2. live[s] is the number of held records whose bytes are in slab s;
//	    a slab is recycled only when live[s] is 0 and it is not the slab
//	    being appended to, so no span ever names a recycled slab.
//
// Cost: an Append per record pushed and a Decode per record released (the
// decoded value is new memory, short-lived, which the GC does not scan
// while it is held). A slab stays in memory until its last record is
// released: records of a catch-up are released in about the order they
// arrived, so slabs empty in about that order too.
type encodedQueue[T any] struct {
	q     heldQueue[span]
	codec state.Codec[T]
	slabs [][]byte   // slab id -> bytes; nil once recycled
	live  []int32    // slab id -> records held in it
	ids   []uint32   // recycled slab ids, for reuse
	spare [][]byte   // recycled slab memory, at most maxSpareSlabs
	cur   uint32     // the slab appended to (valid when len(slabs) > 0)
	err   error      // first Decode error of a release
	out   heldRec[T] // the record being emitted (a field: no allocation per record)
	// slab is the slab size (0: slabSize; tests use small ones).
	slab int
}

// span is where a held record's encoding is: slab, offset, length.
type span struct{ slab, off, n uint32 }

// slabSize is the size of an arena slab; a record whose encoding is larger
// gets a slab of its own. maxSpareSlabs bounds the emptied slabs kept for
// reuse.
const (
	slabSize      = 256 << 10
	maxSpareSlabs = 8
)

func newEncodedQueue[T any](codec state.Codec[T]) *encodedQueue[T] {
	return &encodedQueue[T]{codec: codec}
}

func (e *encodedQueue[T]) len() int { return e.q.len() }

// push encodes h's value into the arena and holds its span.
func (e *encodedQueue[T]) push(h heldRec[T]) error {
	if len(e.slabs) == 0 {
		e.cur = e.newSlab(e.slabLen())
	}
	s := e.slabs[e.cur]
	out, err := e.codec.Append(s, h.v)
	if err != nil {
		return fmt.Errorf("ordering: SortOptions.HeldCodec could not encode a record: %w", err)
	}
	enc := out[len(s):]
	if len(out) > cap(s) {
		// It did not fit (Append grew a copy: the slab itself is
		// untouched, A1): start a slab for it, its own if it is large.
		old := e.cur
		e.cur = e.newSlab(max(e.slabLen(), len(enc)))
		if e.live[old] == 0 {
			e.recycle(old)
		}
		s = append(e.slabs[e.cur], enc...)
		enc = s[len(s)-len(enc):]
		out = s
	}
	e.slabs[e.cur] = out
	e.live[e.cur]++
	e.q.push(heldRec[span]{ts: h.ts, t1: h.t1, t2: h.t2, seq: h.seq,
		v: span{slab: e.cur, off: uint32(len(out) - len(enc)), n: uint32(len(enc))}})
	return nil
}

// newSlab returns the id of an empty slab of at least size bytes.
func (e *encodedQueue[T]) newSlab(size int) uint32 {
	var b []byte
	if n := len(e.spare); n > 0 && size <= e.slabLen() {
		b, e.spare = e.spare[n-1][:0], e.spare[:n-1]
	} else {
		b = make([]byte, 0, size)
	}
	if n := len(e.ids); n > 0 {
		id := e.ids[n-1]
		e.ids = e.ids[:n-1]
		e.slabs[id], e.live[id] = b, 0
		return id
	}
	e.slabs = append(e.slabs, b)
	e.live = append(e.live, 0)
	return uint32(len(e.slabs) - 1)
}

func (e *encodedQueue[T]) slabLen() int {
	if e.slab > 0 {
		return e.slab
	}
	return slabSize
}

// bytes returns the encoding sp names.
func (e *encodedQueue[T]) bytes(sp span) []byte {
	return e.slabs[sp.slab][sp.off : sp.off+sp.n]
}

// done drops a released record from its slab's count, recycling the slab
// once it holds none and is not the one appended to (A2).
func (e *encodedQueue[T]) done(sp span) {
	e.live[sp.slab]--
	switch {
	case e.live[sp.slab] > 0:
	case sp.slab == e.cur:
		// Nothing in the slab appended to is held: appends start over
		// at its beginning.
		e.slabs[e.cur] = e.slabs[e.cur][:0]
	default:
		e.recycle(sp.slab)
	}
}

// recycle frees slab id, which holds no record and is not e.cur (A2).
func (e *encodedQueue[T]) recycle(id uint32) {
	if b := e.slabs[id]; cap(b) == e.slabLen() && len(e.spare) < maxSpareSlabs {
		e.spare = append(e.spare, b[:0])
	}
	e.slabs[id] = nil
	e.ids = append(e.ids, id)
}

// release decodes and emits, in order, every held record with ts <= wm
// (H3), and returns how many. A record that does not decode is dropped and
// its error returned (after the rest are released).
func (e *encodedQueue[T]) release(wm int64, emit func(*heldRec[T])) (int, error) {
	e.err = nil
	n := e.q.release(wm, func(h *heldRec[span]) {
		v, err := e.codec.Decode(e.bytes(h.v))
		e.done(h.v)
		if err != nil {
			if e.err == nil {
				e.err = fmt.Errorf("ordering: SortOptions.HeldCodec could not decode a held record it encoded (fix the codec): %w", err)
			}
			return
		}
		e.out = heldRec[T]{ts: h.ts, t1: h.t1, t2: h.t2, seq: h.seq, v: v}
		emit(&e.out)
	})
	var zero heldRec[T]
	e.out = zero // let the GC have the last value
	return n, e.err
}

// encodedCopy is a copy of an encodedQueue's held records taken for a
// snapshot: their spans and the slabs they name (memory copies only).
type encodedCopy struct {
	recs  []heldRec[span]
	slabs [][]byte
}

// copyHeld copies the held records and their slabs (the synchronous part
// of a snapshot; decode decodes the copy in the asynchronous part).
func (e *encodedQueue[T]) copyHeld() encodedCopy {
	c := encodedCopy{recs: e.q.all(), slabs: make([][]byte, len(e.slabs))}
	for i, s := range e.slabs {
		if e.live[i] > 0 {
			c.slabs[i] = append([]byte(nil), s...)
		}
	}
	return c
}

// decode returns the records of c as values.
func (e *encodedQueue[T]) decode(c encodedCopy) ([]heldRec[T], error) {
	out := make([]heldRec[T], len(c.recs))
	for i, h := range c.recs {
		v, err := e.codec.Decode(c.slabs[h.v.slab][h.v.off : h.v.off+h.v.n])
		if err != nil {
			return nil, fmt.Errorf("ordering: SortOptions.HeldCodec could not decode a held record it encoded (fix the codec): %w", err)
		}
		out[i] = heldRec[T]{ts: h.ts, t1: h.t1, t2: h.t2, seq: h.seq, v: v}
	}
	return out, nil
}
