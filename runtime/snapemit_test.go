package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// holding keeps every record it gets and emits what it holds from
// SnapshotState (as cluster's exchange operator sends its batches at a
// barrier); in counts what it got up to its latest snapshot.
type holding struct {
	runtime.Base[int64]
	held []runtime.Record[int64]
	n    int64
	in   atomic.Int64
}

func (h *holding) ProcessRecord(r runtime.Record[int64]) error {
	h.held = append(h.held, r)
	h.n++
	return nil
}

func (h *holding) SnapshotState(*runtime.SnapshotWriter) error {
	for _, r := range h.held {
		h.Out.Collect(r)
	}
	h.held = h.held[:0]
	h.in.Store(h.n)
	return nil
}

// seeing counts the records it gets; at counts them at its latest
// snapshot.
type seeing struct {
	runtime.Base[int64]
	n  int64
	at atomic.Int64
}

func (s *seeing) ProcessRecord(runtime.Record[int64]) error { s.n++; return nil }
func (s *seeing) SnapshotState(*runtime.SnapshotWriter) error {
	s.at.Store(s.n)
	return nil
}

// Records an operator emits from SnapshotState precede the barrier: the
// operator after it, chained or in a task of its own, has them all at its
// snapshot of the same checkpoint.
func TestRecordsEmittedAtASnapshotPrecedeTheBarrier(t *testing.T) {
	for _, chained := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, DisableChaining: !chained,
			Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
		src := weir.Generate(env, "numbers", -1, func(i int64) weir.Record[int64] {
			return weir.Record[int64]{Value: i, Timestamp: i}
		}, watermark.ForMonotonous[int64]())
		h, s := &holding{}, &seeing{}
		held := weir.Transform(src, "hold", func() runtime.OneInputOperator[int64, int64] { return h })
		weir.Transform(held, "see", func() runtime.OneInputOperator[int64, int64] { return s })
		job, err := env.Start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
				t.Fatal(err)
			}
			if in, at := h.in.Load(), s.at.Load(); in != at {
				t.Fatalf("chained %v: %d records in before the barrier, %d after it at the next operator's snapshot", chained, in, at)
			}
		}
		job.Cancel()
		job.Wait()
		cancel()
	}
}
