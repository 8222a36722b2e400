package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// ttlAgent: input "set" stores tok (TTL 10s) and keep (no TTL); any other
// input outputs what short-term memory holds.
func ttlAgent() *Agent {
	return &Agent{Actions: []Action{NewAction("mem", func(c *RunnerContext, ev Event) error {
		in, err := Input[msg](ev)
		if err != nil {
			return err
		}
		st := c.ShortTerm()
		if in.Text == "set" {
			if err := st.SetTTL("tok", "t1", 10*time.Second); err != nil {
				return err
			}
			if err := st.Set("keep", "k1"); err != nil {
				return err
			}
			c.Output("set")
			return nil
		}
		tok, _, _ := Recall[string](st, "tok")
		keep, _, _ := Recall[string](st, "keep")
		c.Output(fmt.Sprintf("%s tok=%q keep=%q names=%v", in.Text, tok, keep, st.Names()))
		return nil
	}, TypeInput)}}
}

func counterOf(env *weir.Environment, name string) int64 {
	for _, x := range env.Metrics().Snapshot() {
		if x.Operator == "agent" && x.Name == name {
			return x.Value
		}
	}
	return -1
}

// TestMemoryTTLAcrossRestore: an entry with a TTL survives a checkpoint
// and restore with its deadline; after the restore it is visible before
// the deadline, invisible after it (whether or not its timer has fired),
// and the restored timer removes it; an entry without TTL stays.
func TestMemoryTTLAcrossRestore(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "cp")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	clk1 := clock.NewManual(t0)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Clock: clk1,
		Checkpoint: runtime.CheckpointConfig{Dir: dir}})
	src := weir.FromSource[msg](env, "src", scripted(
		rec(msg{Key: "A", Text: "set"}, 1),
		pause[msg](make(chan struct{})),
	), watermark.NoWatermarks[msg]()).UID("src")
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", ttlAgent(), Options{}).UID("agent"))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc.waitFor(t, ctx, "set", hasValue("set"))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, cpDir, err := job.TriggerCheckpoint(cctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}

	// Restored 5s later: tok has 5s left.
	clk2 := clock.NewManual(t0.Add(5 * time.Second))
	open := make(chan struct{})
	close(open)
	adv, end := make(chan struct{}), make(chan struct{})
	env2 := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Clock: clk2,
		Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp2"), RestoreFrom: cpDir}})
	src2 := weir.FromSource[msg](env2, "src", scripted(
		rec(msg{Key: "A", Text: "set"}, 1), // read before the checkpoint
		pause[msg](open),
		rec(msg{Key: "A", Text: "get1"}, 2),
		pause[msg](adv),
		rec(msg{Key: "A", Text: "get2"}, 3),
		pause[msg](end),
	), watermark.NoWatermarks[msg]()).UID("src")
	rc2 := record(Apply[string, msg, string](weir.KeyBy(src2, keyOfMsg), "agent", ttlAgent(), Options{}).UID("agent"))
	job2, err := env2.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job2.Cancel(); job2.Wait() }()
	want1 := `get1 tok="t1" keep="k1" names=[keep tok]`
	rc2.waitFor(t, ctx, want1, hasValue(want1))
	if n := counterOf(env2, "memoryExpired"); n != 0 {
		t.Fatalf("memoryExpired = %d before the deadline", n)
	}
	// Past the deadline: the restored timer fires and removes tok.
	clk2.Advance(6 * time.Second)
	for counterOf(env2, "memoryExpired") != 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("the restored TTL timer did not fire: memoryExpired = %d", counterOf(env2, "memoryExpired"))
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(adv)
	want2 := `get2 tok="" keep="k1" names=[keep]`
	rc2.waitFor(t, ctx, want2, hasValue(want2))
	close(end)
	if err := job2.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryTTLInvisibleBeforeTimer: an entry whose deadline has passed is
