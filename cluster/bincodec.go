package cluster

import (
	"encoding"
	"encoding/binary"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unsafe"

	json "github.com/goccy/go-json"
)

// binCodec is the exchange's default encoding (batch version 2, W2): a
// value's fields in the order of its type, with no names, compiled once
// per type by reflection into a tree of encoders and decoders that work
// on the value's memory, so no reflection runs per value but to allocate
// slices, pointers and maps of types other than map[string]any, []any,
// []byte and string.
//
// What crosses: bool, ints, uints, floats (NaN and the infinities
// included), strings, []byte, structs (their exported fields and the
// exported fields of embedded structs, less those tagged `json:"-"`,
// which is what JSON crosses), slices, arrays, pointers and maps of
// those, nil and empty kept apart, and empty interfaces. An empty
// interface keeps its dynamic type if it is one of nil, bool, string,
// the ints and uints, float32, float64, json.Number, []byte,
// map[string]any and []any (what decoders produce, and what a pipeline's
// records hold); one that holds another type crosses as JSON would carry
// it: JSON-encoded, and decoded into the interface by encoding/json's
// rules (a struct becomes a map[string]any). So a keyed task sees the
// values the local job would: it never re-encodes them.
//
// A type that holds anything else (a type with its own JSON, text or
// binary form, such as time.Time; a non-empty interface; a channel, a
// function, a complex number; a slice or map of a type that encodes to
// no bytes) is not compiled: newBinCodec returns nil, and the job's
// exchange uses JSON (batch version 1) for it, decided once per type.
//
// Decode never panics on bad bytes (it returns an error), and copies
// what it keeps: the values it returns do not alias the batch.
type binCodec[T any] struct{ c *typeCodec }

type encoder struct {
	b   []byte
	err error
}

type decoder struct {
	b   []byte
	err error
	// keys, if set, interns the keys of the map[string]any values the
	// decoder reads (keyTable).
	keys *keyTable
}

// keyTable interns the keys of decoded map[string]any values across the
// values one reader decodes: a pipeline record's field names repeat in
// every record, and a key met before is the string decoded then, not a
// new one. It keeps at most maxInterned keys of at most maxInternedLen
// bytes each (keys beyond are decoded as any string), so a map keyed by
// data (user ids, ...) costs one failed lookup a key, not memory.
type keyTable struct{ m map[string]string }

const (
	maxInterned    = 4096
	maxInternedLen = 64
)

// typeCodec is the compiled encoder and decoder of one type. The pointer
// is what a container's codec calls through, so that a recursive type
// (type Node struct{ Next *Node }) refers to itself while it is compiled.
type typeCodec struct {
	enc func(e *encoder, p unsafe.Pointer)
	dec func(d *decoder, p unsafe.Pointer)
	// empty: the encoding can be no bytes (a struct with no crossing
	// fields, a zero-length array); such a type cannot be a slice's or a
	// map's element, whose length a decoder bounds by the bytes left.
	empty bool
}

// newBinCodec compiles T's codec, or returns nil if T holds a type it
// cannot encode faithfully (then the exchange uses JSON).
func newBinCodec[T any]() *binCodec[T] {
	c := compiler{seen: map[reflect.Type]*typeCodec{}}
	tc := c.compile(reflect.TypeFor[T]())
	if tc == nil {
		return nil
	}
	return &binCodec[T]{c: tc}
}

// encodeTo appends *v's encoding to e.b (an error, from an interface
// holding what JSON cannot encode, goes to e.err). The exchange calls it
// with an encoder and a value it keeps, so that neither escapes per value:
// a value without interfaces encodes with no allocation.
func (c *binCodec[T]) encodeTo(e *encoder, v *T) { c.c.enc(e, unsafe.Pointer(v)) }

// appendEncode appends v's encoding to b.
func (c *binCodec[T]) appendEncode(b []byte, v T) ([]byte, error) {
	e := encoder{b: b}
	c.encodeTo(&e, &v)
	return e.b, e.err
}

func (c *binCodec[T]) Encode(v T) ([]byte, error) { return c.appendEncode(nil, v) }

func (c *binCodec[T]) Decode(b []byte) (T, error) { return c.decodeWith(b, nil) }

