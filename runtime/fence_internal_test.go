package runtime

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/watermark"
)

// idleReader emits nothing and never ends.
type idleReader struct{ ready chan struct{} }

func (r *idleReader) Poll(SourceOutput[int]) (PollStatus, error) { return Wait, nil }
func (r *idleReader) Ready() <-chan struct{}                     { return r.ready }
func (r *idleReader) Close() error                               { return nil }

// A job whose checkpoint storage is fenced (checkpoint.Fence) and whose
// base another owner then claims: its next checkpoint fails with
// checkpoint.ErrFenced, no checkpoint of it completes after the claim, and
// the job itself fails with that error (its tasks stop: nothing more is
// committed by them).
func TestFencedJobStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := filepath.Join(t.TempDir(), "chk")
	fence, _, _, err := checkpoint.Storage{}.ClaimLatest(base)
	if err != nil {
		t.Fatal(err)
	}
	g := &Graph{}
	src := AddSource[int](g, "src", SourceFunc[int](func(SourceContext) (Reader[int], error) {
		return &idleReader{ready: make(chan struct{})}, nil
	}), watermark.NoWatermarks[int]())
	n := AddOneInput[int, int](g, "op", func() OneInputOperator[int, int] {
		return &probeOp{name: "op", log: &yieldLog{}, mb: make(chan *Mailbox, 1)}
	})
	Connect[int](src, nil, n, 0, Forward[int]())
	job, err := Start(ctx, g, Config{Checkpoint: CheckpointConfig{Dir: base, Storage: checkpoint.Storage{Fence: fence}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatalf("checkpoint before the claim: %v", err)
	}
	// Another owner claims the base: it restores checkpoint 1.
	if _, _, id, err := (checkpoint.Storage{}).ClaimLatest(base); err != nil || id != 1 {
		t.Fatalf("the new owner restores %d (%v), want 1", id, err)
	}
	if _, _, err := job.TriggerCheckpoint(ctx); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("checkpoint after the claim: %v, want ErrFenced", err)
	}
	if err := job.Wait(); !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("the fenced job ended with %v, want ErrFenced", err)
	}
	if ids, err := checkpoint.List(base); err != nil || len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("complete checkpoints %v (%v), want [1]", ids, err)
	}
}
