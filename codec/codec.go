// Package codec turns keys, namespaces and values into bytes and back for
// the snapshots of keyed state and timers (packages state and timer) and
// for the operators that write their own (window). It is below both, so
// that timer and the runtime need not import state for codecs.
//
// Snapshot sentinel errors live here too: a malformed blob gives an error
// wrapping ErrCorruptSnapshot, an unknown format version one wrapping
// ErrSnapshotVersion, whichever package read it.
package codec

import (
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// ErrCorruptSnapshot is wrapped by every error about a snapshot blob (state,
// timers, window contents) that is not well formed (truncated, overlong,
// counts or lengths that do not fit, trailing bytes, values a codec
// rejects). Package state re-exports it as state.ErrCorruptSnapshot.
var ErrCorruptSnapshot = errors.New("state: corrupt snapshot")

// ErrSnapshotVersion is wrapped by the error for a snapshot blob of a format
// version this build does not read. Package state re-exports it as
// state.ErrSnapshotVersion.
var ErrSnapshotVersion = errors.New("state: unsupported snapshot format version")

// Codec turns values of type T into bytes and back, for snapshots and
// savepoints (see "Snapshot format" in the documentation of package
// state). A codec
// is used only when a key group is snapshotted or restored, never on the
// per-record path.
//
// Append appends the encoding of v to dst and returns the extended slice. It
// must only append: the bytes dst[:len(dst)] belong to the caller and must
// not be modified. The encoding need not be self-delimiting; the snapshot
// writer frames it with its length.
//
// Decode decodes one value from src, which holds exactly the bytes one Append
// produced (no more, no less). src is owned by the caller and valid only
// during the call: the result must not alias it. Decode must return an error,
// never panic, for bytes that are not a valid encoding.
//
// A codec must be safe to call from the goroutine that owns the backend; the
// built-in codecs and JSON are stateless and safe for concurrent use.
type Codec[T any] interface {
	Append(dst []byte, v T) ([]byte, error)
	Decode(src []byte) (T, error)
}

// Default returns the codec a state, key or namespace of type T gets
// when none is given. It examines the kind of T once, here, and picks
//
//	string                           the bytes of the string
//	[]byte (slice of a byte kind)    the bytes; empty decodes as nil
//	int, int8, int16, int32, int64   zig-zag varint (int is 64-bit on the wire)
//	uint, uint8 ... uint64, uintptr  uvarint
//	bool                             one byte, 0 or 1
//	float64, float32                 IEEE 754 bits, 8 or 4 bytes little-endian
//	zero-size types (struct{})       no bytes
//	anything else                    JSON[T]()
//
// Named types whose underlying type is one of those kinds get the built-in
// codec of that kind: for type UserID string, Default[UserID] is the
// string codec. The kind alone decides: methods such as MarshalJSON are not
// consulted for those kinds (pass JSON[T]() explicitly to use them).
// The built-in codecs read values through an unsafe pointer conversion to
// the underlying type, which is sound because a type and its underlying type
// share a memory layout; they do not reflect or allocate per value (except
// that Decode of a string or []byte copies it).
//
// Decoding is strict: an integer that does not fit the target type, a
// varint longer than it needs to be, trailing bytes, or a bool byte other
// than 0 and 1 is an error (every value has exactly one encoding).
func Default[T any]() Codec[T] {
	t := reflect.TypeFor[T]()
	switch t.Kind() {
	case reflect.String:
		return stringCodec[T]{}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return bytesCodec[T]{}
		}
	case reflect.Int:
		return intCodec[T, int]{}
	case reflect.Int8:
		return intCodec[T, int8]{}
	case reflect.Int16:
		return intCodec[T, int16]{}
	case reflect.Int32:
		return intCodec[T, int32]{}
	case reflect.Int64:
		return intCodec[T, int64]{}
	case reflect.Uint:
		return uintCodec[T, uint]{}
	case reflect.Uint8:
		return uintCodec[T, uint8]{}
	case reflect.Uint16:
		return uintCodec[T, uint16]{}
	case reflect.Uint32:
		return uintCodec[T, uint32]{}
	case reflect.Uint64:
		return uintCodec[T, uint64]{}
	case reflect.Uintptr:
		return uintCodec[T, uintptr]{}
	case reflect.Bool:
		return boolCodec[T]{}
	case reflect.Float64:
		return float64Codec[T]{}
	case reflect.Float32:
		return float32Codec[T]{}
	case reflect.Struct, reflect.Array:
		if t.Size() == 0 {
			return emptyCodec[T]{}
		}
	}
	return JSON[T]()
}

