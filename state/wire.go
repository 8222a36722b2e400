package state

import "github.com/weirproject/weir/internal/wire"

// The low-level framing of the snapshot format (uvarints and
// uvarint-length-prefixed "fields") is package internal/wire, shared with
// package timer.

type reader = wire.Reader

func newReader(buf []byte) *reader { return wire.NewReader(buf, ErrCorruptSnapshot) }

func appendField[T any](dst []byte, c Codec[T], v T) ([]byte, error) {
	return wire.AppendField(dst, c, v)
}

func closeField(dst []byte, start int) []byte { return wire.CloseField(dst, start) }

func appendString(dst []byte, s string) []byte { return wire.AppendString(dst, s) }

func decodeField[T any](r *reader, c Codec[T], what string) (T, error) {
	return wire.DecodeField(r, c, what)
}