// decodeWith is Decode, interning map keys in keys if it is not nil.
func (c *binCodec[T]) decodeWith(b []byte, keys *keyTable) (T, error) {
	var v T
	d := decoder{b: b, keys: keys}
	c.c.dec(&d, unsafe.Pointer(&v))
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the value", len(d.b))
	}
	if d.err != nil {
		var zero T
		return zero, fmt.Errorf("cluster: binary exchange value: %w", d.err)
	}
	return v, nil
}

var errShort = errors.New("truncated value")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a varint that must fit in bits.
func (d *decoder) int(bits int) int64 {
	v := d.varint()
	if bits < 64 && (v < -1<<(bits-1) || v >= 1<<(bits-1)) {
		d.fail(fmt.Errorf("%d overflows int%d", v, bits))
		return 0
	}
	return v
}

func (d *decoder) uint(bits int) uint64 {
	v := d.uvarint()
	if bits < 64 && v >= 1<<bits {
		d.fail(fmt.Errorf("%d overflows uint%d", v, bits))
		return 0
	}
	return v
}

func (d *decoder) fixed(n int) []byte {
	if len(d.b) < n {
		d.fail(errShort)
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

// length reads a length written as n+1 (0: nil), each element taking at
// least one byte: ok false for nil (or an error).
func (d *decoder) length() (n int, ok bool) {
	v := d.uvarint()
	if v == 0 {
		return 0, false
	}
	if v-1 > uint64(len(d.b)) {
		d.fail(errShort)
		return 0, false
	}
	return int(v - 1), true
}

func (d *decoder) string() string {
	v := d.uvarint()
	if v > uint64(len(d.b)) {
		d.fail(errShort)
		return ""
	}
	s := string(d.b[:v])
	d.b = d.b[v:]
	return s
}

// key decodes a string, interned in d.keys when d has them.
func (d *decoder) key() string {
	if d.keys == nil {
		return d.string()
	}
	v := d.uvarint()
	if v > uint64(len(d.b)) {
		d.fail(errShort)
		return ""
	}
	b := d.b[:v]
	d.b = d.b[v:]
	if s, ok := d.keys.m[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(s) <= maxInternedLen && len(d.keys.m) < maxInterned {
		if d.keys.m == nil {
			d.keys.m = make(map[string]string)
		}
		d.keys.m[s] = s
	}
	return s
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(errors.New("bad bool"))
	return false
}

func appendLen(b []byte, n int, isNil bool) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

var (
	anyType      = reflect.TypeFor[any]()
	stringType   = reflect.TypeFor[string]()
	ownFormTypes = []reflect.Type{
		reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler](),
		reflect.TypeFor[json.MarshalerContext](), reflect.TypeFor[json.UnmarshalerContext](),
		reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](),
		reflect.TypeFor[encoding.BinaryMarshaler](), reflect.TypeFor[encoding.BinaryUnmarshaler](),
	}
)

type compiler struct{ seen map[reflect.Type]*typeCodec }

// compile returns t's codec, or nil if t cannot be encoded faithfully.
func (c *compiler) compile(t reflect.Type) *typeCodec {
	if tc, ok := c.seen[t]; ok {
		return tc
	}
	if t.Kind() != reflect.Interface {
		for _, m := range ownFormTypes {
			if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
				return nil
			}
		}
	}
	tc := &typeCodec{}
	c.seen[t] = tc
	if !c.build(t, tc) {
		return nil
	}
	return tc
}

