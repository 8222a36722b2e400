package asyncio_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/asyncio"
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
