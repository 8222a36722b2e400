package weir

import (
	"fmt"

	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// KeyedStream is a stream partitioned by key: every record of one key goes
// to the subtask that owns the key's key group (Flink-compatible), where
// keyed state and timers are scoped to the key.
type KeyedStream[K comparable, T any] struct {
	Stream[T]
	key  func(T) K
	hash keygroup.Hasher[K]
}

// KeyBy partitions s by key. K must be a string, int, int32, int64 or bool
// kind (named types such as `type UserID string` included), hashed as Java
// would so key groups agree with Flink; use KeyByHash for other key types.
func KeyBy[T any, K comparable](s Stream[T], key func(T) K) KeyedStream[K, T] {
	h, ok := keygroup.HasherFor[K]()
	if !ok {
		var zero K
		panic(fmt.Sprintf("weir: KeyBy: key type %T has no Java-compatible hash; use KeyByHash and supply one", zero))
	}
	return KeyedStream[K, T]{Stream: s, key: key, hash: h}
}

// KeyByHash is KeyBy for key types that supply their own hash. The hash
// must be stable across processes and versions (never a pointer or a
// process-local hash code), or state will not be found after a restore.
func KeyByHash[T any, K comparable](s Stream[T], key func(T) K, hash func(K) int32) KeyedStream[K, T] {
	return KeyedStream[K, T]{Stream: s, key: key, hash: hash}
}

// Key returns the key selector.
func (ks KeyedStream[K, T]) Key() func(T) K { return ks.key }

// Hasher returns the key hash.
func (ks KeyedStream[K, T]) Hasher() keygroup.Hasher[K] { return ks.hash }

// KeyGroupOf returns the key group of v under maxParallelism.
func (ks KeyedStream[K, T]) KeyGroupOf(v T, maxParallelism int) int {
	return keygroup.Assign(ks.hash(ks.key(v)), maxParallelism)
}

// KeyGroupFunc returns KeyGroupOf for one max parallelism, checked once
// (keygroup.Assigner): the key-group function of a key-by edge
// (runtime.KeyGroups). It panics if maxParallelism is out of range.
func (ks KeyedStream[K, T]) KeyGroupFunc(maxParallelism int) func(T) int {
	a := keygroup.NewAssigner(maxParallelism)
	key, hash := ks.key, ks.hash
	return func(v T) int { return a.Assign(hash(key(v))) }
}

// TransformKeyed adds a custom keyed operator consuming ks: records are
// routed to the subtask owning their key group. Window and agent operators
// are built this way.
func TransformKeyed[K comparable, IN, OUT any](ks KeyedStream[K, IN], name string, newOp func() runtime.OneInputOperator[IN, OUT]) Stream[OUT] {
	n := runtime.AddOneInput(&ks.env.graph, name, newOp)
	connect(ks.Stream, n, 0, runtime.KeyGroups(ks.KeyGroupFunc))
	return newStream[OUT](ks.env, n)
}

// KeyedProcessFunction processes the records of a keyed stream one at a
// time, with keyed state and timers. A new instance is made per subtask
// (so fields holding state handles are per subtask).
//
// Open is called once before any record, with a context whose State
// creates state handles. ProcessElement is called per record with the
// record's key current; OnTimer when a timer of the current key fires
// (event-time timers when the watermark passes them, in ascending
// timestamp order, before the watermark is forwarded). An error fails the
// job.
type KeyedProcessFunction[K comparable, IN, OUT any] interface {
	Open(ctx *KeyedContext[K, OUT]) error
	ProcessElement(v IN, ctx *KeyedContext[K, OUT]) error
	OnTimer(ts int64, ctx *KeyedContext[K, OUT]) error
}

// ProcessFuncs adapts functions to KeyedProcessFunction; nil fields do
// nothing.
type ProcessFuncs[K comparable, IN, OUT any] struct {
	OpenFn    func(ctx *KeyedContext[K, OUT]) error
	ElementFn func(v IN, ctx *KeyedContext[K, OUT]) error
	TimerFn   func(ts int64, ctx *KeyedContext[K, OUT]) error
}

// Open calls OpenFn.
func (p ProcessFuncs[K, IN, OUT]) Open(ctx *KeyedContext[K, OUT]) error {
	if p.OpenFn == nil {
		return nil
	}
	return p.OpenFn(ctx)
}

// ProcessElement calls ElementFn.
func (p ProcessFuncs[K, IN, OUT]) ProcessElement(v IN, ctx *KeyedContext[K, OUT]) error {
	if p.ElementFn == nil {
		return nil
	}
	return p.ElementFn(v, ctx)
}

// OnTimer calls TimerFn.
func (p ProcessFuncs[K, IN, OUT]) OnTimer(ts int64, ctx *KeyedContext[K, OUT]) error {
	if p.TimerFn == nil {
		return nil
	}
	return p.TimerFn(ts, ctx)
}

// TimeDomain says which clock a timer belongs to.
type TimeDomain int

const (
	// EventTime timers fire when the watermark passes them.
	EventTime TimeDomain = iota
	// ProcessingTime timers fire when the clock passes them.
	ProcessingTime
)

// KeyedContext is what a KeyedProcessFunction sees: the current key and
// timestamp, keyed state, timers, and outputs. It is valid only inside the
// function's calls, on the subtask goroutine.
type KeyedContext[K comparable, OUT any] struct {
	rt      *runtime.Context
	out     runtime.Output[OUT]
	backend *state.Backend[K]
	timers  *timer.Service[K, struct{}]
	ts      int64
	domain  TimeDomain
}

// Runtime returns the operator subtask's runtime context.
func (c *KeyedContext[K, OUT]) Runtime() *runtime.Context { return c.rt }

// State returns the keyed state backend, to create state handles (in
// Open) with state.Value, state.List and state.Map.
func (c *KeyedContext[K, OUT]) State() *state.Backend[K] { return c.backend }

// Key returns the current key.
func (c *KeyedContext[K, OUT]) Key() K { return c.backend.CurrentKey() }

// Timestamp returns the timestamp of the current record, or of the firing
// timer in OnTimer.
func (c *KeyedContext[K, OUT]) Timestamp() int64 { return c.ts }

// TimeDomain tells, in OnTimer, which kind of timer fired.
func (c *KeyedContext[K, OUT]) TimeDomain() TimeDomain { return c.domain }

// Collect emits v with the current timestamp.
func (c *KeyedContext[K, OUT]) Collect(v OUT) {
	c.out.Collect(Record[OUT]{Value: v, Timestamp: c.ts})
}

// CollectAt emits v with timestamp ts.
func (c *KeyedContext[K, OUT]) CollectAt(v OUT, ts int64) {
	c.out.Collect(Record[OUT]{Value: v, Timestamp: ts})
}

// CurrentWatermark returns the operator's current event time.
func (c *KeyedContext[K, OUT]) CurrentWatermark() int64 { return c.timers.CurrentWatermark() }

// CurrentProcessingTime returns the clock's time in Unix ms.
func (c *KeyedContext[K, OUT]) CurrentProcessingTime() int64 { return c.rt.Clock.Now().UnixMilli() }

// RegisterEventTimeTimer asks for OnTimer(ts) for the current key once the
// watermark reaches ts. Registering the same (key, ts) twice is one timer.
func (c *KeyedContext[K, OUT]) RegisterEventTimeTimer(ts int64) {
	c.timers.RegisterEventTimeTimer(c.backend.CurrentKey(), c.backend.CurrentKeyGroup(), struct{}{}, ts)
}

// DeleteEventTimeTimer removes an event-time timer of the current key; a
// missing timer is ignored.
func (c *KeyedContext[K, OUT]) DeleteEventTimeTimer(ts int64) {
	c.timers.DeleteEventTimeTimer(c.backend.CurrentKey(), c.backend.CurrentKeyGroup(), struct{}{}, ts)
}

// RegisterProcessingTimeTimer asks for OnTimer(ts) for the current key once
// processing time reaches ts (Unix ms): once the clock reads ts or later.
// If the clock steps back, the timer waits until it reads ts again
// (docs/state-and-timers.md).
func (c *KeyedContext[K, OUT]) RegisterProcessingTimeTimer(ts int64) {
	c.timers.RegisterProcessingTimeTimer(c.backend.CurrentKey(), c.backend.CurrentKeyGroup(), struct{}{}, ts)
}

// DeleteProcessingTimeTimer removes a processing-time timer of the current
// key.
func (c *KeyedContext[K, OUT]) DeleteProcessingTimeTimer(ts int64) {
	c.timers.DeleteProcessingTimeTimer(c.backend.CurrentKey(), c.backend.CurrentKeyGroup(), struct{}{}, ts)
}

// SideOutputTo emits v with the current timestamp to side output tag.
func SideOutputTo[K comparable, OUT, U any](c *KeyedContext[K, OUT], tag *OutputTag[U], v U) {
	runtime.SideOutput(c.rt, tag).Collect(Record[U]{Value: v, Timestamp: c.ts})
}

// Process runs a KeyedProcessFunction on ks; newFn is called once per
// subtask.
func Process[K comparable, IN, OUT any](ks KeyedStream[K, IN], name string, newFn func() KeyedProcessFunction[K, IN, OUT]) Stream[OUT] {
	key, hash := ks.key, ks.hash
	return TransformKeyed(ks, name, func() runtime.OneInputOperator[IN, OUT] {
		return &keyedProcessOp[K, IN, OUT]{keyedCore: keyedCore[K, OUT]{hash: hash}, fn: newFn(), key: key}
	})
}

type keyedProcessOp[K comparable, IN, OUT any] struct {
	keyedCore[K, OUT]
	fn  KeyedProcessFunction[K, IN, OUT]
	key func(IN) K
}

func (o *keyedProcessOp[K, IN, OUT]) Open(ctx *runtime.Context, out runtime.Output[OUT]) error {
	return o.open(ctx, out, o.fn.OnTimer, o.fn.Open)
}

func (o *keyedProcessOp[K, IN, OUT]) ProcessRecord(r Record[IN]) error { return o.ProcessRecordRef(&r) }

// ProcessRecordRef implements runtime.RecordRefProcessor: a run of records
// or a channel's batch reaches the function without a copy of each record
// for the call.
func (o *keyedProcessOp[K, IN, OUT]) ProcessRecordRef(r *Record[IN]) error {
	o.setKey(o.key(r.Value), r.Timestamp)
	return o.fn.ProcessElement(r.Value, &o.kctx)
}

// ProcessRecordInKeyGroup implements runtime.KeyGroupProcessor: over the
// key-by edge of Process, whose key-group function is this operator's key
// and hash (KeyGroupOf), the exchange's key group is the one setKey would
// compute, so the key is not hashed twice.
func (o *keyedProcessOp[K, IN, OUT]) ProcessRecordInKeyGroup(r Record[IN], kg int) error {
	o.kctx.backend.SetCurrentKey(o.key(r.Value), kg)
	o.kctx.ts = r.Timestamp
	return o.fn.ProcessElement(r.Value, &o.kctx)
}

func (o *keyedProcessOp[K, IN, OUT]) EndInput() error { return o.err }

// keyedCore is what the keyed process operators (one and two inputs)
// share: the keyed context with its state backend and timers, the key-group
// assignment, and the first error of a timer callback. It implements
// ProcessWatermark, Close and SnapshotState for them.
type keyedCore[K comparable, OUT any] struct {
	runtime.Base[OUT]
	hash  keygroup.Hasher[K]
	kctx  KeyedContext[K, OUT]
	err   error
	fire  func(timer.Timer[K, struct{}])
	pfire func(timer.Timer[K, struct{}])

	// assign picks the key group of a key (keygroup.Assign for maxP,
	// checked once at open).
	assign keygroup.Assigner
}

// open opens the state backend and the timers, restores them (nothing on
// a fresh start), and calls the user function's open.
func (c *keyedCore[K, OUT]) open(ctx *runtime.Context, out runtime.Output[OUT], onTimer func(int64, *KeyedContext[K, OUT]) error, fnOpen func(*KeyedContext[K, OUT]) error) error {
	c.Base.Open(ctx, out)
	c.assign = keygroup.NewAssigner(ctx.MaxParallelism)
	backend, err := state.Open[K](ctx.StateOptions(), ctx.KeyGroups)
	if err != nil {
		return err
	}
	hash, assign := c.hash, c.assign
	backend.SetKeyGroupFunc(func(k K) int { return assign.Assign(hash(k)) })
	c.kctx = KeyedContext[K, OUT]{rt: ctx, out: out,
		backend: backend,
		timers:  NewTimerService[K, struct{}](backend, nil, nil)}
	c.fire, c.pfire = timerCallbacks(&c.kctx, &c.err, onTimer)
	if err := RestoreKeyed(ctx, c.kctx.backend, c.kctx.timers, nil); err != nil {
		return err
	}
	return fnOpen(&c.kctx)
}

// setKey makes k the current key, for a record of timestamp ts. Its key
// group is computed only if something needs it (state.SetCurrentKeyLazy):
// no routing needs it here (a record that came over an exchange takes
// ProcessRecordInKeyGroup), and a value state finds an existing key's
// entry without it.
func (c *keyedCore[K, OUT]) setKey(k K, ts int64) {
	c.kctx.backend.SetCurrentKeyLazy(k)
	c.kctx.ts = ts
}

// ProcessWatermark fires the due event-time timers, then forwards ts.
func (c *keyedCore[K, OUT]) ProcessWatermark(ts int64) error {
	c.kctx.timers.AdvanceWatermark(ts, c.fire)
	if c.err != nil {
		return c.err
	}
	c.Out.EmitWatermark(ts)
	return nil
}

// Holds implements runtime.Holder: while event-time timers are pending,
// the operator's output does not go idle (runtime I8), so what they emit
// later is not late downstream.
func (c *keyedCore[K, OUT]) Holds() bool {
	return c.kctx.timers != nil && c.kctx.timers.NumEventTimeTimers() > 0
}

// Close releases the state backend (a Pebble backend's files).
func (c *keyedCore[K, OUT]) Close() error {
	if c.kctx.backend == nil {
		return nil
	}
	return c.kctx.backend.Close()
}

// SnapshotState implements runtime.Snapshotter: keyed state and timers per
// key group.
func (c *keyedCore[K, OUT]) SnapshotState(w *runtime.SnapshotWriter) error {
	return SnapshotKeyed(w, c.Ctx, c.kctx.backend, c.kctx.timers)
}
