package runtime_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// gatedSplits is a source of `splits` splits of `perSplit` records each,
// which emits records only up to a limit the test raises, and whose split
// positions restore at any parallelism (like Kafka partitions).
type gatedSplits struct {
	splits   int
	perSplit int64
	mu       sync.Mutex
	limit    int64
	raised   chan struct{}
}

func newGatedSplits(splits int, perSplit int64) *gatedSplits {
	return &gatedSplits{splits: splits, perSplit: perSplit, raised: make(chan struct{})}
}

func (g *gatedSplits) setLimit(n int64) {
	g.mu.Lock()
	g.limit = n
	close(g.raised)
	g.raised = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedSplits) state() (int64, chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit, g.raised
}

type splitPos struct{ split, next int64 }

func (g *gatedSplits) CreateReader(ctx runtime.SourceContext) (runtime.Reader[evt], error) {
	r := &gatedReader{g: g}
	if ctx.Restored != nil {
		items, err := ctx.Restored.List(runtime.SplitsList)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			s, n := binary.Varint(it)
			p, _ := binary.Varint(it[n:])
			r.pos = append(r.pos, splitPos{s, p})
		}
	} else {
		for s := ctx.Subtask; s < g.splits; s += ctx.Parallelism {
			r.pos = append(r.pos, splitPos{int64(s), 0})
		}
	}
	return r, nil
}

type gatedReader struct {
	g     *gatedSplits
	pos   []splitPos
	ready chan struct{}
}

type evt struct {
	Key string
	TS  int64
}

func (r *gatedReader) Poll(out runtime.SourceOutput[evt]) (runtime.PollStatus, error) {
	limit, raised := r.g.state()
	done, emitted := 0, false
	for i := range r.pos {
		p := &r.pos[i]
		out.AddSplit(int(p.split))
		for k := 0; k < 50 && p.next < min(limit, r.g.perSplit); k++ {
			ts := p.next*10 + p.split
			out.Collect(int(p.split), evt{Key: fmt.Sprintf("key-%d", (p.next*7+p.split)%13), TS: ts}, ts)
			p.next++
			emitted = true
		}
		if p.next >= r.g.perSplit {
			out.FinishSplit(int(p.split))
			done++
		}
	}
	if done == len(r.pos) {
		return runtime.Done, nil
	}
	if !emitted {
		r.ready = raised
		return runtime.Wait, nil
	}
	return runtime.More, nil
}

func (r *gatedReader) Ready() <-chan struct{} { return r.ready }
func (r *gatedReader) Close() error           { return nil }

func (r *gatedReader) SnapshotSplits(int64) ([][]byte, error) {
	var items [][]byte
	for _, p := range r.pos {
		items = append(items, binary.AppendVarint(binary.AppendVarint(nil, p.split), p.next))
	}
	return items, nil
}

// windowCount counts, at an event-time timer 25 ms after each record, the
// key's records with timestamps up to the timer: a result that depends only
// on event time, so any parallelism and any restore must give the same.
type windowCount struct {
	ts *state.ListState[string, int64]
}

func (w *windowCount) Open(ctx *weir.KeyedContext[string, string]) error {
	var err error
	w.ts, err = state.List[string, int64](ctx.State(), "ts")
	return err
}

func (w *windowCount) ProcessElement(e evt, ctx *weir.KeyedContext[string, string]) error {
	w.ts.Add(e.TS)
	ctx.RegisterEventTimeTimer(e.TS + 25)
	return nil
}

func (w *windowCount) OnTimer(ts int64, ctx *weir.KeyedContext[string, string]) error {
	n := 0
	for _, t := range w.ts.Get() {
		if t <= ts {
			n++
		}
	}
	ctx.Collect(fmt.Sprintf("%s %d %d", ctx.Key(), ts, n))
	return nil
}

func buildRescaleJob(par int, src *gatedSplits, out, restore, backend string, chkDir ...string) *weir.Environment {
	cc := runtime.CheckpointConfig{RestoreFrom: restore}
	if len(chkDir) > 0 {
		cc.Dir = chkDir[0]
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: par, MaxParallelism: 128,
		Checkpoint:   cc,
		StateBackend: runtime.StateBackendConfig{Kind: backend}})
	s := weir.FromSource[evt](env, "events", src, watermark.ForMonotonous[evt]()).UID("events")
	counts := weir.Process(weir.KeyBy(s, func(e evt) string { return e.Key }), "count",
		func() weir.KeyedProcessFunction[string, evt, string] { return &windowCount{} }).UID("count")
	weir.TwoPhaseCommit(counts, "sink", file.ExactlyOnce(out, func(s string) ([]byte, error) { return []byte(s), nil })).UID("sink")
	return env
}

