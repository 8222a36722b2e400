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
	trigger  Trigger
	evictor  Evictor
}

// WithTrigger sets the window's Trigger, replacing the assigner's default
// (EventTimeTrigger, ProcessingTimeTrigger, or the default of Global and
// the count assigners). With a merging assigner (Session) the trigger must
// merge (CanMerge, and a merge function for each of its States), or
// adding the operator panics. Allowed lateness and the cleanup of window
// state (I3, I5) stay as they are: the trigger decides only when a window
// fires and purges. It panics if t is nil.
func WithTrigger(t Trigger) Option {
	if t == nil {
		panic("window: WithTrigger: nil trigger")
	}
	return func(o *options) { o.trigger = t }
}

// WithEvictor sets the window's Evictor, replacing the assigner's default
// (CountSliding's). A window with an evictor keeps all its records (see
// Evictor), and its StateCodec, if any, encodes the record type T for
// every window function. It panics if e is nil.
func WithEvictor(e Evictor) Option {
	if e == nil {
		panic("window: WithEvictor: nil evictor")
	}
	return func(o *options) { o.evictor = e }
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

// apply applies opts in order.
func apply(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// evictorOf returns the evictor among opts, or a's default, or nil.
func evictorOf(a Assigner, opts []Option) Evictor {
	if e := apply(opts).evictor; e != nil {
		return e
	}
	if d, ok := a.(DefaultEvictorAssigner); ok {
		return d.DefaultEvictor()
	}
	return nil
}

// triggerOf returns the trigger among opts, or a's default, or nil for
// the built-in default path.
func triggerOf(a Assigner, o options) Trigger {
	if o.trigger != nil {
		return o.trigger
	}
	if d, ok := a.(DefaultTriggerAssigner); ok {
		return d.DefaultTrigger()
	}
	return nil
}

// contentsCodec returns the StateCodec among opts, checked against the
// contents type V, or state.DefaultCodec[V]().
func contentsCodec[V any](fn, name string, opts []Option) state.Codec[V] {
	o := apply(opts)
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
	o := apply(opts)
	if t := triggerOf(a, o); t != nil {
		checkTrigger(fn, name, a, t)
	}
	if e, ok := evictorOf(a, opts).(checkRecordType); ok {
		if _, ok := e.recordType().(*T); !ok {
			panic(fmt.Sprintf("window: %s %q: evictor %v is for records of another type than the windowed %v",
				fn, name, e, reflect.TypeFor[T]()))
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

// checkTrigger panics, naming the problem, if t cannot serve assigner a:
// a merging assigner needs a trigger that merges, with a merge function
// for each of its states; state names must be unique.
func checkTrigger(fn, name string, a Assigner, t Trigger) {
	if a.IsMerging() && !t.CanMerge() {
		panic(fmt.Sprintf("window: %s %q: trigger %v cannot merge windows (CanMerge is false), but %v merges them; "+
			"use a trigger that merges or a non-merging assigner", fn, name, t, a))
	}
	seen := map[string]bool{}
	for _, s := range t.States() {
		if s == nil {
			panic(fmt.Sprintf("window: %s %q: trigger %v declares a nil TriggerState", fn, name, t))
		}
		if seen[s.name] {
			panic(fmt.Sprintf("window: %s %q: trigger %v declares state %q twice; state names must be unique", fn, name, t, s.name))
		}
		seen[s.name] = true
		if a.IsMerging() && s.merge == nil {
			panic(fmt.Sprintf("window: %s %q: trigger %v: state %q has no merge function, but %v merges windows; "+
				"give NewTriggerState a merge function", fn, name, t, s.name, a))
		}
	}
}
