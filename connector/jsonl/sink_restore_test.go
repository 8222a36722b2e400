package jsonl_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// pausingReader emits the numbers from its restored position up to pause,
// then waits (a live source with nothing new), or, restored at pause or
// later, up to end and ends. Its position is its split's state.
type pausingReader struct {
	next, pause, end int64
	resumed          bool // restored at pause or later
}

func (r *pausingReader) Poll(out runtime.SourceOutput[int64]) (runtime.PollStatus, error) {
	stop := r.pause
	if r.resumed {
		stop = r.end
	}
	for ; r.next < stop; r.next++ {
		out.Collect(0, r.next, r.next)
	}
	if r.next >= r.end {
		return runtime.Done, nil
	}
	return runtime.Wait, nil
}

func (r *pausingReader) Ready() <-chan struct{} { return nil }
func (r *pausingReader) Close() error           { return nil }

func (r *pausingReader) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{binary.AppendVarint(nil, r.next)}, nil
}

func pausingJob(out string, cfg weir.Config) *weir.Environment {
	env := weir.NewEnvironment(cfg)
	src := weir.FromSource(env, "numbers", runtime.SourceFunc[int64](func(ctx runtime.SourceContext) (runtime.Reader[int64], error) {
		r := &pausingReader{pause: 100, end: 200}
		if ctx.Restored != nil {
			items, err := ctx.Restored.List(runtime.SplitsList)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				v, _ := binary.Varint(it)
				r.next = v
			}
			r.resumed = r.next >= r.pause
		}
		return r, nil
	}), watermark.ForMonotonous[int64]()).UID("numbers")
	weir.ToSink(src, "out", jsonl.Sink[int64](out)).UID("out")
	return env
}

// J6: at a checkpoint the sink's buffered lines reach the file (a crash
// after it loses none of the records before it, which a restore does not
// send again), and a job restored from the checkpoint appends to the file
// instead of truncating it: the two runs together leave every record in it.
func TestSinkFlushesAtCheckpointsAndAppendsAfterRestore(t *testing.T) {
	dir := t.TempDir()
	out, chk := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "chk")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	job, err := pausingJob(out, weir.Config{Parallelism: 1, Checkpoint: runtime.CheckpointConfig{Dir: chk}}).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cp string
	for {
		// The first checkpoint may come before the reader's first records:
		// take checkpoints until the file holds the first 100.
		if _, cp, err = job.TriggerCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(readLines(t, out)); n == 100 {
			break
		} else if n != 0 || ctx.Err() != nil {
			t.Fatalf("after a checkpoint the file holds %d lines; want 0 (none read yet) or 100", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	job.Cancel()
	_ = job.Wait()

	job, err = pausingJob(out, weir.Config{Parallelism: 1,
		Checkpoint: runtime.CheckpointConfig{Dir: chk, RestoreFrom: cp}}).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, out)
	if len(lines) != 200 {
		t.Fatalf("after the restored run the file holds %d lines; want 200 (the first run's 100, then the rest)", len(lines))
	}
	for i, l := range lines {
		if l != fmt.Sprint(i) {
			t.Fatalf("line %d is %q; want %d", i+1, l, i)
		}
	}
}
