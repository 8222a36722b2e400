package format

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	b := AppendHeader(nil, 258)
	if !bytes.Equal(b, []byte{0, 0, 0, 1, 2}) {
		t.Fatalf("header %x; want 0000000102", b)
	}
	id, rest, err := ParseHeader(append(b, 'x'))
	if err != nil || id != 258 || string(rest) != "x" {
		t.Fatalf("ParseHeader = %d %q %v", id, rest, err)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want error
	}{{nil, ErrShort}, {[]byte{0, 0, 0}, ErrShort}, {[]byte{1, 0, 0, 0, 1}, ErrMagic}, {[]byte{1}, ErrMagic}, {[]byte(`{"a":1}`), ErrMagic}} {
		_, _, err := ParseHeader(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("ParseHeader(%x) = %v; want %v", c.in, err, c.want)
		}
	}
}

func TestIndexRoundTrip(t *testing.T) {
	for _, idx := range [][]int{{0}, {1}, {0, 2}, {3, 1, 4}} {
		b := AppendIndex(nil, idx)
		if len(idx) == 1 && idx[0] == 0 && !bytes.Equal(b, []byte{0}) {
			t.Fatalf("[0] written as %x; want the single byte 00", b)
		}
		got, rest, err := ParseIndex(7, append(b, 9))
		if err != nil || !reflect.DeepEqual(got, idx) || !bytes.Equal(rest, []byte{9}) {
			t.Fatalf("ParseIndex(%x) = %v %x %v; want %v", b, got, rest, err, idx)
		}
	}
	// [1, 2] as Confluent writes it: count 2, then 1 and 2, zig-zag.
	if b := AppendIndex(nil, []int{1, 2}); !bytes.Equal(b, []byte{4, 2, 4}) {
		t.Fatalf("[1 2] = %x; want 040204", b)
	}
	_, _, err := ParseIndex(7, []byte{4, 2})
	var de *DecodeError
	if !errors.As(err, &de) || de.ID != 7 || !errors.Is(err, ErrIndex) {
		t.Fatalf("cut index: %v; want ErrIndex naming id 7", err)
	}
}

// FuzzWire: no input makes the wire format panic, and whatever parses
// re-encodes to the same header (W1).
func FuzzWire(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0})
	f.Add([]byte{0, 0, 0, 0, 1, 4, 2, 4, 'x'})
	f.Add([]byte{0, 0, 0, 0, 1, 0x7f})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, rest, err := ParseHeader(b)
		if err != nil {
			return
		}
		if h := AppendHeader(nil, id); !bytes.Equal(h, b[:HeaderSize]) {
			t.Fatalf("header %x re-encodes as %x", b[:HeaderSize], h)
		}
		if idx, _, err := ParseIndex(id, rest); err == nil && len(idx) > MaxIndexDepth {
			t.Fatalf("index of %d entries accepted", len(idx))
		}
	})
}
