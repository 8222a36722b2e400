package agent

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// logRecorder is a Listener keeping every entry.
type logRecorder struct {
	mu sync.Mutex
	es []LogEntry
}

func (l *logRecorder) OnEntry(e *LogEntry) { l.mu.Lock(); l.es = append(l.es, *e); l.mu.Unlock() }

func (l *logRecorder) kinds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.es {
		k := e.Action + ":" + e.Kind
		if e.Replayed {
			k += "(replayed)"
		}
		out = append(out, k)
	}
	return out
}

// TestEventLogMarksReplays: after a restore, the action that completed
// after the checkpoint is replayed from the store, and the log says so:
// its replay, memory update and output are marked replayed; the action
// that was cut off by the crash (logged with its error, the cancellation)
// runs live again and is logged as the first run was.
func TestEventLogMarksReplays(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	var g *gates
	a := &Agent{Actions: []Action{
		NewAction("first", func(c *RunnerContext, ev Event) error {
			if err := g.wait(c.Context(), "first"); err != nil {
				return err
			}
			if err := c.ShortTerm().Set("x", 7); err != nil {
				return err
			}
			c.Output("first")
			return c.Send(NewEvent("next", "payload", nil))
		}, TypeInput),
		NewAction("second", func(c *RunnerContext, ev Event) error {
			if err := g.wait(c.Context(), "second"); err != nil {
				return err
			}
			c.Output("second")
			return nil
		}, "next"),
	}}
	job := func(l Listener, dir, restore string, steps ...step[msg]) *weir.Environment {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
			Checkpoint: runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore}})
		src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]()).UID("src")
		out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{Store: store.Factory(), Listeners: []Listener{l}}).UID("agent")
		record(out)
		return env
	}
	g = newGates("first", "second")
	log1 := &logRecorder{}
	env := job(log1, filepath.Join(t.TempDir(), "cp"), "", rec(msg{Key: "A"}, 1), pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env,
		func() { g.waitArrived(t, ctx, "first") },
		func() { g.release("first"); g.waitArrived(t, ctx, "second") })
	if got, want := log1.kinds(), []string{"first:action_start", "first:action_end", "first:memory_update", "first:output", "second:action_start", "second:action_error"}; !slices.Equal(got, want) {
		t.Fatalf("first run logged %v, want %v", got, want)
	}
	g = newGates()
	done := make(chan struct{})
	close(done)
	log2 := &logRecorder{}
	env2 := job(log2, filepath.Join(t.TempDir(), "cp2"), cp, rec(msg{Key: "A"}, 1), pause[msg](done))
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"first:action_replayed(replayed)", "first:memory_update(replayed)", "first:output(replayed)",
		"second:action_start", "second:action_end", "second:output"}
	if got := log2.kinds(); !slices.Equal(got, want) {
		t.Fatalf("restored run logged %v, want %v", got, want)
	}
}
