package agent

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// TestKeyedStateOnPebble: with the Pebble state backend
// (Config.StateBackend) the agent's keyed state is kept in Pebble like
// every keyed operator's: the subtask has a Pebble working directory, a
// key that went idle is read back from Pebble with its memory and sequence
// number (B2), and a savepoint taken with an input running and another
// waiting restores onto Pebble with both resumed.
func TestKeyedStateOnPebble(t *testing.T) {
	ctx := testCtx(t)
	sdir := t.TempDir()
	m1 := newGatedModel()
	openA1 := m1.gate("A1")
	defer openA1()
	p1, end := make(chan struct{}), make(chan struct{})
	build := func(m model.ChatModel, restore string, p1, end <-chan struct{}) (*weir.Environment, *recorder[string]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
			StateBackend: runtime.StateBackendConfig{Kind: state.BackendPebble, Dir: sdir},
			Checkpoint:   runtime.CheckpointConfig{RestoreFrom: restore}})
		src := weir.FromSource[msg](env, "src", scripted(
			rec(msg{Key: "B", Text: "B1"}, 1),
			pause[msg](p1),
			rec(msg{Key: "B", Text: "B2"}, 2),
			rec(msg{Key: "A", Text: "A1"}, 3),
			rec(msg{Key: "A", Text: "A2"}, 4),
			wmark[msg](4),
			pause[msg](end),
			rec(msg{Key: "A", Text: "A3"}, 5),
			rec(msg{Key: "B", Text: "B3"}, 6),
		), watermark.NoWatermarks[msg]()).UID("src")
		out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", countingAgent(m), Options{}).UID("agent")
		return env, record(out)
	}
	has := func(v string) func([]recEvent[string]) bool {
		return func(evs []recEvent[string]) bool {
			return slices.ContainsFunc(evs, func(e recEvent[string]) bool { return !e.wm && e.v == v })
		}
	}
	env, rc := build(m1, "", p1, end)
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc.waitFor(t, ctx, "B1's output", has("re:B1 count=1 seq=0"))
	close(p1)
	rc.waitFor(t, ctx, "B2's output, B's state read back", has("re:B2 count=2 seq=1"))
	m1.waitEntered(t, ctx, "A1")
	waitStatus(t, ctx, "agent", "A2 pending", func(s SubtaskStatus) bool { return s.WaitingInputs == 1 && s.HeldWatermarks == 1 })
	dirs, err := filepath.Glob(filepath.Join(sdir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(dirs, func(d string) bool { return strings.Contains(filepath.Base(d), "agent") }) {
		t.Fatalf("Pebble working directories %q: none for the agent operator (its keyed state is not on the job's backend)", dirs)
	}
	sp := filepath.Join(t.TempDir(), "savepoint")
	if _, err := job.TriggerSavepoint(ctx, sp); err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	job.Wait()

	done := make(chan struct{})
	close(done)
	env2, rc2 := build(newGatedModel(), sp, done, done)
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _ := rc2.snapshot()
	var vals []string
	for _, e := range evs {
		if !e.wm {
			vals = append(vals, e.v)
		}
	}
	slices.Sort(vals)
	want := []string{"re:A1 count=1 seq=0", "re:A2 count=2 seq=1", "re:A3 count=3 seq=2", "re:B3 count=3 seq=2"}
	if !slices.Equal(vals, want) {
		t.Fatalf("restored outputs %q, want %q", vals, want)
	}
}
