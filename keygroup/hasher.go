package keygroup

import (
	"reflect"
	"unsafe"
)

// Hasher returns the Java hash code of a key of type K, the value Flink would
// get from key.hashCode().
type Hasher[K any] func(K) int32

// HasherFor returns the Java-compatible Hasher for key type K and true when
// K's underlying type is one of
//
//	string  -> HashString (java.lang.String)
//	int32   -> HashInt32  (java.lang.Integer)
//	int64   -> HashInt64  (java.lang.Long)
//	int     -> HashInt64  (java.lang.Long; Go int is treated as a Java long)
//	bool    -> HashBool   (java.lang.Boolean)
//
// Named types work too: for type UserID string, HasherFor[UserID] hashes like
// HashString. For any other K (including interface types, even when the
// dynamic values would be supported) it returns nil, false.
//
// The kind of K is examined once, here; the returned function reads the key
// through an unsafe pointer conversion to its underlying type, so calling it
// performs no reflection and no heap allocation (invariant I7). That
// conversion is sound because a type and its underlying type share a memory
// layout.
func HasherFor[K comparable]() (Hasher[K], bool) {
	switch reflect.TypeFor[K]().Kind() {
	case reflect.String:
		return func(k K) int32 { return HashString(*(*string)(unsafe.Pointer(&k))) }, true
	case reflect.Int32:
		return func(k K) int32 { return HashInt32(*(*int32)(unsafe.Pointer(&k))) }, true
	case reflect.Int64:
		return func(k K) int32 { return HashInt64(*(*int64)(unsafe.Pointer(&k))) }, true
	case reflect.Int:
		return func(k K) int32 { return HashInt64(int64(*(*int)(unsafe.Pointer(&k)))) }, true
	case reflect.Bool:
		return func(k K) int32 { return HashBool(*(*bool)(unsafe.Pointer(&k))) }, true
	}
	return nil, false
}

// KeyGroupOf returns the key group, in [0, maxParallelism), of key under
// hasher h: Assign(h(key), maxParallelism). It panics if maxParallelism is not
// in [1, UpperBound].
func KeyGroupOf[K comparable](h Hasher[K], key K, maxParallelism int) int {
	return Assign(h(key), maxParallelism)
}
