package runtime_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// slowBarrier passes records on and takes a while over each snapshot, so
// that the barriers of its input reach the operator downstream after those
// of the other input.
type slowBarrier struct {
	runtime.Base[int]
}

func (o *slowBarrier) ProcessRecord(r runtime.Record[int]) error { o.Out.Collect(r); return nil }
func (o *slowBarrier) SnapshotState(*runtime.SnapshotWriter) error {
	time.Sleep(20 * time.Millisecond) // lint:allow-time a delay, no decision depends on it
	return nil
}

// A two-input task must notice an input ending in any step, not only when
// it reads that input's batch: a channel blocked by an alignment keeps its
// batches (its end among them) until the alignment completes, which a
// barrier on the other input does. With periodic checkpoints, bounded
// sources end right behind the final checkpoint's barrier, so the first
// input's ends were often handled while draining the stash from a barrier
// on the second input, and the task waited for a batch of the first input
// for ever (found with the agent's answers input, 2026-12-06).
func TestTwoInputEndsAfterAStashedEnd(t *testing.T) {
	for i := range 8 {
		a := make([]int, 50)
		b := make([]int, 50)
		for j := range a {
			a[j], b[j] = j, 1000+j
		}
		env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp"), Interval: 5 * time.Millisecond}})
		ts := watermark.NoWatermarks[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true })
		sa := weir.FromSlice(env, "a", a, ts)
		sb := weir.Transform(weir.FromSlice(env, "b", b, ts), "slow",
			func() runtime.OneInputOperator[int, int] { return &slowBarrier{} })
		both := weir.CoFlatMap(sa, sb, "both", func(v int, emit func(int)) { emit(v) }, func(v int, emit func(int)) { emit(v) })
		got := weir.Collect(both)
		ctx := testCtx(t)
		job, err := env.Start(ctx)
		must(t, err)
		if err := job.Wait(); err != nil {
			t.Fatalf("run %d: the job did not end: %v", i, err)
		}
		if n := len(got.Values()); n != len(a)+len(b) {
			t.Fatalf("run %d: %d records out, want %d", i, n, len(a)+len(b))
		}
	}
}