// JSON returns a codec that encodes with encoding/json (json.Marshal
// and json.Unmarshal), the fallback Default picks for types it has no
// built-in codec for (structs, maps, slices, pointers, interfaces).
//
// encoding/json silently drops unexported struct fields, which would make a
// restore lose data without a word (and make distinct keys collide). So the
// codec examines T once, here: if T contains an unexported struct field that
// encoding/json would drop, not tagged `json:"-"` and not inside a type with
// its own MarshalJSON or MarshalText method, every Append returns an error
// naming the field; the snapshot then fails instead of losing data. Give
// such a type its own Codec, or export the field, or tag it `json:"-"` to
// say that dropping it is intended.
func JSON[T any]() Codec[T] {
	t := reflect.TypeFor[T]()
	if path := jsonDropsField(t, t.String(), map[reflect.Type]bool{}); path != "" {
		return jsonCodec[T]{err: fmt.Errorf("state: no lossless codec for %v: encoding/json would drop unexported field %s; set a Codec for this state (or tag the field `json:\"-\"`)", t, path)}
	}
	return jsonCodec[T]{}
}

type jsonCodec[T any] struct{ err error }

func (c jsonCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	if c.err != nil {
		return dst, c.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("state: JSON codec: %w", err)
	}
	return append(dst, b...), nil
}

func (c jsonCodec[T]) Decode(src []byte) (T, error) {
	var v T
	if err := json.Unmarshal(src, &v); err != nil {
		return v, fmt.Errorf("state: JSON codec: %w", err)
	}
	return v, nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// jsonDropsField returns the path of an unexported struct field in t that
// encoding/json would silently drop, or "" if there is none. Types with their
// own JSON or text marshaling are trusted. seen breaks cycles.
func jsonDropsField(t reflect.Type, path string, seen map[reflect.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return ""
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return jsonDropsField(t.Elem(), path+"[]", seen)
	case reflect.Map:
		if p := jsonDropsField(t.Key(), path+"{key}", seen); p != "" {
			return p
		}
		return jsonDropsField(t.Elem(), path+"{value}", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Tag.Get("json") == "-" {
				continue
			}
			ft := f.Type
			if f.Anonymous {
				// encoding/json promotes the exported fields of embedded
				// structs, exported or not.
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					if p := jsonDropsField(ft, path+"."+f.Name, seen); p != "" {
						return p
					}
					continue
				}
			}
			if !f.IsExported() {
				return path + "." + f.Name
			}
			if p := jsonDropsField(f.Type, path+"."+f.Name, seen); p != "" {
				return p
			}
		}
	}
	return ""
}

var (
	errVarint   = errors.New("state: built-in codec: malformed varint or trailing bytes")
	errOverflow = errors.New("state: built-in codec: integer does not fit the type")
	errBool     = errors.New("state: built-in codec: bool must be one byte, 0 or 1")
	errFloat    = errors.New("state: built-in codec: float of the wrong length")
	errEmpty    = errors.New("state: built-in codec: zero-size value must have no bytes")
)

type stringCodec[T any] struct{}

func (stringCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	return append(dst, *(*string)(unsafe.Pointer(&v))...), nil
}

func (stringCodec[T]) Decode(src []byte) (T, error) {
	var v T
	*(*string)(unsafe.Pointer(&v)) = string(src)
	return v, nil
}

