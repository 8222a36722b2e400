package ordering

import (
	"slices"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// SortOptions configure Sort. The zero value sorts by timestamp alone.
type SortOptions[T any] struct {
	// Tiebreak orders records of one key with equal timestamps: by the
	// pair it returns, compared lexicographically. For Kafka records
	// return (partition, offset), so that a replay gives the same order
	// (kafka.WithMetadata delivers them). Nil keeps arrival order, which a
	// replay need not reproduce.
	Tiebreak func(v T) (int64, int64)
	// Violations, if set, also receives every record that arrived at or
	// behind the watermark (each is emitted on the main output as well).
	Violations *weir.OutputTag[T]
	// Codec encodes held records in checkpoints. Nil means
	// state.DefaultCodec[T] (JSON for structs).
	Codec state.Codec[T]
}

// Sort emits the records of ks in event-time order per key (S1-S5 of the
// package documentation). Records are held in keyed state under their own
// timestamp and released by an event-time timer for that timestamp when
// the watermark reaches it. The operator is checkpointed: held records and
// their timers are in its snapshots, per key group.
func Sort[K comparable, T any](ks weir.KeyedStream[K, T], name string, opts SortOptions[T]) weir.Stream[T] {
	key, hash := ks.Key(), ks.Hasher()
	return weir.TransformKeyed(ks, name, func() runtime.OneInputOperator[T, T] {
		return &sortOp[K, T]{key: key, hash: hash, opts: opts}
	})
}

// heldState is the name of the keyed state holding records: a list per
// (key, timestamp).
const heldState = "ordering.held"

type sortOp[K comparable, T any] struct {
	runtime.Base[T]
	key  func(T) K
	hash keygroup.Hasher[K]
	opts SortOptions[T]
	maxP int

	backend *state.Backend[K]
	timers  *timer.Service[K, struct{}]
	held    *state.NamespacedListState[K, int64, T]
	side    runtime.Output[T]
	fire    func(timer.Timer[K, struct{}])
	scratch []T

	violations, released *runtime.Counter
	holding              *runtime.Gauge
	nHeld                int64
}

func (o *sortOp[K, T]) Open(ctx *runtime.Context, out runtime.Output[T]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.maxP = ctx.MaxParallelism
	o.backend = state.NewBackend[K](ctx.KeyGroups)
	o.timers = timer.NewService[K, struct{}](ctx.KeyGroups)
	codec := o.opts.Codec
	if codec == nil {
		codec = state.DefaultCodec[T]()
	}
	var err error
	o.held, err = state.NamespacedListWithCodecs[K, int64, T](o.backend, heldState, state.DefaultCodec[int64](), codec)
	if err != nil {
		return err
	}
	if o.opts.Violations != nil {
		o.side = runtime.SideOutput(ctx, o.opts.Violations)
	}
	o.violations = ctx.Counter("orderViolations")
	o.released = ctx.Counter("recordsReleased")
	o.holding = ctx.Gauge("recordsHeld")
	o.fire = o.release
	if err := o.restore(ctx); err != nil {
		return err
	}
	return nil
}

func (o *sortOp[K, T]) ProcessRecord(r runtime.Record[T]) error {
	k := o.key(r.Value)
	kg := keygroup.Assign(o.hash(k), o.maxP)
	if r.Timestamp <= o.timers.CurrentWatermark() {
		// Behind the watermark: everything up to it was already
		// released, so this record cannot be put in order any more (S3).
		o.violations.Inc()
		o.Out.Collect(r)
		if o.side != nil {
			o.side.Collect(r)
		}
		return nil
	}
	o.backend.SetCurrentKey(k, kg)
	o.held.Add(r.Timestamp, r.Value)
	o.timers.RegisterEventTimeTimer(k, kg, struct{}{}, r.Timestamp)
	o.nHeld++
	return nil
}

// release emits the records of one (key, timestamp), ordered by the
// tiebreak (S2).
func (o *sortOp[K, T]) release(t timer.Timer[K, struct{}]) {
	o.backend.SetCurrentKey(t.Key, t.KeyGroup)
	vs := o.held.Get(t.Timestamp)
	o.scratch = append(o.scratch[:0], vs...)
	o.held.Clear(t.Timestamp)
	if tb := o.opts.Tiebreak; tb != nil && len(o.scratch) > 1 {
		slices.SortStableFunc(o.scratch, func(a, b T) int {
			a1, a2 := tb(a)
			b1, b2 := tb(b)
			switch {
			case a1 != b1:
				return cmpInt(a1, b1)
			default:
				return cmpInt(a2, b2)
			}
		})
	}
	for _, v := range o.scratch {
		o.Out.Collect(runtime.Record[T]{Value: v, Timestamp: t.Timestamp})
	}
	o.released.Add(int64(len(o.scratch)))
	o.nHeld -= int64(len(o.scratch))
	clear(o.scratch)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (o *sortOp[K, T]) ProcessWatermark(ts int64) error {
	o.timers.AdvanceWatermark(ts, o.fire)
	o.holding.Set(o.nHeld)
	o.Out.EmitWatermark(ts)
	return nil
}

func (o *sortOp[K, T]) EndInput() error { return nil }

// SnapshotState implements runtime.Snapshotter: held records and timers,
// per key group, in the layout all of weir's keyed operators share
// (weir.SnapshotKeyed).
func (o *sortOp[K, T]) SnapshotState(w *runtime.SnapshotWriter) error {
	return weir.SnapshotKeyed(w, o.Ctx, o.backend, o.timers)
}

func (o *sortOp[K, T]) restore(ctx *runtime.Context) error {
	err := weir.RestoreKeyed(ctx, o.backend, o.timers, nil)
	if err != nil {
		return err
	}
	for kg := ctx.KeyGroups.Start; kg <= ctx.KeyGroups.End; kg++ {
		o.held.ForEach(kg, func(_ K, _ int64, vs []T) { o.nHeld += int64(len(vs)) })
	}
	return nil
}
