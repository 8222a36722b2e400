package asyncio_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/asyncio"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// A checkpoint taken while calls are in flight completes without waiting
// for them, stores their inputs, and a restore runs them again: every
// input's result arrives exactly once across the two runs.
func TestInFlightCallsSurviveRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	const n = 40
	var release atomic.Bool
	started := make(chan struct{}, 100)
	build := func(restore string) (*weir.Environment, *weir.Collected[int64]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1,
			Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(dir, "chk"), RestoreFrom: restore}})
		src := weir.GenerateSplits(env, "numbers", 1, -1, func(_ int, i int64) weir.Record[int64] {
			if i >= n {
				time.Sleep(time.Millisecond) // idle after the input
				return weir.Record[int64]{Value: -1, Timestamp: i}
			}
			return weir.Record[int64]{Value: i, Timestamp: i}
		}, watermark.ForMonotonous[int64]()).UID("numbers")
		src = weir.Filter(src, "real", func(v int64) bool { return v >= 0 }).UID("real")
		out := asyncio.Unordered(src, "call", func(ctx context.Context, v int64) ([]int64, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			for !release.Load() {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Millisecond):
				}
			}
			return []int64{v * 10}, nil
		}, asyncio.Options{Capacity: 100}).UID("call")
		return env, weir.Collect(out)
	}
	env, first := build("")
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	// Every input has entered the operator and its call blocks.
	for env.Metrics().Sum("call", "recordsIn") < n {
		time.Sleep(time.Millisecond)
	}
	_, path, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatalf("checkpoint with calls in flight: %v", err)
	}
	job.Cancel()
	job.Wait()
	if len(first.Values()) != 0 {
		t.Fatalf("first run emitted %v before any call returned", first.Values())
	}
	release.Store(true)
	env2, second := build(path)
	job2, err := env2.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for len(second.Values()) < n {
		if ctx.Err() != nil {
			t.Fatalf("restored run emitted %d of %d", len(second.Values()), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	job2.Cancel()
	job2.Wait()
	got := second.Values()
	slices.Sort(got)
	for i := range int64(n) {
		if got[i] != i*10 {
			t.Fatalf("results after restore: %v", got)
		}
	}
	if len(got) != n {
		t.Fatalf("%d results, want %d", len(got), n)
	}
}

// signalSource emits 0..n-1 on one split and ends; the first snapshot of
// its position signals snap. A restored reader starts at the position
// stored.
type signalSource struct {
	n    int64
	snap chan struct{}
}

func (s signalSource) CreateReader(ctx runtime.SourceContext) (runtime.Reader[int64], error) {
	r := &signalReader{s: s}
	items, err := ctx.Restored.List(runtime.SplitsList)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		r.next, _ = binary.Varint(it)
	}
	return r, nil
}

type signalReader struct {
	s    signalSource
	next int64
	once sync.Once
}

func (r *signalReader) Poll(out runtime.SourceOutput[int64]) (runtime.PollStatus, error) {
	if r.next >= r.s.n {
		return runtime.Done, nil
	}
	out.Collect(0, r.next, r.next)
	r.next++
	return runtime.More, nil
}

func (r *signalReader) Ready() <-chan struct{} { return nil }
func (r *signalReader) Close() error           { return nil }

func (r *signalReader) SnapshotSplits(int64) ([][]byte, error) {
	r.once.Do(func() { close(r.s.snap) })
	return [][]byte{binary.AppendVarint(nil, r.next)}, nil
}

// A bounded job ends with calls in flight when its final checkpoint is
// taken (they return only once the checkpoint has begun). The final
// checkpoint waits for them, so a job resumed from it has nothing to call
// again and emits nothing: every result exactly once over the two runs.
// (It used to store the inputs while the end of input emitted their
// results, and the resumed run called and emitted them all again.)
func TestResumeFromFinalCheckpointCallsNothingAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	const n = 20
	var calls atomic.Int64
	build := func(cpDir, restore string, snap chan struct{}) (*weir.Environment, *weir.Collected[int64]) {
		// Only the final checkpoint is taken: the interval is never reached.
		env := weir.NewEnvironment(weir.Config{Parallelism: 1,
			Checkpoint: runtime.CheckpointConfig{Interval: time.Hour, Dir: cpDir, RestoreFrom: restore}})
		src := weir.FromSource(env, "numbers", signalSource{n: n, snap: snap}, watermark.ForMonotonous[int64]()).UID("numbers")
		out := asyncio.Unordered(src, "call", func(ctx context.Context, v int64) ([]int64, error) {
			calls.Add(1)
			select {
			case <-snap:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return []int64{v * 10}, nil
		}, asyncio.Options{Capacity: 100}).UID("call")
		return env, weir.Collect(out)
	}
	env, first := build(filepath.Join(dir, "c1"), "", make(chan struct{}))
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(first.Values()); got != n || calls.Load() != n {
		t.Fatalf("first run: %d results of %d calls, want %d", got, calls.Load(), n)
	}
	final, _, err := checkpoint.Latest(filepath.Join(dir, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	env2, second := build(filepath.Join(dir, "c2"), final, make(chan struct{}))
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if again, got := calls.Load()-n, second.Values(); again != 0 || len(got) != 0 {
		t.Fatalf("the run resumed from the final checkpoint made %d calls and emitted %v, want none", again, got)
	}
}
