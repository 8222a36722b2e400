package cluster

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Shapes of exchanged values the binary codec must carry unchanged.
type inner struct {
	S  string
	B  []byte
	F  float32
	U8 uint8
}

type embedded struct{ E int16 }

type shape struct {
	embedded
	I     int
	I8    int8
	I64   int64
	U     uint
	U64   uint64
	F     float64
	Ok    bool
	S     string
	Ptr   *inner
	In    inner
	Arr   [3]int32
	Ints  []int
	Strs  map[string]int
	Keys  map[int64]*inner
	Any   any
	Anys  []any
	Obj   map[string]any
	Skip  string `json:"-"`
	local int
}

type node struct {
	V    int
	Next *node
}

// sameValue is reflect.DeepEqual but for floats, which are the same if
// their bits are (NaN included, -0 apart from 0).
func sameValue(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float()) || math.IsNaN(a.Float()) && math.IsNaN(b.Float())
	case reflect.Interface, reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Slice, reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if a.Kind() == reflect.Map {
			for _, k := range a.MapKeys() {
				if !sameValue(a.MapIndex(k), b.MapIndex(k)) {
					return false
				}
			}
			return true
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() && !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func genFloat() *rapid.Generator[float64] {
	return rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}))
}

func genBytes() *rapid.Generator[[]byte] {
	return rapid.OneOf(rapid.Just([]byte(nil)), rapid.Just([]byte{}), rapid.SliceOf(rapid.Byte()))
}

// genAny draws what an empty interface may hold: every type the binary
// codec keeps, nested to depth.
func genAny(depth int) *rapid.Generator[any] {
	leaves := []*rapid.Generator[any]{
		rapid.Just[any](nil), rapid.Bool().AsAny(), rapid.String().AsAny(), genFloat().AsAny(), rapid.Int().AsAny(),
		rapid.Int64().AsAny(), rapid.Int8().AsAny(), rapid.Int16().AsAny(), rapid.Int32().AsAny(), rapid.Uint().AsAny(),
		rapid.Uint8().AsAny(), rapid.Uint16().AsAny(), rapid.Uint32().AsAny(), rapid.Uint64().AsAny(),
		rapid.Float32().AsAny(), genBytes().AsAny(),
		rapid.Custom(func(t *rapid.T) any {
			return json.Number(rapid.StringMatching(`-?[0-9]{1,20}(\.[0-9]{1,5})?`).Draw(t, "n"))
		}),
	}
	if depth > 0 {
		leaves = append(leaves, genObject(depth-1).AsAny(), genArray(depth-1).AsAny())
	}
	return rapid.OneOf(leaves...)
}

func genObject(depth int) *rapid.Generator[map[string]any] {
	return rapid.OneOf(rapid.Just(map[string]any(nil)), rapid.MapOfN(rapid.String(), genAny(depth), 0, 5))
}

func genArray(depth int) *rapid.Generator[[]any] {
	return rapid.OneOf(rapid.Just([]any(nil)), rapid.SliceOfN(genAny(depth), 0, 5))
}

func genInner() *rapid.Generator[inner] {
	return rapid.Custom(func(t *rapid.T) inner {
		return inner{S: rapid.String().Draw(t, "s"), B: genBytes().Draw(t, "b"), F: rapid.Float32().Draw(t, "f"), U8: rapid.Uint8().Draw(t, "u8")}
	})
}

func genShape() *rapid.Generator[shape] {
	return rapid.Custom(func(t *rapid.T) shape {
		s := shape{embedded: embedded{E: rapid.Int16().Draw(t, "e")},
			I: rapid.Int().Draw(t, "i"), I8: rapid.Int8().Draw(t, "i8"), I64: rapid.Int64().Draw(t, "i64"),
			U: rapid.Uint().Draw(t, "u"), U64: rapid.Uint64().Draw(t, "u64"), F: genFloat().Draw(t, "f"),
			Ok: rapid.Bool().Draw(t, "ok"), S: rapid.String().Draw(t, "s"), In: genInner().Draw(t, "in"),
			Any: genAny(2).Draw(t, "any"), Anys: genArray(2).Draw(t, "anys"), Obj: genObject(2).Draw(t, "obj")}
		if rapid.Bool().Draw(t, "ptr") {
			p := genInner().Draw(t, "p")
			s.Ptr = &p
		}
		for i := range s.Arr {
			s.Arr[i] = rapid.Int32().Draw(t, "arr")
		}
		s.Ints = rapid.OneOf(rapid.Just([]int(nil)), rapid.SliceOf(rapid.Int())).Draw(t, "ints")
		s.Strs = rapid.OneOf(rapid.Just(map[string]int(nil)), rapid.MapOf(rapid.String(), rapid.Int())).Draw(t, "strs")
		if rapid.Bool().Draw(t, "keys") {
			s.Keys = map[int64]*inner{}
			for range rapid.IntRange(0, 3).Draw(t, "nkeys") {
				var p *inner
				if rapid.Bool().Draw(t, "nilptr") {
					v := genInner().Draw(t, "kv")
					p = &v
				}
				s.Keys[rapid.Int64().Draw(t, "k")] = p
			}
		}
		return s
	})
}