func (c *compiler) build(t reflect.Type, tc *typeCodec) bool {
	switch t.Kind() {
	case reflect.Bool:
		tc.enc = func(e *encoder, p unsafe.Pointer) {
			v := byte(0)
			if *(*bool)(p) {
				v = 1
			}
			e.b = append(e.b, v)
		}
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*bool)(p) = d.bool() }
	case reflect.Int:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendVarint(e.b, int64(*(*int)(p))) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*int)(p) = int(d.int(strconv.IntSize)) }
	case reflect.Int8:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendVarint(e.b, int64(*(*int8)(p))) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*int8)(p) = int8(d.int(8)) }
	case reflect.Int16:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendVarint(e.b, int64(*(*int16)(p))) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*int16)(p) = int16(d.int(16)) }
	case reflect.Int32:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendVarint(e.b, int64(*(*int32)(p))) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*int32)(p) = int32(d.int(32)) }
	case reflect.Int64:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendVarint(e.b, *(*int64)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*int64)(p) = d.int(64) }
	case reflect.Uint, reflect.Uintptr:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendUvarint(e.b, uint64(*(*uint)(p))) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*uint)(p) = uint(d.uint(strconv.IntSize)) }
	case reflect.Uint8:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = append(e.b, *(*uint8)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*uint8)(p) = d.byte() }
	case reflect.Uint16:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendUvarint(e.b, uint64(*(*uint16)(p))) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*uint16)(p) = uint16(d.uint(16)) }
	case reflect.Uint32:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendUvarint(e.b, uint64(*(*uint32)(p))) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*uint32)(p) = uint32(d.uint(32)) }
	case reflect.Uint64:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.AppendUvarint(e.b, *(*uint64)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*uint64)(p) = d.uint(64) }
	case reflect.Float32:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.LittleEndian.AppendUint32(e.b, *(*uint32)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) {
			if b := d.fixed(4); b != nil {
				*(*uint32)(p) = binary.LittleEndian.Uint32(b)
			}
		}
	case reflect.Float64:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = binary.LittleEndian.AppendUint64(e.b, *(*uint64)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) {
			if b := d.fixed(8); b != nil {
				*(*uint64)(p) = binary.LittleEndian.Uint64(b)
			}
		}
	case reflect.String:
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.b = appendString(e.b, *(*string)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*string)(p) = d.string() }
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return false
		}
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.any(*(*any)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*any)(p) = d.any() }
	case reflect.Pointer:
		elem := c.compile(t.Elem())
		if elem == nil {
			return false
		}
		et := t.Elem()
		tc.enc = func(e *encoder, p unsafe.Pointer) {
			q := *(*unsafe.Pointer)(p)
			if q == nil {
				e.b = append(e.b, 0)
				return
			}
			e.b = append(e.b, 1)
			elem.enc(e, q)
		}
		tc.dec = func(d *decoder, p unsafe.Pointer) {
			switch d.byte() {
			case 0:
			case 1:
				q := reflect.New(et).UnsafePointer()
				elem.dec(d, q)
				*(*unsafe.Pointer)(p) = q
			default:
				d.fail(errors.New("bad pointer flag"))
			}
		}
	case reflect.Array:
		elem := c.compile(t.Elem())
		if elem == nil {
			return false
		}
		n, size := t.Len(), t.Elem().Size()
		tc.empty = n == 0 || elem.empty
		tc.enc = func(e *encoder, p unsafe.Pointer) {
			for i := range n {
				elem.enc(e, unsafe.Add(p, uintptr(i)*size))
			}
		}
		tc.dec = func(d *decoder, p unsafe.Pointer) {
			for i := 0; i < n && d.err == nil; i++ {
				elem.dec(d, unsafe.Add(p, uintptr(i)*size))
			}
		}
	case reflect.Slice:
		return c.slice(t, tc)
	case reflect.Map:
		return c.mapOf(t, tc)
	case reflect.Struct:
		return c.structOf(t, tc)
	default: // complex, chan, func, unsafe.Pointer
		return false
	}
	return true
}

func (c *compiler) slice(t reflect.Type, tc *typeCodec) bool {
	et := t.Elem()
	if et.Kind() == reflect.Uint8 && c.compile(et) != nil {
		tc.enc = func(e *encoder, p unsafe.Pointer) {
			s := *(*[]byte)(p)
			e.b = appendLen(e.b, len(s), s == nil)
			e.b = append(e.b, s...)
		}
		tc.dec = func(d *decoder, p unsafe.Pointer) {
			if n, ok := d.length(); ok {
				*(*[]byte)(p) = append(make([]byte, 0, n), d.fixed(n)...)
			}
		}
		return true
	}
	if et == anyType {
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.slice(*(*[]any)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*[]any)(p) = d.slice() }
		return true
	}
	elem := c.compile(et)
	if elem == nil || elem.empty {
		return false
	}
	size := et.Size()
	tc.enc = func(e *encoder, p unsafe.Pointer) {
		h := (*sliceHeader)(p)
		e.b = appendLen(e.b, h.len, h.data == nil)
		for i := range h.len {
			elem.enc(e, unsafe.Add(h.data, uintptr(i)*size))
		}
	}
	tc.dec = func(d *decoder, p unsafe.Pointer) {
		n, ok := d.length()
		if !ok {
			return
		}
		data := reflect.MakeSlice(t, n, n).UnsafePointer()
		for i := 0; i < n && d.err == nil; i++ {
			elem.dec(d, unsafe.Add(data, uintptr(i)*size))
		}
		*(*sliceHeader)(p) = sliceHeader{data: data, len: n, cap: n}
	}
	return true
}

