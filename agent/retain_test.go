package agent

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// TestRestoreOlderRetainedCheckpoint: with two checkpoints retained, a
// restore from the older one after the newer has completed replays the
// input finished between them from the store instead of calling the model
// again (its state was pruned when the newer checkpoint completed before
// G11).
func TestRestoreOlderRetainedCheckpoint(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "cp")
	store := NewMemoryStore()
	build := func(m *gatedModel, restore string, p1, p2 <-chan struct{}) (*weir.Environment, *recorder[string]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
			Checkpoint: runtime.CheckpointConfig{Dir: dir, Retain: 2, RestoreFrom: restore}})
		src := weir.FromSource[msg](env, "src", scripted(
			rec(msg{Key: "A", Text: "A1"}, 1),
			pause[msg](p1),
			rec(msg{Key: "B", Text: "B1"}, 2),
			pause[msg](p2),
		), watermark.NoWatermarks[msg]()).UID("src")
		out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", chatAgent(m), Options{Store: store.Factory()}).UID("agent")
		return env, record(out)
	}
	has := func(v string) func([]recEvent[string]) bool {
		return func(evs []recEvent[string]) bool {
			return slices.ContainsFunc(evs, func(e recEvent[string]) bool { return !e.wm && e.v == v })
		}
	}
	m1 := newGatedModel()
	p1, p2 := make(chan struct{}), make(chan struct{})
	env, rc := build(m1, "", p1, p2)
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc.waitFor(t, ctx, "A1's output", has("re:A1"))
	id1, cp1, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(p1)
	rc.waitFor(t, ctx, "B1's output", has("re:B1"))
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// The completion of checkpoint 2 was posted to the subtask before
	// TriggerCheckpoint returned: once Status answers, its prune has
	// started, and Cancel waits for it.
	waitStatus(t, ctx, "agent", "checkpoint 2 notified", func(SubtaskStatus) bool { return true })
	job.Cancel()
	job.Wait()
	if m1.calls.Load() != 2 {
		t.Fatalf("first run: %d model calls, want 2", m1.calls.Load())
	}

	m2 := newGatedModel()
	open := make(chan struct{})
	close(open)
	env2, rc2 := build(m2, cp1, open, open)
	job2, err := env2.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc2.waitFor(t, ctx, "B1's output after the restore", has("re:B1"))
	job2.Cancel()
	job2.Wait()
	if n := m2.calls.Load(); n != 0 {
		t.Fatalf("restore from checkpoint %d (retained): the model was called %d times, want 0 (B1 finished after the checkpoint and before checkpoint 2; its state must be replayed)", id1, n)
	}
	if n := env2.Metrics().Sum("agent", "actionsReplayed"); n != 1 {
		t.Fatalf("actionsReplayed %d, want 1 (B1)", n)
	}
}