func roundTrip[T any](t *rapid.T, c *binCodec[T], v T) {
	b, err := c.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !sameValue(reflect.ValueOf(&v).Elem(), reflect.ValueOf(&got).Elem()) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, v)
	}
	// As the exchange decodes: map keys interned, the second time taken
	// from the table.
	var keys keyTable
	var interned [2]T
	for i := range interned {
		if interned[i], err = c.decodeWith(b, &keys); err != nil {
			t.Fatal(err)
		}
		if !sameValue(reflect.ValueOf(&v).Elem(), reflect.ValueOf(&interned[i]).Elem()) {
			t.Fatalf("round trip with interned keys (%d):\n got %#v\nwant %#v", i, interned[i], v)
		}
	}
	// The decoded value does not alias the encoding.
	clear(b)
	for _, got := range []T{got, interned[0], interned[1]} {
		if !sameValue(reflect.ValueOf(&v).Elem(), reflect.ValueOf(&got).Elem()) {
			t.Fatalf("the decoded value changed with its encoding's bytes: %#v", got)
		}
	}
}

// The binary codec returns every value it encodes as it was, with its
// dynamic types in interfaces, nil and empty apart, NaN and the edges of
// every width.
func TestBinCodecRoundTrip(t *testing.T) {
	shapes := newBinCodec[shape]()
	records := newBinCodec[map[string]any]()
	anys := newBinCodec[any]()
	nodes := newBinCodec[*node]()
	ints := newBinCodec[[]int64]()
	if shapes == nil || records == nil || anys == nil || nodes == nil || ints == nil {
		t.Fatal("a type of the binary codec's did not compile")
	}
	rapid.Check(t, func(t *rapid.T) {
		roundTrip(t, shapes, genShape().Draw(t, "shape"))
		roundTrip(t, records, genObject(3).Draw(t, "record"))
		roundTrip(t, anys, genAny(3).Draw(t, "any"))
		var list *node
		for _, v := range rapid.SliceOfN(rapid.Int(), 0, 5).Draw(t, "list") {
			list = &node{V: v, Next: list}
		}
		roundTrip(t, nodes, list)
		roundTrip(t, ints, rapid.SliceOf(rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, 0, -1}))).Draw(t, "ints"))
	})
}

// Fields JSON does not cross do not cross; an interface holding a type
// the codec does not keep crosses as JSON would carry it.
func TestBinCodecCrossesWhatJSONCrosses(t *testing.T) {
	c := newBinCodec[shape]()
	b, err := c.Encode(shape{Skip: "x", local: 7, Any: struct{ A int }{3}, Obj: map[string]any{"t": time.Unix(0, 0).UTC()}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Skip != "" || got.local != 0 {
		t.Fatalf("fields JSON does not cross crossed: %q, %d", got.Skip, got.local)
	}
	if !reflect.DeepEqual(got.Any, map[string]any{"A": 3.0}) || got.Obj["t"] != "1970-01-01T00:00:00Z" {
		t.Fatalf("interfaces holding other types: %#v, %#v; want them as JSON carries them", got.Any, got.Obj["t"])
	}
	if _, err := c.Encode(shape{Any: make(chan int)}); err == nil {
		t.Fatal("encoded a channel in an interface, which JSON does not")
	}
}

type withTime struct{ At time.Time }
type withText struct{ N textual }
type textual int

func (textual) MarshalText() ([]byte, error) { return nil, nil }

type withIface struct{ E error }
type withFunc struct{ F func() }
type withEmpty struct{ S []struct{} }
type withComplex struct{ C complex128 }

// Types the codec cannot carry faithfully are not compiled (the exchange
// uses JSON for them); the decision is the type's, made once.
func TestBinCodecFallsBackToJSON(t *testing.T) {
	for name, ok := range map[string]bool{
		"time": newBinCodec[withTime]() == nil, "text": newBinCodec[withText]() == nil, "textptr": newBinCodec[*[]textual]() == nil,
		"iface": newBinCodec[withIface]() == nil, "func": newBinCodec[withFunc]() == nil, "chan": newBinCodec[chan int]() == nil,
		"empty": newBinCodec[withEmpty]() == nil, "complex": newBinCodec[withComplex]() == nil,
	} {
		if !ok {
			t.Errorf("%s: compiled", name)
		}
	}
}

// Decoding bad bytes returns an error, never panics.
func FuzzBinCodecDecode(f *testing.F) {
	shapes, records := newBinCodec[shape](), newBinCodec[map[string]any]()
	for _, v := range []shape{{}, {S: "x", Ints: []int{1, 2}, Obj: map[string]any{"a": []any{1.0, "b", nil}}, Ptr: &inner{B: []byte("z")}}} {
		b, err := shapes.Encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	b, _ := records.Encode(map[string]any{"k": map[string]any{"n": json.Number("12")}, "l": []any{int64(-3), true}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		// What decodes encodes, and decodes again to the same value.
		if v, err := shapes.Decode(b); err == nil {
			again, err := shapes.Encode(v)
			if err != nil {
				t.Fatalf("decoded %x into %#v, which does not encode: %v", b, v, err)
			}
			if w, err := shapes.Decode(again); err != nil || !sameValue(reflect.ValueOf(v), reflect.ValueOf(w)) {
				t.Fatalf("%#v encodes to %x, which decodes to %#v (%v)", v, again, w, err)
			}
		}
		if v, err := records.Decode(b); err == nil {
			again, err := records.Encode(v)
			if err != nil {
				t.Fatalf("decoded %x into %#v, which does not encode: %v", b, v, err)
			}
			if w, err := records.Decode(again); err != nil || !sameValue(reflect.ValueOf(v), reflect.ValueOf(w)) {
				t.Fatalf("%#v encodes to %x, which decodes to %#v (%v)", v, again, w, err)
			}
		}
	})
}

var benchRecord = map[string]any{"user": "u-1234", "page": "/a/b/c", "ts": 1733475000123.0, "n": 42.0, "ok": true,
	"tags": []any{"x", "y"}, "geo": map[string]any{"lat": 52.1, "lon": 4.3}}

// The exchange's encoding of a pipeline's record: binary (into a reused
// buffer, as the exchange does) against JSON.
func BenchmarkExchangeEncode(b *testing.B) {
	bin := newBinCodec[map[string]any]()
	js := JSON[map[string]any]()
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		e, v := &encoder{}, benchRecord
		for b.Loop() {
			e.b = e.b[:0]
			bin.encodeTo(e, &v)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = js.Encode(benchRecord)
		}
	})
	type event struct {
		User, Page string
		Ts         int64
		N          float64
		Ok         bool
	}
	ev := event{"u-1234", "/a/b/c", 1733475000123, 42, true}
	binEv, jsEv := newBinCodec[event](), JSON[event]()
	b.Run("binary-struct", func(b *testing.B) {
		b.ReportAllocs()
		e := &encoder{}
		for b.Loop() {
			e.b = e.b[:0]
			binEv.encodeTo(e, &ev)
		}
	})
	b.Run("json-struct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = jsEv.Encode(ev)
		}
	})
}

