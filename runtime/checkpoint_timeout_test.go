package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// A checkpoint whose barrier is stuck behind a blocked operator times out
// and is aborted; once the operator moves again, the next one completes.
func TestCheckpointTimeoutThenSuccess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, DisableChaining: true,
		Checkpoint: runtime.CheckpointConfig{Dir: dir, Timeout: 100 * time.Millisecond}})
	src := weir.Generate(env, "numbers", -1, func(i int64) weir.Record[int64] {
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.ForMonotonous[int64]())
	var block atomic.Bool
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	slow := weir.Map(src, "slow", func(v int64) int64 {
		if block.Load() {
			select {
			case blocked <- struct{}{}:
			default:
			}
			<-release
			block.Store(false)
		}
		return v
	})
	weir.ToSink(slow, "discard", func(*runtime.Context) (weir.SinkWriter[int64], error) {
		return weir.SinkFunc[int64](func(weir.Record[int64]) error { return nil }), nil
	})
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatalf("first checkpoint: %v", err)
	}
	block.Store(true)
	<-blocked
	_, _, err = job.TriggerCheckpoint(ctx)
	if !errors.Is(err, runtime.ErrCheckpointAborted) {
		t.Fatalf("checkpoint behind a blocked operator: %v, want ErrCheckpointAborted", err)
	}
	close(release)
	id, path, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatalf("checkpoint after release: %v", err)
	}
	if id != 3 {
		t.Fatalf("checkpoint id %d, want 3 (1 completed, 2 aborted)", id)
	}
	if _, err := checkpoint.Read(path); err != nil {
		t.Fatal(err)
	}
	if n := job.Metrics().Sum("job", "checkpointsAborted"); n != 1 {
		t.Fatalf("%d aborted checkpoints, want 1", n)
	}
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}
	if ids, _ := checkpoint.List(dir); len(ids) != 2 {
		t.Fatalf("completed checkpoints on disk: %v", ids)
	}
}

// Barrier alignment with inputs of very different speeds: a fast and a
// throttled source feed one keyed operator; checkpoints complete, and a
// restore from one gives exactly-once counts.
func TestAlignmentWithSkewedInputs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	build := func(restore string) (*weir.Environment, *weir.Collected[[2]int64]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 2, MaxParallelism: 128,
			Checkpoint: runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore}})
		fast := weir.Generate(env, "fast", 100000, func(i int64) weir.Record[int64] {
			if i%250 < 2 { // both subtasks (even and odd i) sleep
				time.Sleep(time.Millisecond)
			}
			return weir.Record[int64]{Value: i % 10, Timestamp: i}
		}, watermark.ForMonotonous[int64]()).UID("fast")
		slow := weir.Generate(env, "slow", 1000, func(i int64) weir.Record[int64] {
			if i%4 < 2 {
				time.Sleep(time.Millisecond)
			}
			return weir.Record[int64]{Value: i % 10, Timestamp: i}
		}, watermark.ForMonotonous[int64]()).UID("slow")
		counts := weir.Process(weir.KeyBy(weir.Union(fast, slow), func(v int64) int64 { return v }), "count",
			func() weir.KeyedProcessFunction[int64, int64, [2]int64] { return &countKey{} }).UID("count")
		return env, weir.Collect(counts)
	}
	env, _ := build("")
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, path, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	job.Wait()
	env2, out := build(path)
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	final := map[int64]int64{}
	for _, v := range out.Values() {
		final[v[0]] = max(final[v[0]], v[1])
	}
	for k := int64(0); k < 10; k++ {
		if final[k] != 10000+100 {
			t.Fatalf("key %d counted %d, want 10100 (exactly once across the restore)", k, final[k])
		}
	}
}
