package state

import (
	"encoding/binary"
	"fmt"
)

// This file holds the low-level framing of the snapshot format: uvarints and
// uvarint-length-prefixed byte strings ("fields").

// appendField appends v encoded by c, prefixed with the uvarint length of its
// encoding.
//
// The length is not known before encoding, so a one-byte hole is reserved
// for it; encodings shorter than 128 bytes (almost all keys and small values)
// fill it exactly, and longer ones are shifted right by the extra length
// bytes, which costs one memmove of the encoding.
func appendField[T any](dst []byte, c Codec[T], v T) ([]byte, error) {
	dst = append(dst, 0)
	start := len(dst)
	dst, err := c.Append(dst, v)
	if err != nil {
		return dst, err
	}
	return closeField(dst, start), nil
}

// closeField writes the uvarint length of dst[start:] into the one-byte hole
// at dst[start-1], shifting dst[start:] right when the length needs more than
// one byte.
func closeField(dst []byte, start int) []byte {
	n := len(dst) - start
	if n < 0x80 {
		dst[start-1] = byte(n)
		return dst
	}
	var tmp [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(tmp[:], uint64(n))
	dst = append(dst, tmp[:w-1]...) // grow by w-1 bytes
	copy(dst[start+w-1:], dst[start:start+n])
	copy(dst[start-1:], tmp[:w])
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// reader decodes the framing of a snapshot. Every method returns an error
// wrapping ErrCorruptSnapshot, never panics, on input that ends early or is
// malformed.
type reader struct {
	buf []byte
	off int
}

func (r *reader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s at byte %d", ErrCorruptSnapshot, fmt.Sprintf(format, args...), r.off)
}

func (r *reader) remaining() int { return len(r.buf) - r.off }

func (r *reader) done() bool { return r.off == len(r.buf) }

func (r *reader) uvarint(what string) (uint64, error) {
	x, n := binary.Uvarint(r.buf[r.off:])
	if n <= 0 {
		return 0, r.corrupt("bad or truncated varint (%s)", what)
	}
	r.off += n
	return x, nil
}

// count reads a uvarint count of items each at least one byte long, so a
// count above the remaining bytes is corrupt (and never drives an
// allocation).
func (r *reader) count(what string) (int, error) {
	x, err := r.uvarint(what)
	if err != nil {
		return 0, err
	}
	if x > uint64(r.remaining()) {
		return 0, r.corrupt("%s %d exceeds the %d remaining bytes", what, x, r.remaining())
	}
	return int(x), nil
}

// field reads a length-prefixed byte string. The result aliases the buffer
// and has its capacity clipped to its length.
func (r *reader) field(what string) ([]byte, error) {
	x, err := r.uvarint(what)
	if err != nil {
		return nil, err
	}
	if x > uint64(r.remaining()) {
		return nil, r.corrupt("%s of %d bytes overruns the %d remaining bytes", what, x, r.remaining())
	}
	end := r.off + int(x)
	b := r.buf[r.off:end:end]
	r.off = end
	return b, nil
}

// skipFields reads n fields without looking at them.
func (r *reader) skipFields(n int, what string) error {
	for range n {
		if _, err := r.field(what); err != nil {
			return err
		}
	}
	return nil
}
