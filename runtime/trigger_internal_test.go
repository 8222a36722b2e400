package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir/watermark"
)

// endlessReader never ends and never emits: the job runs until cancelled.
type endlessReader struct{ ready chan struct{} }

func (r *endlessReader) Poll(SourceOutput[int]) (PollStatus, error) { return Wait, nil }
func (r *endlessReader) Ready() <-chan struct{}                     { return r.ready }
func (r *endlessReader) Close() error                               { return nil }

// snapOp passes records on and counts its snapshots; it fails each one
// with err when err is set.
type snapOp struct {
	Base[int]
	snaps *atomic.Int64
	err   error
}

func (o *snapOp) ProcessRecord(r Record[int]) error { o.Out.Collect(r); return nil }
func (o *snapOp) EndInput() error                   { return nil }
func (o *snapOp) SnapshotState(*SnapshotWriter) error {
	o.snaps.Add(1)
	return o.err
}

// startEndless starts a job of an endless source and a snapOp behind it.
func startEndless(t *testing.T, cp CheckpointConfig, snapErr error) (*Job, *atomic.Int64) {
	t.Helper()
	g := &Graph{}
	src := AddSource[int](g, "src", SourceFunc[int](func(SourceContext) (Reader[int], error) {
		return &endlessReader{ready: make(chan struct{})}, nil
	}), watermark.NoWatermarks[int]())
	snaps := &atomic.Int64{}
	op := AddOneInput[int, int](g, "snap", func() OneInputOperator[int, int] { return &snapOp{snaps: snaps, err: snapErr} })
	Connect[int](src, nil, op, 0, Rebalance[int]())
	j, err := Start(context.Background(), g, Config{Checkpoint: cp, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Cancel(); j.Wait() })
	return j, snaps
}

// A checkpoint asked of a job without CheckpointConfig.Dir fails at once
// with ErrNoCheckpointDir: no task snapshots anything (it used to fail
// only after a whole snapshot round, when the coordinator had nowhere to
// write it).
func TestTriggerCheckpointWithoutDirFailsAtOnce(t *testing.T) {
	j, snaps := startEndless(t, CheckpointConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err := j.TriggerCheckpoint(ctx)
	if !errors.Is(err, ErrNoCheckpointDir) {
		t.Fatalf("TriggerCheckpoint returned %v, want ErrNoCheckpointDir", err)
	}
	if n := snaps.Load(); n != 0 {
		t.Errorf("the operator was snapshotted %d times, want 0", n)
	}
	if cps := j.Checkpoints(); len(cps) != 0 {
		t.Errorf("Checkpoints() = %+v, want none", cps)
	}
}

// The error of a checkpoint aborted by an operator's failed snapshot
// matches both ErrCheckpointAborted and the operator's error (the cause
// was once formatted with %v and lost to errors.Is).
func TestAbortedCheckpointKeepsCause(t *testing.T) {
	errSnap := errors.New("snapshot: injected")
	j, snaps := startEndless(t, CheckpointConfig{Dir: t.TempDir()}, errSnap)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err := j.TriggerCheckpoint(ctx)
	if !errors.Is(err, ErrCheckpointAborted) || !errors.Is(err, errSnap) {
		t.Fatalf("TriggerCheckpoint returned %v, want an error matching ErrCheckpointAborted and the snapshot's error", err)
	}
	var oe *OperatorError
	if !errors.As(err, &oe) || oe.Operator != "snap" || oe.Phase != PhaseSnapshot {
		t.Errorf("TriggerCheckpoint returned %v, want an *OperatorError of operator snap in PhaseSnapshot", err)
	}
	if snaps.Load() == 0 {
		t.Error("the operator was never snapshotted")
	}
}
