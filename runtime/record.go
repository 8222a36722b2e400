package runtime

import (
	"math"
	"sync/atomic"
)

// NoTimestamp is the timestamp of a record that carries no event time.
const NoTimestamp int64 = math.MinInt64

// Record is one stream element with its event time in Unix milliseconds.
//
// Records are passed by value. A Record handed to Output.Collect or to an
// operator belongs to the callee only for the duration of the call: the
// runtime reuses the buffer that held it, so an operator that keeps a record
// keeps a copy (which a plain assignment is).
type Record[T any] struct {
	Value     T
	Timestamp int64
}

// Output receives what an operator emits. The runtime implements it; an
// operator gets one in Open and calls it only from its subtask goroutine.
type Output[T any] interface {
	// Collect emits a record.
	Collect(r Record[T])
	// EmitWatermark forwards a watermark. Operators call it after they have
	// emitted every record that the watermark covers.
	EmitWatermark(ts int64)
	// EmitIdle forwards the idle (true) or active (false) status.
	EmitIdle(idle bool)
}

// refOutput is implemented by the runtime's outputs that can take a record
// by pointer (a chained operator, a channel writer), with the ownership of
// Output.Collect: *r is read during the call only.
type refOutput[T any] interface {
	collectRef(r *Record[T])
}

// byValue adapts any Output to refOutput.
type byValue[T any] struct{ o Output[T] }

func (b byValue[T]) collectRef(r *Record[T]) { b.o.Collect(*r) }

// refOutputOf returns o as a refOutput, looking through the main output of
// withSides; an Output without the method gets the byValue adapter. It
// returns nil for a chained operator that takes records by value only, so
// that the caller calls its Collect directly (no extra call per record).
func refOutputOf[T any](o Output[T]) refOutput[T] {
	if w, ok := o.(withSides[T]); ok {
		o = w.main
	}
	if r, ok := o.(refOutput[T]); ok {
		if v, ok := r.(interface{ takesRef() bool }); ok && !v.takesRef() {
			return nil
		}
		return r
	}
	return byValue[T]{o}
}

// allOutput is implemented by an Output that takes a run of records in one
// call (a chained one-input operator): collectAll(recs) is Collect for each
// of them in order. recs is read during the call only.
type allOutput[T any] interface {
	collectAll(recs []Record[T])
}

// allOutputOf returns o as an allOutput, looking through the main output
// of withSides, or nil if it takes records one by one.
func allOutputOf[T any](o Output[T]) allOutput[T] {
	if w, ok := o.(withSides[T]); ok {
		o = w.main
	}
	a, _ := o.(allOutput[T])
	return a
}

// OutputTag names a side output of type T. Create tags with NewOutputTag
// and keep them in variables: two tags are the same side output only if
// they are the same tag.
type OutputTag[T any] struct {
	id   int
	name string
}

var tagIDs atomic.Int64

// NewOutputTag returns a new side-output tag. The name shows in plans,
// metrics and errors.
func NewOutputTag[T any](name string) *OutputTag[T] {
	return &OutputTag[T]{id: int(tagIDs.Add(1)), name: name}
}

// Name returns the tag's name.
func (t *OutputTag[T]) Name() string { return t.name }

// ID returns the tag's process-unique id.
func (t *OutputTag[T]) ID() int { return t.id }