// invisible to an action even while its timer has not fired (here it
// cannot: the key's input is running when the clock passes the deadline,
// so the timer only marks it, and the next input must not see it).
func TestMemoryTTLInvisibleBeforeTimer(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	a := &Agent{Actions: []Action{NewAction("mem", func(c *RunnerContext, ev Event) error {
		in, _ := Input[msg](ev)
		st := c.ShortTerm()
		switch in.Text {
		case "set":
			c.Output("set")
			return st.SetTTL("tok", 1, time.Second)
		case "hold":
			entered <- struct{}{}
			<-gate
			ok := st.Has("tok")
			c.Output(fmt.Sprintf("hold sees tok: %v", ok))
		default:
			c.Output(fmt.Sprintf("%s sees tok: %v", in.Text, st.Has("tok")))
		}
		return nil
	}, TypeInput)}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk})
	src := weir.FromSource[msg](env, "src", scripted(
		rec(msg{Key: "A", Text: "set"}, 1),
		rec(msg{Key: "A", Text: "hold"}, 2),
		rec(msg{Key: "A", Text: "after"}, 3),
	), watermark.NoWatermarks[msg]())
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	clk.Advance(2 * time.Second) // the timer fires while "hold" runs
	close(gate)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	got := values(rc.events)
	want := []string{"set", "hold sees tok: true", "after sees tok: false"}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if n := counterOf(env, "memoryExpired"); n != 1 {
		t.Fatalf("memoryExpired = %d, want 1 (purged when the input finished)", n)
	}
}

func TestMemoryTTLRejected(t *testing.T) {
	var errs []string
	var mu sync.Mutex
	a := &Agent{Actions: []Action{NewAction("mem", func(c *RunnerContext, _ Event) error {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range []error{
			c.Sensory().SetTTL("x", 1, time.Second),
			c.ShortTerm().SetTTL("x", 1, 0),
			c.ShortTerm().Set(ttlPrefix+"x", 1),
		} {
			if err != nil {
				errs = append(errs, err.Error())
			}
		}
		return nil
	}, TypeInput)}}
	if _, _, err := runAgent[string](t, a, Options{}, rec(msg{Key: "A"}, 1)); err != nil {
		t.Fatal(err)
	}
	if len(errs) != 3 || !strings.Contains(errs[0], "only short-term") || !strings.Contains(errs[1], "at least 1ms") || !strings.Contains(errs[2], "reserved") {
		t.Fatalf("errors %q", errs)
	}
}

// memEventAgent: "write" actions set or delete entries; the action
// "watch" runs on memory updates of entries named cart.* (a CEL
// condition) and outputs them.
func memEventAgent(hook func(ctx context.Context) error) *Agent {
	return &Agent{Actions: []Action{
		NewAction("write", func(c *RunnerContext, ev Event) error {
			in, _ := Input[msg](ev)
			st := c.ShortTerm()
			switch in.Text {
			case "del":
				st.Delete("cart.items")
			case "same":
				return st.Set("cart.items", in.N-1) // unchanged value: no event
			default:
				if err := st.Set("cart.items", in.N); err != nil {
					return err
				}
				return st.Set("other", in.N)
			}
			return nil
		}, TypeInput),
		NewAction("watch", func(c *RunnerContext, ev Event) error {
			if hook != nil {
				if err := hook(c.Context()); err != nil {
					return err
				}
			}
			u, err := MemoryUpdateOf(ev)
			if err != nil {
				return err
			}
			c.Output(fmt.Sprintf("%v %s %s->%s by %s", u.Key, u.Name, orNone(u.Old), orNone(u.New), ev.Action))
			return nil
		}, TypeMemoryUpdated).WithCondition(`event.value.name.startsWith("cart.")`),
	}}
}

func orNone(b []byte) string {
	if b == nil {
		return "none"
	}
	return string(b)
}

