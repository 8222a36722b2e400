package weir

import (
	"math"

	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/timer"
)

// TransformTwo adds a custom two-input operator consuming a (input 1) and b
// (input 2) with the given partitioners. Its watermark is the minimum of
// the two inputs' watermarks.
func TransformTwo[A, B, OUT any](a Stream[A], b Stream[B], name string, newOp func() runtime.TwoInputOperator[A, B, OUT], pa runtime.Partitioner[A], pb runtime.Partitioner[B]) Stream[OUT] {
	n := runtime.AddTwoInput(&a.env.graph, name, newOp)
	if a.exchange != nil {
		pa = *a.exchange
	}
	if b.exchange != nil {
		pb = *b.exchange
	}
	connect(a, n, 0, pa)
	connect(b, n, 1, pb)
	return newStream[OUT](a.env, n)
}

// CoFlatMap joins two streams of different types into one: f1 handles the
// records of a, f2 those of b; each emits any number of values with the
// input record's timestamp. Records reach subtask i of the operator from
// subtask i of each input (forward, as Flink's connect) where the input and
// the operator run at the same parallelism when the job is built, and
// round-robin where they differ; keyed inputs (KeyBy) keep their key-group
// partitioning.
func CoFlatMap[A, B, OUT any](a Stream[A], b Stream[B], name string, f1 func(v A, emit func(OUT)), f2 func(v B, emit func(OUT))) Stream[OUT] {
	return TransformTwo(a, b, name, func() runtime.TwoInputOperator[A, B, OUT] {
		return &coFlatMapOp[A, B, OUT]{f1: f1, f2: f2}
	}, runtime.ForwardOrRebalance[A](), runtime.ForwardOrRebalance[B]())
}

type coFlatMapOp[A, B, OUT any] struct {
	runtime.Base[OUT]
	f1   func(A, func(OUT))
	f2   func(B, func(OUT))
	ts   int64
	emit func(OUT)
}

func (o *coFlatMapOp[A, B, OUT]) Open(ctx *runtime.Context, out runtime.Output[OUT]) error {
	o.Base.Open(ctx, out)
	o.emit = func(v OUT) { o.Out.Collect(Record[OUT]{Value: v, Timestamp: o.ts}) }
	return nil
}

func (o *coFlatMapOp[A, B, OUT]) ProcessRecord1(r Record[A]) error {
	o.ts = r.Timestamp
	o.f1(r.Value, o.emit)
	return nil
}

func (o *coFlatMapOp[A, B, OUT]) ProcessRecord2(r Record[B]) error {
	o.ts = r.Timestamp
	o.f2(r.Value, o.emit)
	return nil
}

func (o *coFlatMapOp[A, B, OUT]) EndInput(int) error { return nil }

// KeyedCoProcessFunction processes two keyed streams that share a key type,
// with keyed state and timers shared by both inputs (a join, an
// enrichment). Its lifecycle is that of KeyedProcessFunction.
type KeyedCoProcessFunction[K comparable, A, B, OUT any] interface {
	Open(ctx *KeyedContext[K, OUT]) error
	ProcessElement1(v A, ctx *KeyedContext[K, OUT]) error
	ProcessElement2(v B, ctx *KeyedContext[K, OUT]) error
	OnTimer(ts int64, ctx *KeyedContext[K, OUT]) error
}

// KeyedCoProcess connects two streams keyed by the same key type and runs
// fn on them; newFn is called once per subtask. The operator's watermark is
// the minimum of both inputs'.
func KeyedCoProcess[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], name string, newFn func() KeyedCoProcessFunction[K, A, B, OUT]) Stream[OUT] {
	ka, kb, h := a.key, b.key, a.hash
	return TransformTwo(a.Stream, b.Stream, name, func() runtime.TwoInputOperator[A, B, OUT] {
		return &keyedCoProcessOp[K, A, B, OUT]{keyedCore: keyedCore[K, OUT]{hash: h}, fn: newFn(), keyA: ka, keyB: kb}
	}, runtime.KeyGroups(a.KeyGroupFunc), runtime.KeyGroups(b.KeyGroupFunc))
}

type keyedCoProcessOp[K comparable, A, B, OUT any] struct {
	keyedCore[K, OUT]
	fn   KeyedCoProcessFunction[K, A, B, OUT]
	keyA func(A) K
	keyB func(B) K
}

func (o *keyedCoProcessOp[K, A, B, OUT]) Open(ctx *runtime.Context, out runtime.Output[OUT]) error {
	return o.open(ctx, out, o.fn.OnTimer, o.fn.Open)
}

func (o *keyedCoProcessOp[K, A, B, OUT]) ProcessRecord1(r Record[A]) error {
	o.setKey(o.keyA(r.Value), r.Timestamp)
	return o.fn.ProcessElement1(r.Value, &o.kctx)
}

func (o *keyedCoProcessOp[K, A, B, OUT]) ProcessRecord2(r Record[B]) error {
	o.setKey(o.keyB(r.Value), r.Timestamp)
	return o.fn.ProcessElement2(r.Value, &o.kctx)
}

func (o *keyedCoProcessOp[K, A, B, OUT]) EndInput(int) error { return o.err }

// timerCallbacks returns the event-time and processing-time firing
// functions of a keyed operator, and schedules processing-time wake-ups
// with the runtime. The first error of onTimer is kept in *errp (and fails
// the job at once for processing-time timers, which fire outside any
// operator call).
func timerCallbacks[K comparable, OUT any](kc *KeyedContext[K, OUT], errp *error, onTimer func(int64, *KeyedContext[K, OUT]) error) (fire, pfire func(timer.Timer[K, struct{}])) {
	call := func(t timer.Timer[K, struct{}], d TimeDomain) {
		if *errp != nil {
			return
		}
		kc.backend.SetCurrentKey(t.Key, t.KeyGroup)
		kc.ts, kc.domain = t.Timestamp, d
		if err := onTimer(t.Timestamp, kc); err != nil {
			*errp = err
		}
	}
	fire = func(t timer.Timer[K, struct{}]) { call(t, EventTime) }
	pfire = func(t timer.Timer[K, struct{}]) { call(t, ProcessingTime) }
	// One wake-up per head: the service reports a new head only when a
	// registration makes it earlier, so after a firing pass the next
	// wake-up comes from the queue (as the window operator does).
	nextWake := int64(math.MaxInt64)
	var wake func(now int64)
	schedule := func(ts int64) {
		if ts < nextWake {
			nextWake = ts
			kc.rt.RegisterProcessingTimer(ts, wake)
		}
	}
	wake = func(now int64) {
		nextWake = math.MaxInt64
		kc.timers.AdvanceProcessingTime(now, pfire)
		if *errp != nil {
			kc.rt.Fail(*errp)
			return
		}
		if next, ok := kc.timers.NextProcessingTime(); ok {
			schedule(next)
		}
	}
	kc.timers.OnProcessingHeadChange(schedule)
	return fire, pfire
}