func (c *compiler) mapOf(t reflect.Type, tc *typeCodec) bool {
	kt, vt := t.Key(), t.Elem()
	if kt == stringType && vt == anyType {
		tc.enc = func(e *encoder, p unsafe.Pointer) { e.object(*(*map[string]any)(p)) }
		tc.dec = func(d *decoder, p unsafe.Pointer) { *(*map[string]any)(p) = d.object() }
		return true
	}
	kc, vc := c.compile(kt), c.compile(vt)
	if kc == nil || vc == nil || kc.empty {
		return false
	}
	tc.enc = func(e *encoder, p unsafe.Pointer) {
		m := reflect.NewAt(t, p).Elem()
		e.b = appendLen(e.b, m.Len(), m.IsNil())
		k, v := reflect.New(kt).Elem(), reflect.New(vt).Elem()
		for it := m.MapRange(); it.Next(); {
			k.SetIterKey(it)
			v.SetIterValue(it)
			kc.enc(e, k.Addr().UnsafePointer())
			vc.enc(e, v.Addr().UnsafePointer())
		}
	}
	tc.dec = func(d *decoder, p unsafe.Pointer) {
		n, ok := d.length()
		if !ok {
			return
		}
		m := reflect.MakeMapWithSize(t, n)
		for i := 0; i < n && d.err == nil; i++ {
			k, v := reflect.New(kt), reflect.New(vt)
			kc.dec(d, k.UnsafePointer())
			vc.dec(d, v.UnsafePointer())
			m.SetMapIndex(k.Elem(), v.Elem())
		}
		*(*unsafe.Pointer)(p) = m.UnsafePointer()
	}
	return true
}

type fieldCodec struct {
	off uintptr
	c   *typeCodec
}

func (c *compiler) structOf(t reflect.Type, tc *typeCodec) bool {
	var fields []fieldCodec
	tc.empty = true
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("json") == "-" {
			continue
		}
		if !f.IsExported() {
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct:
				// JSON crosses the exported fields of an embedded
				// struct of an unexported type; so does the struct's
				// codec, which crosses only exported fields.
			case f.Anonymous && f.Type.Kind() == reflect.Pointer:
				// JSON's rules for these (set only if allocated) are
				// not worth mirroring.
				return false
			default:
				continue
			}
		}
		fc := c.compile(f.Type)
		if fc == nil {
			return false
		}
		tc.empty = tc.empty && fc.empty
		fields = append(fields, fieldCodec{off: f.Offset, c: fc})
	}
	tc.enc = func(e *encoder, p unsafe.Pointer) {
		for _, f := range fields {
			f.c.enc(e, unsafe.Add(p, f.off))
		}
	}
	tc.dec = func(d *decoder, p unsafe.Pointer) {
		for _, f := range fields {
			if d.err != nil {
				return
			}
			f.c.dec(d, unsafe.Add(p, f.off))
		}
	}
	return true
}

// The tags of an empty interface's dynamic types.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagString
	tagFloat64
	tagInt
	tagInt64
	tagNumber
	tagObject // map[string]any
	tagArray  // []any
	tagInt8
	tagInt16
	tagInt32
	tagUint
	tagUint8
	tagUint16
	tagUint32
	tagUint64
	tagFloat32
	tagBytes
	// tagJSON: another type, JSON-encoded; decoded into the interface
	// by encoding/json's rules.
	tagJSON
)

