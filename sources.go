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
	run           []Record[T] // a run of a Poll's records (runtime.CollectRun)
}

// genPoll is how many records a Poll of Generate emits.
const genPoll = 256

func (r *genReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if r.run == nil {
		r.run = make([]Record[T], 0, min(genPoll, runtime.RunRecords[T]()))
	}
	for k := 0; k < genPoll && (r.n < 0 || r.next < r.n); {
		run := r.run[:0]
		for ; len(run) < cap(run) && k < genPoll && (r.n < 0 || r.next < r.n); k++ {
			run = append(run, r.f(r.next))
			r.next += r.step
		}
		runtime.CollectRun(out, 0, run)
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

// GenerateSplits adds a source of `splits` independent sequences: split s
// emits f(s, 0), f(s, 1), ... (perSplit values each; perSplit < 0: without
// end). Splits are spread over the source's subtasks and each has its own
// watermark generator. Its split positions are checkpointed and restore at
// any parallelism, like Kafka partitions. f must be safe to call from
// several goroutines.
func GenerateSplits[T any](env *Environment, name string, splits int, perSplit int64, f func(split int, i int64) Record[T], strategy watermark.Strategy[T]) Stream[T] {
	src := runtime.SourceFunc[T](func(ctx runtime.SourceContext) (runtime.Reader[T], error) {
		r := &splitsReader[T]{perSplit: perSplit, f: f}
		if ctx.Restored != nil {
			items, err := ctx.Restored.List(runtime.SplitsList)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				s, n := binary.Varint(it)
				if n <= 0 {
					return nil, fmt.Errorf("weir: source %q: corrupt split state", ctx.Name)
				}
				p, m := binary.Varint(it[n:])
				if m <= 0 {
					return nil, fmt.Errorf("weir: source %q: corrupt split state", ctx.Name)
				}
				r.pos = append(r.pos, [2]int64{s, p})
			}
			return r, nil
		}
		for s := ctx.Subtask; s < splits; s += ctx.Parallelism {
			r.pos = append(r.pos, [2]int64{int64(s), 0})
		}
		return r, nil
	})
	return FromSource(env, name, src, strategy)
}

type splitsReader[T any] struct {
	perSplit int64
	f        func(int, int64) Record[T]
	pos      [][2]int64 // split, next
	started  bool
}

func (r *splitsReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if !r.started {
		r.started = true
		for _, p := range r.pos {
			out.AddSplit(int(p[0]))
		}
	}
	live := 0
	for i := range r.pos {
		p := &r.pos[i]
		if r.perSplit >= 0 && p[1] >= r.perSplit {
			continue
		}
		for k := 0; k < 64 && (r.perSplit < 0 || p[1] < r.perSplit); k++ {
			rec := r.f(int(p[0]), p[1])
			out.Collect(int(p[0]), rec.Value, rec.Timestamp)
			p[1]++
		}
		if r.perSplit >= 0 && p[1] >= r.perSplit {
			out.FinishSplit(int(p[0]))
			continue
		}
		live++
	}
	if live == 0 {
		if r.perSplit < 0 {
			// An unbounded source with no split (more subtasks than
			// splits) stays up, idle, so checkpoints keep working.
			return runtime.Wait, nil
		}
		return runtime.Done, nil
	}
	return runtime.More, nil
}

func (r *splitsReader[T]) Ready() <-chan struct{} { return nil }
func (r *splitsReader[T]) Close() error           { return nil }

// SnapshotSplits implements runtime.SplitSnapshotter.
func (r *splitsReader[T]) SnapshotSplits(int64) ([][]byte, error) {
	items := make([][]byte, 0, len(r.pos))
	for _, p := range r.pos {
		items = append(items, binary.AppendVarint(binary.AppendVarint(nil, p[0]), p[1]))
	}
	return items, nil
}
