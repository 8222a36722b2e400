package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// counting counts its records; its snapshot captures the count in the
// synchronous part and writes it in the asynchronous part, which waits for
// the test.
type counting struct {
	runtime.Base[int64]
	n       atomic.Int64
	started chan int64    // the count captured, when the async part starts
	release chan struct{} // closed by the test to let the async part finish
	fail    atomic.Bool   // make the async part fail
}

func (c *counting) ProcessRecord(r runtime.Record[int64]) error {
	c.n.Add(1)
	c.Out.Collect(r)
	return nil
}
func (c *counting) EndInput() error { return nil }
func (c *counting) Close() error    { return nil }

func (c *counting) SnapshotState(w *runtime.SnapshotWriter) error {
	captured := c.n.Load()
	w.Async(func() error {
		c.started <- captured
		<-c.release
		if c.fail.Load() {
			return errors.New("storage unavailable")
		}
		w.List("count", checkpoint.Union, [][]byte{binary.AppendVarint(nil, captured)})
		return nil
	})
	return nil
}

// The asynchronous part of a snapshot runs while the subtask processes
// records; the checkpoint completes only after it, holds what the
// synchronous part captured, and fails when the asynchronous part fails.
func TestAsynchronousSnapshotPart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := weir.NewEnvironment(weir.Config{Parallelism: 1,
		Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	src := weir.Generate(env, "numbers", -1, func(i int64) weir.Record[int64] {
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.ForMonotonous[int64]())
	op := &counting{started: make(chan int64, 1), release: make(chan struct{})}
	out := weir.Transform(src, "count", func() runtime.OneInputOperator[int64, int64] { return op })
	weir.ToSink(out, "discard", func(*runtime.Context) (weir.SinkWriter[int64], error) {
		return weir.SinkFunc[int64](func(weir.Record[int64]) error { return nil }), nil
	})
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		path string
		err  error
	}
	trigger := func() chan result {
		ch := make(chan result, 1)
		go func() {
			_, path, err := job.TriggerCheckpoint(ctx)
			ch <- result{path, err}
		}()
		return ch
	}

	done := trigger()
	captured := <-op.started
	// The subtask goes on processing while the asynchronous part waits.
	for op.n.Load() < captured+10_000 {
		select {
		case r := <-done:
			t.Fatalf("checkpoint completed before its asynchronous part: %+v", r)
		case <-ctx.Done():
			t.Fatal("no records processed while the asynchronous part ran")
		default:
			time.Sleep(time.Millisecond)
		}
	}
	op.release <- struct{}{}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	snap, err := checkpoint.Read(r.path)
	if err != nil {
		t.Fatal(err)
	}
	items, err := snap.Operator("count").ListFor("count", 0, 1)
	if err != nil || len(items) != 1 {
		t.Fatalf("list count: %v, %v", items, err)
	}
	b, _ := items[0].Bytes()
	if got, _ := binary.Varint(b); got != captured {
		t.Fatalf("checkpoint holds count %d, want %d (captured in the synchronous part)", got, captured)
	}

	// A failing asynchronous part aborts the checkpoint; the next one works.
	op.fail.Store(true)
	done = trigger()
	<-op.started
	op.release <- struct{}{}
	if r := <-done; !errors.Is(r.err, runtime.ErrCheckpointAborted) {
		t.Fatalf("checkpoint with a failing asynchronous part: %v, want ErrCheckpointAborted", r.err)
	}
	op.fail.Store(false)
	done = trigger()
	<-op.started
	op.release <- struct{}{}
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}
}