func (e *encoder) any(v any) {
	switch x := v.(type) {
	case nil:
		e.b = append(e.b, tagNil)
	case bool:
		if x {
			e.b = append(e.b, tagTrue)
		} else {
			e.b = append(e.b, tagFalse)
		}
	case string:
		e.b = appendString(append(e.b, tagString), x)
	case float64:
		e.b = binary.LittleEndian.AppendUint64(append(e.b, tagFloat64), math.Float64bits(x))
	case int:
		e.b = binary.AppendVarint(append(e.b, tagInt), int64(x))
	case int64:
		e.b = binary.AppendVarint(append(e.b, tagInt64), x)
	case stdjson.Number:
		e.b = appendString(append(e.b, tagNumber), string(x))
	case map[string]any:
		e.b = append(e.b, tagObject)
		e.object(x)
	case []any:
		e.b = append(e.b, tagArray)
		e.slice(x)
	case int8:
		e.b = binary.AppendVarint(append(e.b, tagInt8), int64(x))
	case int16:
		e.b = binary.AppendVarint(append(e.b, tagInt16), int64(x))
	case int32:
		e.b = binary.AppendVarint(append(e.b, tagInt32), int64(x))
	case uint:
		e.b = binary.AppendUvarint(append(e.b, tagUint), uint64(x))
	case uint8:
		e.b = append(e.b, tagUint8, x)
	case uint16:
		e.b = binary.AppendUvarint(append(e.b, tagUint16), uint64(x))
	case uint32:
		e.b = binary.AppendUvarint(append(e.b, tagUint32), uint64(x))
	case uint64:
		e.b = binary.AppendUvarint(append(e.b, tagUint64), x)
	case float32:
		e.b = binary.LittleEndian.AppendUint32(append(e.b, tagFloat32), math.Float32bits(x))
	case []byte:
		e.b = appendLen(append(e.b, tagBytes), len(x), x == nil)
		e.b = append(e.b, x...)
	default:
		j, err := json.Marshal(x)
		if err != nil {
			if e.err == nil {
				e.err = err
			}
			return
		}
		e.b = appendString(append(e.b, tagJSON), string(j))
	}
}

func (e *encoder) object(m map[string]any) {
	e.b = appendLen(e.b, len(m), m == nil)
	for k, v := range m {
		e.b = appendString(e.b, k)
		e.any(v)
	}
}

func (e *encoder) slice(s []any) {
	e.b = appendLen(e.b, len(s), s == nil)
	for _, v := range s {
		e.any(v)
	}
}

func (d *decoder) any() any {
	switch tag := d.byte(); tag {
	case tagNil:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagString:
		return d.string()
	case tagFloat64:
		if b := d.fixed(8); b != nil {
			return math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
	case tagInt:
		return int(d.int(strconv.IntSize))
	case tagInt64:
		return d.int(64)
	case tagNumber:
		return stdjson.Number(d.string())
	case tagObject:
		return d.object()
	case tagArray:
		return d.slice()
	case tagInt8:
		return int8(d.int(8))
	case tagInt16:
		return int16(d.int(16))
	case tagInt32:
		return int32(d.int(32))
	case tagUint:
		return uint(d.uint(strconv.IntSize))
	case tagUint8:
		return d.byte()
	case tagUint16:
		return uint16(d.uint(16))
	case tagUint32:
		return uint32(d.uint(32))
	case tagUint64:
		return d.uint(64)
	case tagFloat32:
		if b := d.fixed(4); b != nil {
			return math.Float32frombits(binary.LittleEndian.Uint32(b))
		}
	case tagBytes:
		if n, ok := d.length(); ok {
			return append(make([]byte, 0, n), d.fixed(n)...)
		}
		return []byte(nil)
	case tagJSON:
		var v any
		if err := json.Unmarshal([]byte(d.string()), &v); err != nil {
			d.fail(err)
			return nil
		}
		return v
	default:
		d.fail(fmt.Errorf("unknown type tag %d", tag))
	}
	return nil
}

func (d *decoder) object() map[string]any {
	n, ok := d.length()
	if !ok {
		return nil
	}
	m := make(map[string]any, n/2)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.key()
		m[k] = d.any()
	}
	return m
}

func (d *decoder) slice() []any {
	n, ok := d.length()
	if !ok {
		return nil
	}
	s := make([]any, n)
	for i := 0; i < n && d.err == nil; i++ {
		s[i] = d.any()
	}
	return s
}
