package state

import "github.com/weirproject/weir/codec"

// Codec turns values of type T into bytes and back, for snapshots and
// savepoints. It is codec.Codec, which documents the contract; package
// codec is below state so that timers and operators share it without
// importing state.
type Codec[T any] = codec.Codec[T]

// DefaultCodec returns the codec a state, key or namespace of type T gets
// when none is given: codec.Default[T]() (see there for the choice per
// kind).
func DefaultCodec[T any]() Codec[T] { return codec.Default[T]() }

// JSONCodec returns the encoding/json codec, codec.JSON[T]() (see there for
// the types it refuses).
func JSONCodec[T any]() Codec[T] { return codec.JSON[T]() }
