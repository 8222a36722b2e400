package ordering

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/mutant"
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
	// HeldCodec, if set and T contains pointers (strings, slices, maps,
	// pointers), keeps held records in memory encoded by it, in byte slabs
	// that the garbage collector does not scan, instead of as values of T
	// (arena.go). With many records held (a catch-up holds hundreds of
	// thousands), scanning them is a large part of every GC cycle; encoded,
	// they cost an Append when held and a Decode when released instead,
	// which pays only with a fast binary codec (not JSON). Decode must
	// return what Append encoded: a record that does not decode fails the
	// job. Nil, or a T without pointers (already held in memory the GC does
	// not scan), holds values.
	HeldCodec state.Codec[T]
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

// heldState is the name of the keyed state holding records in snapshots:
// a list per (key, timestamp), with an event-time timer per (key,
// timestamp), as the operator kept them before it held records in memory
// (so snapshots of either version restore into the other).
const heldState = "ordering.held"

// heldRec is one held record with its release order: timestamp, then the
// tiebreak, then arrival.
type heldRec[T any] struct {
	ts, t1, t2 int64
	seq        uint64
	v          T
}

func (a *heldRec[T]) less(b *heldRec[T]) bool {
	switch {
	case a.ts != b.ts:
		return a.ts < b.ts
	case a.t1 != b.t1:
		return a.t1 < b.t1
	case a.t2 != b.t2:
		return a.t2 < b.t2
	}
	return a.seq < b.seq
}

// sortOp holds records in a heldQueue ordered by (timestamp, tiebreak,
// arrival) and releases the prefix up to each watermark. Releasing all
// keys' records in timestamp order releases each key's in timestamp order
// (S1, S2), which is what the timer queue of the keyed-state design gave,
// without a state entry and a timer per (key, timestamp). Snapshots still
// write the keyed-state and timer format, per key group (S4).
type sortOp[K comparable, T any] struct {
	runtime.Base[T]
	key  func(T) K
	hash keygroup.Hasher[K]
	opts SortOptions[T]
	maxP int

	held heldQueue[T]
	// enc, if not nil, holds the records instead of held (HeldCodec).
	enc   *encodedQueue[T]
	seq   uint64
	wm    int64
	side  runtime.Output[T]
	codec state.Codec[T]

	violations, released *runtime.Counter
	holding              *runtime.Gauge
	// st, if not nil, holds the records instead (the Pebble backend:
	// sortstore.go).
	st *storedHeld[K, T]
}

func (o *sortOp[K, T]) Open(ctx *runtime.Context, out runtime.Output[T]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.maxP = ctx.MaxParallelism
	o.wm = math.MinInt64
	o.codec = o.opts.Codec
	if o.codec == nil {
		o.codec = state.DefaultCodec[T]()
	}
	if o.opts.Violations != nil {
		o.side = runtime.SideOutput(ctx, o.opts.Violations)
	}
	if o.opts.HeldCodec != nil && hasPointers(reflect.TypeFor[T]()) {
		o.enc = newEncodedQueue(o.opts.HeldCodec)
	}
	o.violations = ctx.Counter("orderViolations")
	o.released = ctx.Counter("recordsReleased")
	o.holding = ctx.Gauge("recordsHeld")
	if ctx.StateOptions().Kind == state.BackendPebble {
		return o.openStored(ctx)
	}
	return o.restore(ctx)
}

func (o *sortOp[K, T]) ProcessRecord(r runtime.Record[T]) error {
	if r.Timestamp <= o.wm {
		// Behind the watermark: everything up to it was already
		// released, so this record cannot be put in order any more (S3).
		o.violations.Inc()
		o.Out.Collect(r)
		if o.side != nil {
			o.side.Collect(r)
		}
		return nil
	}
	return o.push(r.Timestamp, r.Value)
}

func (o *sortOp[K, T]) push(ts int64, v T) error {
	if o.st != nil {
		o.st.push(ts, v)
		return nil
	}
	h := heldRec[T]{ts: ts, seq: o.seq, v: v}
	o.seq++
	if tb := o.opts.Tiebreak; tb != nil {
		h.t1, h.t2 = tb(v)
	}
	if o.enc != nil {
		return o.enc.push(h)
	}
	o.held.push(h)
	return nil
}

// heldLen returns the number of records held.
func (o *sortOp[K, T]) heldLen() int {
	if o.st != nil {
		return o.st.n
	}
	if o.enc != nil {
		return o.enc.len()
	}
	return o.held.len()
}

func (o *sortOp[K, T]) ProcessWatermark(ts int64) error {
	if ts > o.wm {
		o.wm = ts
		var n int
		var err error
		switch {
		case o.st != nil:
			n, err = o.st.advance(ts)
		case o.enc != nil:
			n, err = o.enc.release(ts, o.emitHeld)
		default:
			rel := ts
			if mutant.On(mutant.SortReleasesEarly) && ts < math.MaxInt64 {
				rel = ts + 1
			}
			n = o.held.release(rel, o.emitHeld)
		}
		if n > 0 {
			o.released.Add(int64(n))
		}
		if err != nil {
			return err
		}
	}
	o.holding.Set(int64(o.heldLen()))
	o.Out.EmitWatermark(ts)
	return nil
}

