package window

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/state"
)

// WindowCodec is the state.Codec of Window used for window namespaces in
// checkpoints and savepoints: Start and End as two zig-zag varints
// (encoding/binary.AppendVarint), nothing else. Decode rejects truncated
// input and trailing bytes with errors wrapping state.ErrCorruptSnapshot.
type WindowCodec struct{}

// Append appends the encoding of w.
func (WindowCodec) Append(dst []byte, w Window) ([]byte, error) {
	return binary.AppendVarint(binary.AppendVarint(dst, w.Start), w.End), nil
}

// Decode decodes one window; src must hold exactly one encoding.
func (WindowCodec) Decode(src []byte) (Window, error) {
	w, n, err := decodeWindow(src)
	if err != nil {
		return Window{}, err
	}
	if n != len(src) {
		return Window{}, fmt.Errorf("%w: window: %d trailing bytes", state.ErrCorruptSnapshot, len(src)-n)
	}
	return w, nil
}

func decodeWindow(src []byte) (Window, int, error) {
	s, n := binary.Varint(src)
	if n <= 0 {
		return Window{}, 0, fmt.Errorf("%w: window start: bad or truncated varint", state.ErrCorruptSnapshot)
	}
	e, m := binary.Varint(src[n:])
	if m <= 0 {
		return Window{}, 0, fmt.Errorf("%w: window end: bad or truncated varint", state.ErrCorruptSnapshot)
	}
	return Window{Start: s, End: e}, n + m, nil
}

// sessionSetCodec encodes a key's merging set: uvarint count, then per
// session its window and its state window (WindowCodec each).
type sessionSetCodec struct{}

func (sessionSetCodec) Append(dst []byte, set []mapping) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(set)))
	for _, m := range set {
		dst, _ = WindowCodec{}.Append(dst, m.win)
		dst, _ = WindowCodec{}.Append(dst, m.state)
	}
	return dst, nil
}

func (sessionSetCodec) Decode(src []byte) ([]mapping, error) {
	count, n := binary.Uvarint(src)
	// Each session takes at least 4 bytes: a count beyond that is corrupt
	// (and must not drive an allocation).
	if n <= 0 || count > uint64(len(src)-n)/4 {
		return nil, fmt.Errorf("%w: session set: bad count", state.ErrCorruptSnapshot)
	}
	set := make([]mapping, 0, count)
	off := n
	for range count {
		w, k, err := decodeWindow(src[off:])
		if err != nil {
			return nil, err
		}
		off += k
		sw, k, err := decodeWindow(src[off:])
		if err != nil {
			return nil, err
		}
		off += k
		set = append(set, mapping{win: w, state: sw})
	}
	if off != len(src) {
		return nil, fmt.Errorf("%w: session set: %d trailing bytes", state.ErrCorruptSnapshot, len(src)-off)
	}
	return set, nil
}
