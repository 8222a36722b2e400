package window

import (
	"fmt"
	"reflect"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
)

// Option configures a window operator. Options are applied in order; a
// later option of the same kind overrides an earlier one.
type Option func(*options)

type options struct {
	lateness int64
	lateTag  any // *runtime.OutputTag[T], checked against T when the operator is built
	codec    any // state.Codec[V] for the contents' type V, checked likewise
}

// AllowedLateness keeps the state of each event-time window until the
// watermark passes MaxTimestamp + d (the window's cleanup time) instead of
// dropping it when the window fires. A record that arrives in that time is
// added and the window fires again with the updated result. The default is
// 0: a window's state goes as soon as it fires. Processing-time windows
// ignore it (nothing is late in processing time). It panics if d is
// negative or not a whole number of milliseconds.
func AllowedLateness(d time.Duration) Option {
	ms := millis("AllowedLateness", "lateness", d, true)
	return func(o *options) { o.lateness = ms }
}

// LateOutput sends records that arrive too late for every window they
// belong to (see the package documentation, I4) to side output tag,
// unchanged and with their own timestamps; read them with
// weir.SideOutput(windowed, tag). Without it late records are only
// counted. tag's type must be the record type of the windowed stream; a
// mismatch panics when the window operator is added.
func LateOutput[T any](tag *weir.OutputTag[T]) Option {
	if tag == nil {
		panic("window: LateOutput: nil tag")
	}
	return func(o *options) { o.lateTag = tag }
}

// StateCodec sets how window contents are written to checkpoints and
// savepoints: c encodes the record type T for Reduce and Process and the
// accumulator type ACC for Aggregate. The default is state.DefaultCodec,
// which falls back to JSON for structs (and fails the checkpoint, rather
// than lose data, for types with unexported fields). A codec of another
// type panics when the operator is added.
func StateCodec[V any](c state.Codec[V]) Option {
	if c == nil {
		panic("window: StateCodec: nil codec")
	}
	return func(o *options) { o.codec = c }
}

// contentsCodec returns the StateCodec among opts, checked against the
// contents type V, or state.DefaultCodec[V]().
func contentsCodec[V any](fn, name string, opts []Option) state.Codec[V] {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.codec == nil {
		return state.DefaultCodec[V]()
	}
	c, ok := o.codec.(state.Codec[V])
	if !ok {
		panic(fmt.Sprintf("window: %s %q: StateCodec is a %T, but the window contents are %v",
			fn, name, o.codec, reflect.TypeFor[V]()))
	}
	return c
}

// resolve applies opts and checks them against the record type T.
func resolve[T any](fn, name string, a Assigner, opts []Option) (options, *runtime.OutputTag[T]) {
	if a == nil {
		panic(fmt.Sprintf("window: %s %q: nil Assigner", fn, name))
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	var tag *runtime.OutputTag[T]
	if o.lateTag != nil {
		t, ok := o.lateTag.(*runtime.OutputTag[T])
		if !ok {
			panic(fmt.Sprintf("window: %s %q: LateOutput tag is a %T, but the windowed records are %v",
				fn, name, o.lateTag, reflect.TypeFor[T]()))
		}
		tag = t
	}
	return o, tag
}