// TestMemoryUpdateEvents: every committed change of a short-term entry
// sends one memory-updated event (old and new values), which triggers the
// actions listening to it with their conditions; unchanged values send
// none; the events appear in the event log.
func TestMemoryUpdateEvents(t *testing.T) {
	var logMu sync.Mutex
	var logged []LogEntry
	l := ListenerFunc(func(e *LogEntry) {
		logMu.Lock()
		logged = append(logged, *e)
		logMu.Unlock()
	})
	rc, m, err := runAgent[string](t, memEventAgent(nil), Options{Listeners: []Listener{l}},
		rec(msg{Key: "A", Text: "set", N: 1}, 1),
		rec(msg{Key: "A", Text: "set", N: 2}, 2),
		rec(msg{Key: "A", Text: "same", N: 3}, 3),
		rec(msg{Key: "A", Text: "del"}, 4),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A cart.items none->1 by write", "A cart.items 1->2 by write", "A cart.items 2->none by write"}
	if got := values(rc.events); !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	_ = m
	logMu.Lock()
	defer logMu.Unlock()
	starts := 0
	for _, e := range logged {
		if e.Kind == LogActionStart && e.Action == "watch" {
			if ev, ok := e.Data.(*Event); !ok || ev.Type != TypeMemoryUpdated {
				t.Fatalf("watch started on %#v", e.Data)
			}
			starts++
		}
	}
	if starts != 3 {
		t.Fatalf("the event log has %d starts of watch on memory updates, want 3", starts)
	}
}

// TestMemoryUpdateEventHoldsWatermark: a watermark after an input waits
// for the actions its memory updates trigger, since they belong to the
// input.
func TestMemoryUpdateEventHoldsWatermark(t *testing.T) {
	ctx := testCtx(t)
	entered := make(chan struct{}, 1)
	gate := make(chan struct{})
	end := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(
		rec(msg{Key: "A", Text: "set", N: 1}, 1),
		wmark[msg](5),
		pause[msg](end),
	), watermark.NoWatermarks[msg]())
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent",
		memEventAgent(func(context.Context) error { entered <- struct{}{}; <-gate; return nil }), Options{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the memory update did not trigger watch")
	}
	waitStatus(t, ctx, "agent", "the watermark held", func(s SubtaskStatus) bool { return s.HeldWatermarks == 1 })
	if evs, _ := rc.snapshot(); hasWatermark(5)(evs) {
		t.Fatalf("WM 5 left while the action of the memory update runs: %s", render(evs))
	}
	close(gate)
	evs := rc.waitFor(t, ctx, "WM 5", hasWatermark(5))
	if got := render(evs); got != "A cart.items none->1 by write@1 WM(5)" {
		t.Fatalf("got %s, want the update's output before WM(5)", got)
	}
	close(end)
}

// TestMemoryUpdateEventsOnceAcrossRestore: a checkpoint taken while the
// action of a memory update runs restores that action's task, not the
// write again: the update's output appears exactly once in all.
func TestMemoryUpdateEventsOnceAcrossRestore(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "cp")
	entered := make(chan struct{}, 4)
	build := func(env *weir.Environment, p <-chan struct{}, hook func(context.Context) error) *recorder[string] {
		src := weir.FromSource[msg](env, "src", scripted(
			rec(msg{Key: "A", Text: "set", N: 1}, 1),
			pause[msg](p),
			rec(msg{Key: "A", Text: "set", N: 2}, 2),
		), watermark.NoWatermarks[msg]()).UID("src")
		return record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", memEventAgent(hook), Options{}).UID("agent"))
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128, Checkpoint: runtime.CheckpointConfig{Dir: dir}})
	rc := build(env, make(chan struct{}), func(ctx context.Context) error {
		entered <- struct{}{}
		<-ctx.Done() // until the job is cancelled
		return ctx.Err()
	})
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, cpDir, err := job.TriggerCheckpoint(cctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	job.Wait()
	if got := values(rc.events); len(got) != 0 {
		t.Fatalf("outputs before the restore: %q", got)
	}
	open := make(chan struct{})
	close(open)
	env2 := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
		Checkpoint: runtime.CheckpointConfig{Dir: filepath.Join(t.TempDir(), "cp2"), RestoreFrom: cpDir}})
	rc2 := build(env2, open, nil)
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"A cart.items none->1 by write", "A cart.items 1->2 by write"}
	if got := values(rc2.events); !slices.Equal(got, want) {
		t.Fatalf("outputs after the restore %q, want %q (each update once)", got, want)
	}
}