type bytesCodec[T any] struct{}

func (bytesCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	return append(dst, *(*[]byte)(unsafe.Pointer(&v))...), nil
}

func (bytesCodec[T]) Decode(src []byte) (T, error) {
	var v T
	if len(src) > 0 {
		*(*[]byte)(unsafe.Pointer(&v)) = append([]byte(nil), src...)
	}
	return v, nil
}

// overlong reports whether the varint src (whole, as binary.Uvarint
// read it) has a redundant final zero group: such a value also has a
// shorter encoding, and a key must have one encoding only, or entries
// restored under the long one would never be found again.
func overlong(src []byte) bool { return len(src) > 1 && src[len(src)-1] == 0 }

type signed interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64
}

type unsigned interface {
	~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

// intCodec encodes a T whose underlying type is I as a zig-zag varint.
type intCodec[T any, I signed] struct{}

func (intCodec[T, I]) Append(dst []byte, v T) ([]byte, error) {
	return binary.AppendVarint(dst, int64(*(*I)(unsafe.Pointer(&v)))), nil
}

func (intCodec[T, I]) Decode(src []byte) (T, error) {
	var v T
	x, n := binary.Varint(src)
	if n <= 0 || n != len(src) || overlong(src) {
		return v, errVarint
	}
	if int64(I(x)) != x {
		return v, errOverflow
	}
	*(*I)(unsafe.Pointer(&v)) = I(x)
	return v, nil
}

// uintCodec encodes a T whose underlying type is U as a uvarint.
type uintCodec[T any, U unsigned] struct{}

func (uintCodec[T, U]) Append(dst []byte, v T) ([]byte, error) {
	return binary.AppendUvarint(dst, uint64(*(*U)(unsafe.Pointer(&v)))), nil
}

func (uintCodec[T, U]) Decode(src []byte) (T, error) {
	var v T
	x, n := binary.Uvarint(src)
	if n <= 0 || n != len(src) || overlong(src) {
		return v, errVarint
	}
	if uint64(U(x)) != x {
		return v, errOverflow
	}
	*(*U)(unsafe.Pointer(&v)) = U(x)
	return v, nil
}

type boolCodec[T any] struct{}

func (boolCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	if *(*bool)(unsafe.Pointer(&v)) {
		return append(dst, 1), nil
	}
	return append(dst, 0), nil
}

func (boolCodec[T]) Decode(src []byte) (T, error) {
	var v T
	if len(src) != 1 || src[0] > 1 {
		return v, errBool
	}
	*(*bool)(unsafe.Pointer(&v)) = src[0] == 1
	return v, nil
}

type float64Codec[T any] struct{}

func (float64Codec[T]) Append(dst []byte, v T) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(*(*float64)(unsafe.Pointer(&v)))), nil
}

func (float64Codec[T]) Decode(src []byte) (T, error) {
	var v T
	if len(src) != 8 {
		return v, errFloat
	}
	*(*float64)(unsafe.Pointer(&v)) = math.Float64frombits(binary.LittleEndian.Uint64(src))
	return v, nil
}

type float32Codec[T any] struct{}

func (float32Codec[T]) Append(dst []byte, v T) ([]byte, error) {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(*(*float32)(unsafe.Pointer(&v)))), nil
}

func (float32Codec[T]) Decode(src []byte) (T, error) {
	var v T
	if len(src) != 4 {
		return v, errFloat
	}
	*(*float32)(unsafe.Pointer(&v)) = math.Float32frombits(binary.LittleEndian.Uint32(src))
	return v, nil
}

// emptyCodec is the codec of zero-size types such as struct{}: every value
// is the same, so it takes no bytes.
type emptyCodec[T any] struct{}

func (emptyCodec[T]) Append(dst []byte, _ T) ([]byte, error) { return dst, nil }

func (emptyCodec[T]) Decode(src []byte) (T, error) {
	var v T
	if len(src) != 0 {
		return v, errEmpty
	}
	return v, nil
}
