// Package wire is the low-level framing shared by the snapshot formats of
// packages state and timer: uvarints, varints and uvarint-length-prefixed
// byte strings ("fields"). The formats themselves are documented in
// docs/state-format.md.
//
// Invariant: a Reader never panics on malformed input; every error it
// returns wraps the sentinel it was created with.
package wire

import (
	"encoding/binary"
	"fmt"
)

// Appender encodes a value by appending to dst (state.Codec satisfies it).
type Appender[T any] interface {
	Append(dst []byte, v T) ([]byte, error)
}

// Decoder decodes one value from exactly src (state.Codec satisfies it).
type Decoder[T any] interface {
	Decode(src []byte) (T, error)
}

// AppendField appends v encoded by c, prefixed with the uvarint length of
// its encoding.
//
// The length is not known before encoding, so a one-byte hole is reserved
// for it; encodings shorter than 128 bytes (almost all keys and small
// values) fill it exactly, and longer ones are shifted right by the extra
// length bytes, which costs one memmove of the encoding.
func AppendField[T any, C Appender[T]](dst []byte, c C, v T) ([]byte, error) {
	dst = append(dst, 0)
	start := len(dst)
	dst, err := c.Append(dst, v)
	if err != nil {
		return dst, err
	}
	return CloseField(dst, start), nil
}

// CloseField writes the uvarint length of dst[start:] into the one-byte
// hole at dst[start-1], shifting dst[start:] right when the length needs
// more than one byte.
func CloseField(dst []byte, start int) []byte {
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

// AppendString appends s as a field.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Reader decodes the framing of a snapshot from Buf, starting at Off.
type Reader struct {
	Buf []byte
	Off int
	// Err is the sentinel every error wraps (ErrCorruptSnapshot of package
	// state).
	Err error
}

// NewReader returns a reader of buf whose errors wrap sentinel.
func NewReader(buf []byte, sentinel error) *Reader { return &Reader{Buf: buf, Err: sentinel} }

// Corrupt returns an error wrapping the sentinel, with the byte position.
func (r *Reader) Corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s at byte %d", r.Err, fmt.Sprintf(format, args...), r.Off)
}

// Remaining returns the number of unread bytes.
func (r *Reader) Remaining() int { return len(r.Buf) - r.Off }

// Done reports whether every byte has been read.
func (r *Reader) Done() bool { return r.Off == len(r.Buf) }

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint(what string) (uint64, error) {
	x, n := binary.Uvarint(r.Buf[r.Off:])
	if n <= 0 {
		return 0, r.Corrupt("bad or truncated varint (%s)", what)
	}
	r.Off += n
	return x, nil
}

// Varint reads a signed (zig-zag) varint.
func (r *Reader) Varint(what string) (int64, error) {
	x, n := binary.Varint(r.Buf[r.Off:])
	if n <= 0 {
		return 0, r.Corrupt("bad or truncated varint (%s)", what)
	}
	r.Off += n
	return x, nil
}

// Count reads a uvarint count of items each at least one byte long, so a
// count above the remaining bytes is corrupt (and never drives an
// allocation).
func (r *Reader) Count(what string) (int, error) {
	x, err := r.Uvarint(what)
	if err != nil {
		return 0, err
	}
	if x > uint64(r.Remaining()) {
		return 0, r.Corrupt("%s %d exceeds the %d remaining bytes", what, x, r.Remaining())
	}
	return int(x), nil
}

// Field reads a length-prefixed byte string. The result aliases the buffer
// and has its capacity clipped to its length.
func (r *Reader) Field(what string) ([]byte, error) {
	x, err := r.Uvarint(what)
	if err != nil {
		return nil, err
	}
	if x > uint64(r.Remaining()) {
		return nil, r.Corrupt("%s of %d bytes overruns the %d remaining bytes", what, x, r.Remaining())
	}
	end := r.Off + int(x)
	b := r.Buf[r.Off:end:end]
	r.Off = end
	return b, nil
}

// SkipFields reads n fields without looking at them.
func (r *Reader) SkipFields(n int, what string) error {
	for range n {
		if _, err := r.Field(what); err != nil {
			return err
		}
	}
	return nil
}

// DecodeField reads one field and decodes it with c.
func DecodeField[T any, C Decoder[T]](r *Reader, c C, what string) (T, error) {
	b, err := r.Field(what)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := c.Decode(b)
	if err != nil {
		return v, fmt.Errorf("decoding %s at byte %d: %w", what, r.Off-len(b), err)
	}
	return v, nil
}
