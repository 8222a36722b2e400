package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

type (
	myString string
	myBytes  []byte
	myInt    int
	myInt8   int8
	myInt16  int16
	myInt32  int32
	myInt64  int64
	myUint   uint
	myUint8  uint8
	myUint16 uint16
	myUint32 uint32
	myUint64 uint64
	myBool   bool
	myF64    float64
	myF32    float32
	myEmpty  struct{}
	point    struct{ X, Y int }
)

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// roundTrip checks that Default[T] decodes what it encodes, that its
// Append only appends, and returns the encoding.
func roundTrip[T any](t fataler, v T, eq func(a, b T) bool) []byte {
	t.Helper()
	c := Default[T]()
	prefix := []byte("prefix")
	enc, err := c.Append(bytes.Clone(prefix), v)
	if err != nil {
		t.Fatalf("%T: Append(%v): %v", v, v, err)
	}
	if !bytes.HasPrefix(enc, prefix) {
		t.Fatalf("%T: Append modified dst", v)
	}
	enc = enc[len(prefix):]
	got, err := c.Decode(enc)
	if err != nil {
		t.Fatalf("%T: Decode(%x): %v", v, enc, err)
	}
	if !eq(got, v) {
		t.Fatalf("%T: round trip of %v gave %v", v, v, got)
	}
	return enc
}

func same[T comparable](a, b T) bool { return a == b }

func sameFloat[T ~float32 | ~float64](a, b T) bool {
	return a == b && math.Signbit(float64(a)) == math.Signbit(float64(b)) || a != a && b != b
}

func checkRoundTrip[T comparable](t *rapid.T, g *rapid.Generator[T]) {
	roundTrip(t, g.Draw(t, "v"), same[T])
}

func TestDefaultCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		checkRoundTrip(rt, rapid.String())
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myString { return myString(rapid.String().Draw(t, "s")) }))
		checkRoundTrip(rt, rapid.Int())
		checkRoundTrip(rt, rapid.Int8())
		checkRoundTrip(rt, rapid.Int16())
		checkRoundTrip(rt, rapid.Int32())
		checkRoundTrip(rt, rapid.Int64())
		checkRoundTrip(rt, rapid.Uint())
		checkRoundTrip(rt, rapid.Uint8())
		checkRoundTrip(rt, rapid.Uint16())
		checkRoundTrip(rt, rapid.Uint32())
		checkRoundTrip(rt, rapid.Uint64())
		checkRoundTrip(rt, rapid.Uintptr())
		checkRoundTrip(rt, rapid.Bool())
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myInt { return myInt(rapid.Int().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myInt8 { return myInt8(rapid.Int8().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myInt16 { return myInt16(rapid.Int16().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myInt32 { return myInt32(rapid.Int32().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myInt64 { return myInt64(rapid.Int64().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myUint { return myUint(rapid.Uint().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myUint8 { return myUint8(rapid.Uint8().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myUint16 { return myUint16(rapid.Uint16().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myUint32 { return myUint32(rapid.Uint32().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myUint64 { return myUint64(rapid.Uint64().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) myBool { return myBool(rapid.Bool().Draw(t, "v")) }))
		checkRoundTrip(rt, rapid.Custom(func(t *rapid.T) point {
			return point{rapid.Int().Draw(t, "x"), rapid.Int().Draw(t, "y")}
		}))

		f64 := rapid.Float64().Draw(rt, "f64")
		roundTrip(rt, f64, sameFloat[float64])
		roundTrip(rt, myF64(f64), sameFloat[myF64])
		f32 := rapid.Float32().Draw(rt, "f32")
		roundTrip(rt, f32, sameFloat[float32])
		roundTrip(rt, myF32(f32), sameFloat[myF32])

		bs := rapid.SliceOf(rapid.Byte()).Draw(rt, "bytes")
		roundTrip(rt, bs, func(a, b []byte) bool { return bytes.Equal(a, b) })
		roundTrip(rt, myBytes(bs), func(a, b myBytes) bool { return bytes.Equal(a, b) })

		m := rapid.MapOf(rapid.String(), rapid.Int()).Draw(rt, "map")
		roundTrip(rt, m, func(a, b map[string]int) bool { return len(a) == len(b) && fmt.Sprint(a) == fmt.Sprint(b) })
	})
}

func TestDefaultCodecChoice(t *testing.T) {
	check := func(name string, got []byte, want string) {
		t.Helper()
		if string(got) != want {
			t.Errorf("%s encodes as %q, want %q", name, got, want)
		}
	}
	check("string", roundTrip(t, "héllo", same[string]), "héllo")
	check("named string", roundTrip(t, myString("id-7"), same[myString]), "id-7")
	check("[]byte", roundTrip(t, []byte{1, 2}, func(a, b []byte) bool { return bytes.Equal(a, b) }), "\x01\x02")
	check("int -1 (zig-zag)", roundTrip(t, -1, same[int]), "\x01")
	check("named int32 300", roundTrip(t, myInt32(300), same[myInt32]), "\xd8\x04")
	check("uint16 300", roundTrip(t, uint16(300), same[uint16]), "\xac\x02")
	check("bool", roundTrip(t, true, same[bool]), "\x01")
	check("float64 1", roundTrip(t, 1.0, same[float64]), "\x00\x00\x00\x00\x00\x00\xf0\x3f")
	check("struct{}", roundTrip(t, struct{}{}, same[struct{}]), "")
	check("named empty struct", roundTrip(t, myEmpty{}, same[myEmpty]), "")
	check("struct (JSON)", roundTrip(t, point{1, 2}, same[point]), `{"X":1,"Y":2}`)
	check("time.Time (JSON)", roundTrip(t, time.Unix(0, 0).UTC(), func(a, b time.Time) bool { return a.Equal(b) }),
		`"1970-01-01T00:00:00Z"`)

	if got, _ := Default[[]byte]().Decode(nil); got != nil {
		t.Errorf("empty []byte decodes as %v, want nil", got)
	}
}

func TestDefaultCodecStrictDecode(t *testing.T) {
	bad := []struct {
		name string
		err  error
	}{
		{"int8 out of range", decodeErr[int8]([]byte{0x80, 0x02})},   // 128
		{"uint8 out of range", decodeErr[uint8]([]byte{0x80, 0x02})}, // 256
		{"int trailing bytes", decodeErr[int]([]byte{0x02, 0x00})},   // 1 then junk
		{"int truncated", decodeErr[int]([]byte{0x80})},              // continuation without end
		{"int empty", decodeErr[int](nil)},                           //
		{"uint64 overlong", decodeErr[uint64](bytes.Repeat([]byte{0xff}, 11))},
		{"bool 2", decodeErr[bool]([]byte{2})},
		{"bool empty", decodeErr[bool](nil)},
		{"float64 short", decodeErr[float64]([]byte{1, 2, 3})},
		{"float32 long", decodeErr[float32]([]byte{1, 2, 3, 4, 5})},
		{"struct{} with bytes", decodeErr[struct{}]([]byte{0})},
		{"JSON garbage", decodeErr[point]([]byte("{"))},
	}
	for _, c := range bad {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func decodeErr[T any](src []byte) error {
	_, err := Default[T]().Decode(src)
	return err
}

type (
	hidden     struct{ Name, secret string }
	hiddenDeep struct{ Items []map[string]*hidden }
	ignored    struct {
		Name   string
		secret string `json:"-"`
	}
	embedsHidden struct{ inner }
	inner        struct{ A, b int }
	embedsOK     struct{ innerOK }
	innerOK      struct{ A int }
	selfRef      struct{ Next *selfRef }
)

// TestJSONCodecRefusesLossyTypes checks that a type whose unexported fields
// encoding/json would drop makes Append fail (naming the field) rather than
// lose data silently.
func TestJSONCodecRefusesLossyTypes(t *testing.T) {
	lossy := map[string]error{
		"secret":                  appendErr(hidden{"a", "b"}),
		"Items[]{value}[].secret": appendErr(hiddenDeep{}),
		"inner.b":                 appendErr(embedsHidden{}),
	}
	for field, err := range lossy {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("want an error naming field %s, got %v", field, err)
		}
	}
	for name, err := range map[string]error{
		"tagged json:\"-\"":           appendErr(ignored{Name: "a"}),
		"embedded exported fields":    appendErr(embedsOK{innerOK{1}}),
		"recursive type":              appendErr(selfRef{}),
		"time.Time (has MarshalJSON)": appendErr(time.Now()),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func appendErr[T any](v T) error {
	_, err := Default[T]().Append(nil, v)
	return err
}

// TestJSONCodecIsEncodingJSON checks that JSON writes what json.Marshal
// writes, also for kinds Default has built-ins for.
func TestJSONCodecIsEncodingJSON(t *testing.T) {
	for _, v := range []any{"x", 42, true, 1.5, nil} {
		got, err := JSON[any]().Append(nil, v)
		want, _ := json.Marshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("JSON(%v) = %s, %v; want %s", v, got, err, want)
		}
	}
	got, _ := JSON[string]().Append(nil, "x")
	if string(got) != `"x"` {
		t.Errorf("JSON[string] = %s", got)
	}
	if reflect.TypeOf(Default[any]()) != reflect.TypeOf(JSON[any]()) {
		t.Errorf("Default[any] is %T, want the JSON codec", Default[any]())
	}
}
