package codec

import (
	"bytes"
	"math"
	"testing"
)

type fuzzKey struct {
	Name  string            `json:"name"`
	ID    int64             `json:"id"`
	Tags  []string          `json:"tags,omitempty"`
	Attrs map[string]uint16 `json:"attrs,omitempty"`
	Ptr   *float64          `json:"ptr,omitempty"`
}

// canonical checks that a built-in codec is strict (package guarantee: a
// key has one encoding, or restored entries of one key would be stored
// under two): whatever Decode accepts re-encodes to exactly the input,
// and the value survives the round trip.
func canonical[T comparable](t *testing.T, c Codec[T], src []byte) {
	t.Helper()
	orig := bytes.Clone(src)
	v, err := c.Decode(src)
	if err != nil {
		return
	}
	for i := range src { // the result must not alias src
		src[i] ^= 0xff
	}
	enc, err := c.Append(nil, v)
	if err != nil {
		t.Fatalf("%T: Append of a decoded value: %v", c, err)
	}
	if !bytes.Equal(enc, orig) {
		t.Fatalf("%T: %x decodes to %v, which encodes as %x: two encodings of one value", c, orig, v, enc)
	}
	w, err := c.Decode(enc)
	if err != nil || w != v {
		if f, ok := any(v).(float64); !(ok && math.IsNaN(f)) {
			if f, ok := any(v).(float32); !(ok && math.IsNaN(float64(f))) {
				t.Fatalf("%T: %x: decoded %v, again %v (%v)", c, orig, v, w, err)
			}
		}
	}
	copy(src, orig)
}

// FuzzKeyCodecs feeds arbitrary bytes (keys, namespaces and values of a
// restored snapshot are outside bytes) to the codecs Default picks.
// Decode must never panic; the built-in codecs must be canonical
// (canonical above); the JSON codec's encoding of a decoded value must
// survive decode-encode unchanged.
//
//	go test ./codec -run '^$' -fuzz FuzzKeyCodecs -fuzztime 60s -parallel 1
func FuzzKeyCodecs(f *testing.F) {
	for _, s := range [][]byte{nil, {0}, {1}, {0x80, 0x00}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		[]byte("key-1"), []byte(`{"name":"a","id":3,"tags":["x"],"attrs":{"k":7},"ptr":1.5}`), []byte(`null`),
		{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		canonical(t, Default[string](), src)
		canonical(t, Default[int](), src)
		canonical(t, Default[int8](), src)
		canonical(t, Default[int32](), src)
		canonical(t, Default[int64](), src)
		canonical(t, Default[uint](), src)
		canonical(t, Default[uint8](), src)
		canonical(t, Default[uint16](), src)
		canonical(t, Default[uint64](), src)
		canonical(t, Default[bool](), src)
		canonical(t, Default[float64](), src)
		canonical(t, Default[float32](), src)
		canonical(t, Default[struct{}](), src)

		bc := Default[[]byte]()
		if v, err := bc.Decode(src); err == nil {
			if enc, _ := bc.Append(nil, v); !bytes.Equal(enc, src) || (len(src) > 0 && &v[0] == &src[0]) {
				t.Fatalf("[]byte codec: %x round-trips as %x (or aliases its input)", src, enc)
			}
		}

		jc := Default[fuzzKey]()
		v, err := jc.Decode(src)
		if err != nil {
			return
		}
		enc, err := jc.Append(nil, v)
		if err != nil {
			t.Fatalf("JSON codec: Append of a decoded value: %v", err)
		}
		// The value itself may change (omitempty turns an empty slice into
		// nil, as encoding/json does), its encoding may not.
		w, err := jc.Decode(enc)
		if err != nil {
			t.Fatalf("JSON codec: %q decodes to %+v, which re-encodes as %s, which does not decode: %v", src, v, enc, err)
		}
		if enc2, _ := jc.Append(nil, w); !bytes.Equal(enc, enc2) {
			t.Fatalf("JSON codec: %q: encodings differ: %s, then %s", src, enc, enc2)
		}
	})
}
