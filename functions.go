package weir

import "github.com/weirproject/weir/runtime"

// Map applies f to every record; the result keeps the record's timestamp.
func Map[T, U any](s Stream[T], name string, f func(T) U) Stream[U] {
	return Transform(s, name, func() runtime.OneInputOperator[T, U] { return &mapOp[T, U]{f: f} })
}

type mapOp[T, U any] struct {
	runtime.Base[U]
	f func(T) U
}

func (o *mapOp[T, U]) ProcessRecord(r Record[T]) error { return o.ProcessRecordRef(&r) }

// ProcessRecordRef implements runtime.RecordRefProcessor (as do the other
// operators of this file): a record held by the runtime reaches f with one
// copy, not two.
func (o *mapOp[T, U]) ProcessRecordRef(r *Record[T]) error {
	o.Out.Collect(Record[U]{Value: o.f(r.Value), Timestamp: r.Timestamp})
	return nil
}

// MapErr is Map for functions that can fail; an error fails the job.
func MapErr[T, U any](s Stream[T], name string, f func(T) (U, error)) Stream[U] {
	return Transform(s, name, func() runtime.OneInputOperator[T, U] { return &mapErrOp[T, U]{f: f} })
}

type mapErrOp[T, U any] struct {
	runtime.Base[U]
	f func(T) (U, error)
}

func (o *mapErrOp[T, U]) ProcessRecord(r Record[T]) error { return o.ProcessRecordRef(&r) }

func (o *mapErrOp[T, U]) ProcessRecordRef(r *Record[T]) error {
	v, err := o.f(r.Value)
	if err != nil {
		return err
	}
	o.Out.Collect(Record[U]{Value: v, Timestamp: r.Timestamp})
	return nil
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s Stream[T], name string, keep func(T) bool) Stream[T] {
	return Transform(s, name, func() runtime.OneInputOperator[T, T] { return &filterOp[T]{keep: keep} })
}

type filterOp[T any] struct {
	runtime.Base[T]
	keep func(T) bool
}

func (o *filterOp[T]) ProcessRecord(r Record[T]) error { return o.ProcessRecordRef(&r) }

func (o *filterOp[T]) ProcessRecordRef(r *Record[T]) error {
	if o.keep(r.Value) {
		o.Out.Collect(*r)
	}
	return nil
}

// FlatMap calls f for every record; f emits any number of values through
// emit, each with the input record's timestamp. emit is valid only during
// the call.
func FlatMap[T, U any](s Stream[T], name string, f func(v T, emit func(U))) Stream[U] {
	return Transform(s, name, func() runtime.OneInputOperator[T, U] { return &flatMapOp[T, U]{f: f} })
}

type flatMapOp[T, U any] struct {
	runtime.Base[U]
	f    func(T, func(U))
	ts   int64
	emit func(U)
}

func (o *flatMapOp[T, U]) Open(ctx *runtime.Context, out runtime.Output[U]) error {
	o.Base.Open(ctx, out)
	o.emit = func(v U) { o.Out.Collect(Record[U]{Value: v, Timestamp: o.ts}) }
	return nil
}

func (o *flatMapOp[T, U]) ProcessRecord(r Record[T]) error { return o.ProcessRecordRef(&r) }

func (o *flatMapOp[T, U]) ProcessRecordRef(r *Record[T]) error {
	o.ts = r.Timestamp
	o.f(r.Value, o.emit)
	return nil
}
