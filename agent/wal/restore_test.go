package wal_test

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// phasedSource emits recs[i] once gates[i] is closed (a nil or missing
// gate does not wait), then waits until end is closed.
type phasedSource struct {
	recs  []string
	gates []<-chan struct{}
	end   <-chan struct{}
}

func (s phasedSource) CreateReader(ctx runtime.SourceContext) (runtime.Reader[string], error) {
	r := &phasedReader{s: s}
	if ctx.Restored != nil {
		items, err := ctx.Restored.List(runtime.SplitsList)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			n, _ := binary.Varint(it)
			r.next = int(n)
		}
	}
	return r, nil
}

type phasedReader struct {
	s     phasedSource
	next  int
	ready <-chan struct{}
}

func (r *phasedReader) Poll(out runtime.SourceOutput[string]) (runtime.PollStatus, error) {
	for r.next < len(r.s.recs) {
		if r.next < len(r.s.gates) && r.s.gates[r.next] != nil {
			g := r.s.gates[r.next]
			select {
			case <-g:
			default:
				r.ready = g
				return runtime.Wait, nil
			}
		}
		out.Collect(0, r.s.recs[r.next], int64(r.next))
		r.next++
	}
	select {
	case <-r.s.end:
		return runtime.Done, nil
	default:
		r.ready = r.s.end
		return runtime.Wait, nil
	}
}
func (r *phasedReader) Ready() <-chan struct{} { return r.ready }
func (r *phasedReader) Close() error           { return nil }
func (r *phasedReader) SnapshotSplits(int64) ([][]byte, error) {
	return [][]byte{binary.AppendVarint(nil, int64(r.next))}, nil
}

// restoreJob runs an agent charging once per input (a durable call) on the
// WAL in walDir, with two inputs, "a" and "b" (after gate).
type restoreJob struct {
	t       *testing.T
	cpDir   string
	charges atomic.Int64
	outs    atomic.Int64
}

func (j *restoreJob) build(walDir, restore string, retain int, allow bool, gate, end <-chan struct{}) *weir.Environment {
	a := &agent.Agent{Actions: []agent.Action{agent.NewAction("pay", func(c *agent.RunnerContext, ev agent.Event) error {
		in, _ := agent.Input[string](ev)
		r, err := agent.Durable(c, "charge", in, func(context.Context, string) (string, error) {
			j.charges.Add(1)
			return "receipt " + in, nil
		})
		if err != nil {
			return err
		}
		c.Output(r)
		return nil
	}, agent.TypeInput)}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
		Checkpoint: runtime.CheckpointConfig{Dir: j.cpDir, Retain: retain, RestoreFrom: restore}})
	src := weir.FromSource[string](env, "src", phasedSource{recs: []string{"a", "b"}, gates: []<-chan struct{}{nil, gate}, end: end},
		watermark.NoWatermarks[string]()).UID("src")
	out := agent.Apply[string, string, string](weir.KeyBy(src, func(s string) string { return s }), "agent", a,
		agent.Options{Store: wal.Factory(walDir, wal.Options{NoSync: true}), AllowRepeatedSideEffects: allow}).UID("agent")
	weir.ToSink(out, "sink", func(*runtime.Context) (weir.SinkWriter[string], error) {
		return weir.SinkFunc[string](func(weir.Record[string]) error { j.outs.Add(1); return nil }), nil
	})
	return env
}

// waitOuts waits until n outputs have been written.
func (j *restoreJob) waitOuts(ctx context.Context, n int64) {
	j.t.Helper()
	for j.outs.Load() < n {
		select {
		case <-ctx.Done():
			j.t.Fatalf("waiting for %d outputs: %v (have %d)", n, ctx.Err(), j.outs.Load())
		case <-time.After(time.Millisecond):
		}
	}
}

// settle waits until the agent subtask has run every letter posted so
// far (the completion of the last checkpoint, and with it the start of its
// prune, which Cancel waits for).
func settle(t *testing.T, ctx context.Context) {
	t.Helper()
	for len(agent.Status(ctx, "agent")) != 1 {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
}

// TestRestoreWithAnotherWAL: a checkpoint taken with one WAL directory and
// restored with another (a new directory, or the job restored on another
// host) fails with an error naming the directories instead of running the
// checkpoint's actions again; AllowRepeatedSideEffects lets it go on.
func TestRestoreWithAnotherWAL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := t.TempDir()
	j := &restoreJob{t: t, cpDir: filepath.Join(base, "cp")}
	gate, end := make(chan struct{}), make(chan struct{})
	job, err := j.build(filepath.Join(base, "wal"), "", 0, false, gate, end).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j.waitOuts(ctx, 1)
	_, cp, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(gate)
	j.waitOuts(ctx, 2)
	job.Cancel()
	job.Wait()

	other := filepath.Join(base, "other-host-wal")
	err = j.build(other, cp, 0, false, gate, end).Execute(ctx)
	if !errors.Is(err, agent.ErrStatesMissing) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), filepath.Join(base, "wal")) {
		t.Fatalf("restore with another WAL directory: %v; want agent.ErrStatesMissing naming both directories", err)
	}
	if n := j.charges.Load(); n != 2 {
		t.Fatalf("%d charges after the refused restore, want 2", n)
	}

	close(end)
	if err := j.build(filepath.Join(base, "third-wal"), cp, 0, true, gate, end).Execute(ctx); err != nil {
		t.Fatalf("restore with AllowRepeatedSideEffects: %v", err)
	}
	if n := j.charges.Load(); n != 3 {
		t.Fatalf("%d charges after the allowed restore, want 3 (b charged again)", n)
	}
}

// TestRestorePastPruneHorizon: a savepoint older than the WAL's prune
// horizon (a checkpoint after it completed and pruned the state of an
// input finished after the savepoint) is refused; AllowRepeatedSideEffects
// restores it, running that input's action again.
func TestRestorePastPruneHorizon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := t.TempDir()
	walDir := filepath.Join(base, "wal")
	j := &restoreJob{t: t, cpDir: filepath.Join(base, "cp")}
	gate, end := make(chan struct{}), make(chan struct{})
	job, err := j.build(walDir, "", 1, false, gate, end).Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j.waitOuts(ctx, 1)
	sp := filepath.Join(base, "savepoint")
	spID, err := job.TriggerSavepoint(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	close(gate)
	j.waitOuts(ctx, 2)
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, ctx)
	job.Cancel()
	job.Wait()

	err = j.build(walDir, sp, 1, false, gate, end).Execute(ctx)
	if !errors.Is(err, agent.ErrStatesMissing) || !strings.Contains(err.Error(), "prune horizon") {
		t.Fatalf("restore of savepoint %d past the prune horizon: %v; want agent.ErrStatesMissing about the prune horizon", spID, err)
	}
	if n := j.charges.Load(); n != 2 {
		t.Fatalf("%d charges after the refused restore, want 2", n)
	}

	close(end)
	if err := j.build(walDir, sp, 1, true, gate, end).Execute(ctx); err != nil {
		t.Fatalf("restore with AllowRepeatedSideEffects: %v", err)
	}
	if n := j.charges.Load(); n != 3 {
		t.Fatalf("%d charges after the allowed restore, want 3 (b charged again)", n)
	}
}
