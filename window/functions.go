package window

import (
	"fmt"

	"github.com/weirproject/weir"
)

// AggregateFunction aggregates the records of a window incrementally: the
// window keeps one accumulator, not the records (Flink's AggregateFunction).
//
// CreateAccumulator starts an empty accumulator, Add folds in one record,
// Result turns the accumulator into the window's output when it fires,
// Merge combines two accumulators when session windows merge (it is never
// called for tumbling or sliding windows). Add and Merge may modify and
// return their accumulator argument; an accumulator that holds references
// (a slice, a map, a pointer) must not be shared with the Result value
// unless the window is never fired twice (AllowedLateness 0).
// All methods run on the window operator's subtask goroutine.
type AggregateFunction[T, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(v T, acc ACC) ACC
	Result(acc ACC) OUT
	Merge(a, b ACC) ACC
}

// AggregateFuncs adapts functions to AggregateFunction. CreateFn nil
// starts from the zero ACC; AddFn and ResultFn are required; MergeFn is
// required for merging (session) assigners only.
type AggregateFuncs[T, ACC, OUT any] struct {
	// CreateFn is CreateAccumulator (nil: the zero ACC).
	CreateFn func() ACC
	// AddFn is Add (required).
	AddFn func(v T, acc ACC) ACC
	// ResultFn is Result (required).
	ResultFn func(acc ACC) OUT
	// MergeFn is Merge (required for session windows).
	MergeFn func(a, b ACC) ACC
}

// CreateAccumulator calls CreateFn, or returns the zero ACC.
func (f AggregateFuncs[T, ACC, OUT]) CreateAccumulator() ACC {
	if f.CreateFn == nil {
		var zero ACC
		return zero
	}
	return f.CreateFn()
}

// Add calls AddFn.
func (f AggregateFuncs[T, ACC, OUT]) Add(v T, acc ACC) ACC { return f.AddFn(v, acc) }

// Result calls ResultFn.
func (f AggregateFuncs[T, ACC, OUT]) Result(acc ACC) OUT { return f.ResultFn(acc) }

// Merge calls MergeFn.
func (f AggregateFuncs[T, ACC, OUT]) Merge(a, b ACC) ACC { return f.MergeFn(a, b) }

// Result is a window's result together with its key and window, the
// output of ReduceKeyed and AggregateKeyed.
type Result[K, V any] struct {
	// Key is the key of the window.
	Key K
	// Window is the window that fired.
	Window Window
	// Value is the window function's result.
	Value V
}

// Reduce windows ks with a and combines the records of each (key, window)
// with f, incrementally: the window keeps one T. f(a, b) gets the
// accumulated value first and the new record second. Each firing emits the
// accumulated value with timestamp Window.MaxTimestamp().
func Reduce[K comparable, T any](ks weir.KeyedStream[K, T], name string, a Assigner, f func(a, b T) T, opts ...Option) weir.Stream[T] {
	return ReduceProcess(ks, name, a, f, func(_ K, _ Window, v T, emit func(T)) error { emit(v); return nil }, opts...)
}

// ReduceKeyed is Reduce emitting the key and window with each result.
func ReduceKeyed[K comparable, T any](ks weir.KeyedStream[K, T], name string, a Assigner, f func(a, b T) T, opts ...Option) weir.Stream[Result[K, T]] {
	return ReduceProcess(ks, name, a, f, func(k K, w Window, v T, emit func(Result[K, T])) error {
		emit(Result[K, T]{Key: k, Window: w, Value: v})
		return nil
	}, opts...)
}

// ReduceProcess is Reduce whose firings go through p, which sees the key,
// the window and the reduced value, and emits any number of outputs
// (Flink's reduce(reduceFn, windowFn)). emit is valid only during the call;
// outputs carry timestamp w.MaxTimestamp(). An error from p fails the job.
func ReduceProcess[K comparable, T, OUT any](ks weir.KeyedStream[K, T], name string, a Assigner,
	f func(a, b T) T, p func(key K, w Window, reduced T, emit func(OUT)) error, opts ...Option) weir.Stream[OUT] {
	if f == nil || p == nil {
		panic(fmt.Sprintf("window: Reduce %q: nil function", name))
	}
	codec := contentsCodec[T]("Reduce", name, opts)
	return build(ks, "Reduce", name, a, opts, func() contents[K, T, OUT] {
		return &incremental[K, T, T, OUT]{
			codec:    codec,
			firstFn:  func(v T) T { return v },
			addFn:    f,
			mergeFn:  f,
			finishFn: p,
		}
	}, func(k K, w Window, elems []T, emit func(OUT)) error {
		acc := elems[0]
		for _, v := range elems[1:] {
			acc = f(acc, v)
		}
		return p(k, w, acc, emit)
	})
}

