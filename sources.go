package weir

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// FromSource adds a source operator reading src, with timestamps and
// watermarks from strategy (one generator per split).
func FromSource[T any](env *Environment, name string, src runtime.Source[T], strategy watermark.Strategy[T]) Stream[T] {
	return newStream[T](env, runtime.AddSource(&env.graph, name, src, strategy))
}

// FromSlice adds a bounded source emitting values in order. strategy must
// assign timestamps (WithTimestamp). With parallelism p, subtask i emits the
// values at positions i, i+p, i+2p, ... (one split per subtask). The source
// does not copy values: do not modify the slice while the job runs.
func FromSlice[T any](env *Environment, name string, values []T, strategy watermark.Strategy[T]) Stream[T] {
	recs := make([]Record[T], len(values))
	for i, v := range values {
		recs[i] = Record[T]{Value: v, Timestamp: runtime.NoTimestamp}
	}
	return FromRecords(env, name, recs, strategy)
}

// FromRecords is FromSlice for values that carry their timestamps.
func FromRecords[T any](env *Environment, name string, recs []Record[T], strategy watermark.Strategy[T]) Stream[T] {
	src := runtime.SourceFunc[T](func(ctx runtime.SourceContext) (runtime.Reader[T], error) {
		next, err := restorePosition(ctx, int64(ctx.Subtask))
		return &sliceReader[T]{recs: recs, next: int(next), step: ctx.Parallelism}, err
	})
	return FromSource(env, name, src, strategy)
}

type sliceReader[T any] struct {
	recs       []Record[T]
	next, step int
}

func (r *sliceReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	for n := 0; n < 256 && r.next < len(r.recs); n++ {
		rec := &r.recs[r.next]
		out.Collect(0, rec.Value, rec.Timestamp)
		r.next += r.step
	}
	if r.next >= len(r.recs) {
		out.FinishSplit(0)
		return runtime.Done, nil
	}
	return runtime.More, nil
}

func (r *sliceReader[T]) Ready() <-chan struct{} { return nil }

// SnapshotSplits implements runtime.SplitSnapshotter: the position of the
// next record.
func (r *sliceReader[T]) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{binary.AppendVarint(nil, int64(r.next))}, nil
}
func (r *sliceReader[T]) Close() error { return nil }

// Generate adds a source emitting f(i) for i in [0, n) (n < 0: without
// end, until the job is cancelled). With parallelism p, subtask s emits the
// i with i % p == s. f must be safe to call from several goroutines.
func Generate[T any](env *Environment, name string, n int64, f func(i int64) Record[T], strategy watermark.Strategy[T]) Stream[T] {
	src := runtime.SourceFunc[T](func(ctx runtime.SourceContext) (runtime.Reader[T], error) {
		next, err := restorePosition(ctx, int64(ctx.Subtask))
		return &genReader[T]{n: n, f: f, next: next, step: int64(ctx.Parallelism)}, err
	})
	return FromSource(env, name, src, strategy)
}

type genReader[T any] struct {
	n, next, step int64
	f             func(int64) Record[T]
}

func (r *genReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	for k := 0; k < 256 && (r.n < 0 || r.next < r.n); k++ {
		rec := r.f(r.next)
		out.Collect(0, rec.Value, rec.Timestamp)
		r.next += r.step
	}
	if r.n >= 0 && r.next >= r.n {
		out.FinishSplit(0)
		return runtime.Done, nil
	}
	return runtime.More, nil
}

func (r *genReader[T]) Ready() <-chan struct{} { return nil }

// SnapshotSplits implements runtime.SplitSnapshotter: the position of the
// next record.
func (r *genReader[T]) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{binary.AppendVarint(nil, r.next)}, nil
}

// restorePosition returns the restored position of a slice or generator
// subtask, or def on a fresh start. These sources interleave subtasks by
// index, so they restore only at the parallelism they were snapshotted at.
func restorePosition(ctx runtime.SourceContext, def int64) (int64, error) {
	if ctx.Restored == nil {
		return def, nil
	}
	items, err := ctx.Restored.List(runtime.SplitsList)
	if err != nil {
		return 0, err
	}
	if len(items) == 0 {
		return def, nil
	}
	if len(items) != 1 {
		return 0, fmt.Errorf("weir: source %q restores %d positions into one subtask: slice and generator sources cannot change parallelism on restore", ctx.Name, len(items))
	}
	v, n := binary.Varint(items[0])
	if n <= 0 {
		return 0, fmt.Errorf("weir: source %q: corrupt restored position", ctx.Name)
	}
	if v%int64(ctx.Parallelism) != int64(ctx.Subtask) {
		return 0, fmt.Errorf("weir: source %q: restored position %d does not belong to subtask %d of %d: slice and generator sources cannot change parallelism on restore", ctx.Name, v, ctx.Subtask, ctx.Parallelism)
	}
	return v, nil
}
func (r *genReader[T]) Close() error { return nil }