func lines(t *testing.T, dir string) []string {
	t.Helper()
	m, err := file.Committed(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, b := range m {
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				all = append(all, l)
			}
		}
	}
	slices.Sort(all)
	return all
}

// TestRescaleThroughSavepoints runs 2 -> 4 -> 1 subtasks through
// savepoints, with keyed state and pending timers carried across, and
// compares with a run that never stops.
func TestRescaleThroughSavepoints(t *testing.T) {
	rescaleThroughSavepoints(t, [3]string{state.BackendMemory, state.BackendMemory, state.BackendMemory}, false)
}

// TestRescaleThroughNativeCheckpoints rescales 2 -> 4 -> 1 through
// checkpoints of the Pebble backend (native, incremental: range deletes
// for the key groups that leave, others copied in), then once more from a
// native checkpoint into the memory backend.
func TestRescaleThroughNativeCheckpoints(t *testing.T) {
	rescaleThroughSavepoints(t, [3]string{state.BackendPebble, state.BackendPebble, state.BackendPebble}, true)
	rescaleThroughSavepoints(t, [3]string{state.BackendPebble, state.BackendPebble, state.BackendMemory}, true)
}

// TestRescaleThroughSavepointsAcrossBackends is TestRescaleThroughSavepoints
// with the Pebble backend, switching to the memory backend and back at the
// savepoints: savepoints are backend-independent.
func TestRescaleThroughSavepointsAcrossBackends(t *testing.T) {
	rescaleThroughSavepoints(t, [3]string{state.BackendPebble, state.BackendMemory, state.BackendPebble}, false)
}

// rescaleThroughSavepoints runs the job at parallelism 2, 4 and 1 with the
// given backends, stopping it twice at a savepoint (or, with checkpoints,
// at a checkpoint) and restarting from it.
func rescaleThroughSavepoints(t *testing.T, backends [3]string, checkpoints bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const splits, per = 6, 300
	refOut := filepath.Join(t.TempDir(), "ref")
	ref := newGatedSplits(splits, per)
	ref.setLimit(per)
	if err := buildRescaleJob(1, ref, refOut, "", "").Execute(ctx); err != nil {
		t.Fatal(err)
	}
	want := lines(t, refOut)
	if len(want) == 0 {
		t.Fatal("reference run produced nothing")
	}

	out := filepath.Join(t.TempDir(), "out")
	restore := ""
	var chk []string
	if checkpoints {
		chk = []string{filepath.Join(t.TempDir(), "chk")}
	}
	for phase, par := range []int{2, 4, 1} {
		src := newGatedSplits(splits, per)
		env := buildRescaleJob(par, src, out, restore, backends[phase], chk...)
		job, err := env.Start(ctx)
		if err != nil {
			t.Fatalf("phase %d: %v", phase, err)
		}
		if phase == 2 {
			src.setLimit(per)
			if err := job.Wait(); err != nil {
				t.Fatalf("phase %d: %v", phase, err)
			}
			break
		}
		limit := int64(per * (phase + 1) / 3)
		src.setLimit(limit)
		// Wait until every split has reached the limit.
		deadline := time.Now().Add(30 * time.Second)
		for env.Metrics().Sum("events", "recordsRead") < int64(splits)*(limit-int64(per*phase/3)) {
			if time.Now().After(deadline) {
				t.Fatalf("phase %d: sources did not reach %d", phase, limit)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if checkpoints {
			var err error
			if _, restore, err = job.TriggerCheckpoint(ctx); err != nil {
				t.Fatalf("phase %d: checkpoint: %v", phase, err)
			}
			if backends[phase] == state.BackendPebble {
				s, err := checkpoint.Read(restore)
				if err != nil {
					t.Fatal(err)
				}
				if s.Operator("count").Subtasks[0].Native == nil {
					t.Fatalf("phase %d: the checkpoint of the Pebble backend is not native", phase)
				}
			}
		} else {
			restore = filepath.Join(t.TempDir(), fmt.Sprintf("savepoint-%d", phase))
			if _, err := job.TriggerSavepoint(ctx, restore); err != nil {
				t.Fatalf("phase %d: savepoint: %v", phase, err)
			}
		}
		job.Cancel()
		job.Wait()
	}
	got := lines(t, out)
	if !slices.Equal(got, want) {
		t.Fatalf("rescaled run: %d lines, reference %d; first difference %s", len(got), len(want), diffAt(got, want))
	}
}

func diffAt(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%q vs %q", a[i], b[i])
		}
	}
	return "in length"
}