// Holds implements runtime.Holder: while records are held, the runtime
// keeps the input's idle status from the operator, so its output stays
// active (S6, runtime I8).
func (o *sortOp[K, T]) Holds() bool { return o.heldLen() > 0 }

func (o *sortOp[K, T]) emitHeld(h *heldRec[T]) {
	o.Out.Collect(runtime.Record[T]{Value: h.v, Timestamp: h.ts})
}

// Close releases the Pebble backend of a stored operator (sortstore.go).
func (o *sortOp[K, T]) Close() error {
	if o.st == nil {
		return nil
	}
	return o.st.close()
}

// keyedState builds the keyed-state and timer form of the held records
// (for snapshots), in release order so that arrival order within a (key,
// timestamp) survives a restore.
func (o *sortOp[K, T]) keyedState(recs []heldRec[T]) (*state.Backend[K], *timer.Service[K, struct{}], error) {
	backend := state.NewBackend[K](o.Ctx.KeyGroups)
	timers := timer.NewService[K, struct{}](o.Ctx.KeyGroups)
	held, err := state.NamespacedListWithCodecs[K, int64, T](backend, heldState, state.DefaultCodec[int64](), o.codec)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(recs, func(a, b heldRec[T]) int {
		if a.less(&b) {
			return -1
		}
		if b.less(&a) {
			return 1
		}
		return 0
	})
	for i := range recs {
		k := o.key(recs[i].v)
		kg := keygroup.Assign(o.hash(k), o.maxP)
		backend.SetCurrentKey(k, kg)
		held.Add(recs[i].ts, recs[i].v)
		timers.RegisterEventTimeTimer(k, kg, struct{}{}, recs[i].ts)
	}
	return backend, timers, nil
}

// SnapshotState implements runtime.Snapshotter: held records and timers,
// per key group, as weir's keyed operators write them:
// uvarint(len(stateBlob)) stateBlob timerBlob.
//
// The synchronous part only copies the held records (one memory copy);
// the keyed state, timers and blobs are built from the copy in the
// snapshot's asynchronous part, while records flow.
func (o *sortOp[K, T]) SnapshotState(w *runtime.SnapshotWriter) error {
	if o.st != nil {
		return o.st.snapshot(w)
	}
	if o.heldLen() == 0 {
		return nil
	}
	if o.enc != nil {
		c := o.enc.copyHeld()
		w.Async(func() error {
			recs, err := o.enc.decode(c)
			if err != nil {
				return err
			}
			return o.writeSnapshot(w, recs)
		})
		return nil
	}
	recs := o.held.all()
	w.Async(func() error { return o.writeSnapshot(w, recs) })
	return nil
}

// writeSnapshot writes the key-group blobs of recs (the asynchronous part
// of SnapshotState: it reads only recs and immutable fields of o).
func (o *sortOp[K, T]) writeSnapshot(w *runtime.SnapshotWriter, recs []heldRec[T]) error {
	backend, timers, err := o.keyedState(recs)
	if err != nil {
		return err
	}
	for kg := o.Ctx.KeyGroups.Start; kg <= o.Ctx.KeyGroups.End; kg++ {
		sb, err := backend.SnapshotKeyGroup(kg)
		if err != nil {
			return err
		}
		tb, err := timers.SnapshotKeyGroup(kg)
		if err != nil {
			return err
		}
		if len(sb) == 0 && len(tb) == 0 {
			continue
		}
		blob := binary.AppendUvarint(make([]byte, 0, len(sb)+len(tb)+4), uint64(len(sb)))
		blob = append(append(blob, sb...), tb...)
		if err := w.KeyGroup(kg, blob); err != nil {
			return err
		}
	}
	return nil
}

func (o *sortOp[K, T]) restore(ctx *runtime.Context) error {
	backend := state.NewBackend[K](ctx.KeyGroups)
	timers := timer.NewService[K, struct{}](ctx.KeyGroups)
	held, err := state.NamespacedListWithCodecs[K, int64, T](backend, heldState, state.DefaultCodec[int64](), o.codec)
	if err != nil {
		return err
	}
	// RestoreKeyed also reads native checkpoints of the Pebble mode
	// (sortstore.go), whose records and timers are in Pebble's files.
	if err := weir.RestoreKeyed(ctx, backend, timers, nil); err != nil {
		return fmt.Errorf("ordering: %w", err)
	}
	for kg := ctx.KeyGroups.Start; kg <= ctx.KeyGroups.End && err == nil; kg++ {
		state.ForEachNamespacedList(held, kg, func(_ K, ts int64, vs []T) {
			for _, v := range vs {
				if err == nil {
					err = o.push(ts, v)
				}
			}
		})
	}
	o.holding.Set(int64(o.heldLen()))
	return err
}

// hasPointers reports whether values of t contain pointers the garbage
// collector follows (so holding them as values makes it scan them).
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}