// Aggregate windows ks with a and aggregates the records of each (key,
// window) with agg, incrementally: the window keeps one accumulator. Each
// firing emits agg.Result with timestamp Window.MaxTimestamp().
func Aggregate[K comparable, T, ACC, OUT any](ks weir.KeyedStream[K, T], name string, a Assigner, agg AggregateFunction[T, ACC, OUT], opts ...Option) weir.Stream[OUT] {
	return AggregateProcess(ks, name, a, agg, func(_ K, _ Window, v OUT, emit func(OUT)) error { emit(v); return nil }, opts...)
}

// AggregateKeyed is Aggregate emitting the key and window with each result.
func AggregateKeyed[K comparable, T, ACC, OUT any](ks weir.KeyedStream[K, T], name string, a Assigner, agg AggregateFunction[T, ACC, OUT], opts ...Option) weir.Stream[Result[K, OUT]] {
	return AggregateProcess(ks, name, a, agg, func(k K, w Window, v OUT, emit func(Result[K, OUT])) error {
		emit(Result[K, OUT]{Key: k, Window: w, Value: v})
		return nil
	}, opts...)
}

// AggregateProcess is Aggregate whose firings go through p, which sees the
// key, the window and agg's result, and emits any number of outputs
// (Flink's aggregate(aggFn, windowFn)). emit is valid only during the
// call; outputs carry timestamp w.MaxTimestamp(). An error from p fails
// the job.
func AggregateProcess[K comparable, T, ACC, R, OUT any](ks weir.KeyedStream[K, T], name string, a Assigner,
	agg AggregateFunction[T, ACC, R], p func(key K, w Window, result R, emit func(OUT)) error, opts ...Option) weir.Stream[OUT] {
	if agg == nil || p == nil {
		panic(fmt.Sprintf("window: Aggregate %q: nil function", name))
	}
	if f, ok := agg.(AggregateFuncs[T, ACC, R]); ok {
		if f.AddFn == nil || f.ResultFn == nil {
			panic(fmt.Sprintf("window: Aggregate %q: AggregateFuncs needs AddFn and ResultFn", name))
		}
		// With an evictor the window keeps records, not accumulators:
		// nothing to merge.
		if a != nil && a.IsMerging() && f.MergeFn == nil && evictorOf(a, opts) == nil {
			panic(fmt.Sprintf("window: Aggregate %q: merging windows (%v) need AggregateFuncs.MergeFn", name, a))
		}
	}
	var newContents func() contents[K, T, OUT]
	if a == nil || evictorOf(a, opts) == nil { // else build keeps records, with a Codec[T]
		codec := contentsCodec[ACC]("Aggregate", name, opts)
		newContents = func() contents[K, T, OUT] {
			return &incremental[K, T, ACC, OUT]{
				codec:    codec,
				firstFn:  func(v T) ACC { return agg.Add(v, agg.CreateAccumulator()) },
				addFn:    func(acc ACC, v T) ACC { return agg.Add(v, acc) },
				mergeFn:  agg.Merge,
				finishFn: func(k K, w Window, acc ACC, emit func(OUT)) error { return p(k, w, agg.Result(acc), emit) },
			}
		}
	}
	return build(ks, "Aggregate", name, a, opts, newContents, func(k K, w Window, elems []T, emit func(OUT)) error {
		acc := agg.CreateAccumulator()
		for _, v := range elems {
			acc = agg.Add(v, acc)
		}
		return p(k, w, agg.Result(acc), emit)
	})
}

// Process windows ks with a and keeps every record of each (key, window);
// when the window fires, f gets the key, the window and the records in
// arrival order (for merged sessions: the merged windows' records one
// window after the other), and emits any number of outputs with timestamp
// w.MaxTimestamp(). elems and emit are valid only during the call: elems is
// the state's own storage and must not be modified or retained. An error
// from f fails the job. Prefer Reduce or Aggregate when an incremental
// result will do: Process holds every record until the window is cleaned
// up.
func Process[K comparable, T, OUT any](ks weir.KeyedStream[K, T], name string, a Assigner,
	f func(key K, w Window, elems []T, emit func(OUT)) error, opts ...Option) weir.Stream[OUT] {
	if f == nil {
		panic(fmt.Sprintf("window: Process %q: nil function", name))
	}
	codec := contentsCodec[T]("Process", name, opts)
	return build(ks, "Process", name, a, opts, func() contents[K, T, OUT] {
		return &buffered[K, T, OUT]{f: f, codec: codec}
	}, f)
}
