package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// TestTriggerAfterJobEnded: checkpoint and savepoint triggers on a job that
// has ended return ErrJobStopped at once, even with a context that is never
// cancelled (they waited forever before).
func TestTriggerAfterJobEnded(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	weir.Collect(weir.FromSlice(env, "src", []event{{Key: "a", TS: 1}}, strategy()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() {
		_, _, err := job.TriggerCheckpoint(context.Background())
		errs <- err
	}()
	go func() {
		_, err := job.TriggerSavepoint(context.Background(), t.TempDir()+"/sp")
		errs <- err
	}()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, runtime.ErrJobStopped) || !errors.Is(err, runtime.ErrCheckpointAborted) {
				t.Fatalf("trigger after the job ended: %v, want ErrJobStopped (and ErrCheckpointAborted)", err)
			}
		case <-ctx.Done():
			t.Fatal("a trigger after the job ended is still waiting")
		}
	}
}