func BenchmarkExchangeDecode(b *testing.B) {
	bin := newBinCodec[map[string]any]()
	js := JSON[map[string]any]()
	be, _ := bin.Encode(benchRecord)
	je, _ := js.Encode(benchRecord)
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = bin.Decode(be)
		}
	})
	b.Run("binary-interned", func(b *testing.B) {
		b.ReportAllocs()
		var keys keyTable
		for b.Loop() {
			_, _ = bin.decodeWith(be, &keys)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = js.Decode(je)
		}
	})
}

// The exchange decodes a record's field names once: with the keys
// interned, a record of seven fields, two of them nested, decodes with 8
// fewer allocations (its 7 + 2 keys but the first time).
func TestBinCodecInternsKeys(t *testing.T) {
	c := newBinCodec[map[string]any]()
	b, err := c.Encode(benchRecord)
	if err != nil {
		t.Fatal(err)
	}
	var keys keyTable
	plain := testing.AllocsPerRun(100, func() { _, _ = c.Decode(b) })
	interned := testing.AllocsPerRun(100, func() { _, _ = c.decodeWith(b, &keys) })
	if plain-interned < 8 {
		t.Fatalf("%v allocations a decode with interned keys, %v without: want 8 fewer or more", interned, plain)
	}
	if len(keys.m) != 9 {
		t.Fatalf("%d keys interned, want 9: %v", len(keys.m), keys.m)
	}
	// A table that is full interns nothing more, and decodes as before.
	full := keyTable{m: map[string]string{}}
	for i := range maxInterned {
		full.m[strconv.Itoa(i)] = strconv.Itoa(i)
	}
	if got, err := c.decodeWith(b, &full); err != nil || !reflect.DeepEqual(got, benchRecord) || len(full.m) != maxInterned {
		t.Fatalf("with a full table: %v, %v, %d keys", got, err, len(full.m))
	}
}

// A zero-allocation encode of a struct into a reused buffer.
func TestBinCodecEncodeAllocs(t *testing.T) {
	type event struct {
		User string
		Ts   int64
		Tags []string
	}
	c := newBinCodec[event]()
	ev := event{"u", 1, []string{"a"}}
	e := &encoder{b: make([]byte, 0, 256)}
	if n := testing.AllocsPerRun(100, func() { e.b = e.b[:0]; c.encodeTo(e, &ev) }); n != 0 {
		t.Fatalf("%v allocations per encode, want 0", n)
	}
	if got, err := c.Decode(e.b); err != nil || !bytes.Equal([]byte(got.User), []byte("u")) || got.Tags[0] != "a" {
		t.Fatalf("%#v, %v", got, err)
	}
}
