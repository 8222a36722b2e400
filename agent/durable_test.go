package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// gates are named channels an action can wait on, with arrival signals.
type gates struct {
	mu      sync.Mutex
	open    map[string]chan struct{}
	arrived map[string]chan struct{}
}

func newGates(names ...string) *gates {
	g := &gates{open: map[string]chan struct{}{}, arrived: map[string]chan struct{}{}}
	for _, n := range names {
		g.open[n] = make(chan struct{})
		g.arrived[n] = make(chan struct{})
	}
	return g
}

// wait signals arrival at gate name and waits until it opens (or ctx ends).
func (g *gates) wait(ctx context.Context, name string) error {
	g.mu.Lock()
	o, a := g.open[name], g.arrived[name]
	g.mu.Unlock()
	if a != nil {
		select {
		case <-a:
		default:
			close(a)
		}
	}
	if o == nil {
		return nil
	}
	select {
	case <-o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gates) release(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open[name]:
	default:
		close(g.open[name])
	}
}

func (g *gates) waitArrived(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	g.mu.Lock()
	a := g.arrived[name]
	g.mu.Unlock()
	select {
	case <-a:
	case <-ctx.Done():
		t.Fatalf("nothing arrived at gate %q", name)
	}
}

// storeJob runs agent a on the script with store and checkpoints in dir.
func storeJob(a *Agent, store StoreFactory, dir, restore string, steps ...step[msg]) (*weir.Environment, *recorder[string]) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, MaxParallelism: 128,
		Checkpoint: runtime.CheckpointConfig{Dir: dir, RestoreFrom: restore}})
	src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]()).UID("src")
	out := Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{Store: store}).UID("agent")
	return env, record(out)
}

// crashAfter starts a job, runs until, checkpoints (before or after
// running until, by when), then cancels it, and returns the checkpoint.
func checkpointAndCrash(t *testing.T, ctx context.Context, env *weir.Environment, before, after func()) string {
	t.Helper()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, dir, err := job.TriggerCheckpoint(cctx)
	cancel()
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	after()
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}
	return dir
}

// TestDurableCallsReplayed: a restore re-runs an unfinished action; its
// durable calls recorded before the crash return their recorded results
// without calling out again, and the idempotency key is stable.
func TestDurableCallsReplayed(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	var charges, emails atomic.Int64
	var keysMu sync.Mutex
	var idemKeys []string
	var g *gates
	a := &Agent{Actions: []Action{NewAction("pay", func(c *RunnerContext, ev Event) error {
		in, _ := Input[msg](ev)
		receipt, err := Durable(c, "charge", map[string]any{"amount": in.N}, func(_ context.Context, key string) (string, error) {
			keysMu.Lock()
			idemKeys = append(idemKeys, key)
			keysMu.Unlock()
			return fmt.Sprint("receipt-", charges.Add(1)), nil
		})
		if err != nil {
			return err
		}
		nothing, err := Durable(c, "lookup", nil, func(context.Context, string) (*string, error) { return nil, nil })
		if err != nil || nothing != nil {
			return fmt.Errorf("null result: %v %v", nothing, err)
		}
		_, ferr := Durable(c, "flaky", nil, func(context.Context, string) (int, error) { return 0, errors.New("service unavailable") })
		sent, err := Durable(c, "email", receipt, func(ctx context.Context, key string) (string, error) {
			emails.Add(1)
			if err := g.wait(ctx, "email"); err != nil {
				return "", err
			}
			return "mail-" + key[:8], nil
		})
		if err != nil {
			return err
		}
		c.Output(fmt.Sprintf("%s %s flaky=%v", receipt, sent[:4], ferr))
		return nil
	}, TypeInput)}}

	g = newGates("email")
	dir := filepath.Join(t.TempDir(), "cp")
	env, _ := storeJob(a, store.Factory(), dir, "", rec(msg{Key: "A", N: 42}, 1), pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env, func() { g.waitArrived(t, ctx, "email") }, func() {})
	if charges.Load() != 1 || emails.Load() != 1 {
		t.Fatalf("before the crash: %d charges, %d emails", charges.Load(), emails.Load())
	}

	g = newGates() // the email goes through this time
	done := make(chan struct{})
	close(done)
	env2, rc := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp2"), cp, rec(msg{Key: "A", N: 42}, 1), pause[msg](done))
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	got := values(evs)
	if len(got) != 1 || got[0] != "receipt-1 mail flaky=service unavailable" {
		t.Fatalf("outputs %q", got)
	}
	if charges.Load() != 1 || emails.Load() != 2 {
		t.Fatalf("after the restore: %d charges (want 1: replayed), %d emails (want 2)", charges.Load(), emails.Load())
	}
	if n := env2.Metrics().Sum("agent", "callsReplayed"); n != 3 {
		t.Fatalf("callsReplayed = %d, want 3 (charge, lookup, flaky)", n)
	}
	if len(idemKeys) != 1 || len(idemKeys[0]) != 32 {
		t.Fatalf("idempotency keys %q", idemKeys)
	}
}

// TestCompletedActionSkipped: an action that completed after the
// checkpoint is not run again after the restore: its memory writes and
// events are replayed from the store.
func TestCompletedActionSkipped(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	var firstRuns atomic.Int64
	var g *gates
	a := &Agent{Actions: []Action{
		NewAction("first", func(c *RunnerContext, ev Event) error {
			if err := g.wait(c.Context(), "first"); err != nil {
				return err
			}
			firstRuns.Add(1)
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
			x, _, _ := Recall[int](c.ShortTerm(), "x")
			p, _ := ValueAs[string](ev)
			c.Output(fmt.Sprintf("second x=%d %s from %s", x, p, ev.Action))
			return nil
		}, "next"),
	}}
	g = newGates("first", "second")
	env, _ := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp"), "", rec(msg{Key: "A"}, 1), pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env,
		func() { g.waitArrived(t, ctx, "first") }, // checkpoint while "first" runs
		func() { g.release("first"); g.waitArrived(t, ctx, "second") })
	if firstRuns.Load() != 1 {
		t.Fatalf("first ran %d times", firstRuns.Load())
	}
	g = newGates()
	done := make(chan struct{})
	close(done)
	env2, rc := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp2"), cp, rec(msg{Key: "A"}, 1), pause[msg](done))
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if firstRuns.Load() != 1 {
		t.Fatalf("first ran again after the restore (%d runs)", firstRuns.Load())
	}
	evs, _ := rc.snapshot()
	if got := values(evs); !slices.Equal(got, []string{"first", "second x=7 payload from first"}) {
		t.Fatalf("outputs %q", got)
	}
	if n := env2.Metrics().Sum("agent", "actionsReplayed"); n != 1 {
		t.Fatalf("actionsReplayed = %d", n)
	}
}

// TestDivergence: a re-run asking for another call than the recorded one
// discards the recorded future and goes on live; an input that differs
// from the one recorded under its sequence number does too.
func TestDivergence(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	var useB atomic.Bool
	var calls sync.Map
	var g *gates
	a := &Agent{Actions: []Action{NewAction("act", func(c *RunnerContext, ev Event) error {
		name := "a"
		if useB.Load() {
			name = "b"
		}
		v, err := Durable(c, name, nil, func(context.Context, string) (string, error) {
			n, _ := calls.LoadOrStore(name, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return name + "-live", nil
		})
		if err != nil {
			return err
		}
		if err := g.wait(c.Context(), "hang"); err != nil {
			return err
		}
		c.Output(v)
		return nil
	}, TypeInput)}}
	g = newGates("hang")
	env, _ := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp"), "", rec(msg{Key: "A"}, 1), pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env, func() { g.waitArrived(t, ctx, "hang") }, func() {})

	useB.Store(true)
	g = newGates()
	done := make(chan struct{})
	close(done)
	env2, rc := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp2"), cp, rec(msg{Key: "A"}, 1), pause[msg](done))
	if err := env2.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	if got := values(evs); !slices.Equal(got, []string{"b-live"}) {
		t.Fatalf("outputs %q", got)
	}
	if n := env2.Metrics().Sum("agent", "divergences"); n != 1 {
		t.Fatalf("divergences = %d", n)
	}

	// A different input under a recorded sequence number (an at-most-once
	// restart): the ghost of the old input is discarded.
	ghost := NewMemoryStore()
	kb := []byte("G")
	ghost.Put(&ActionState{ID: RunID{Key: kb, Seq: 0, EventType: TypeInput, Action: "act"}, Pos: Position{Seq: 0}, Completed: true,
		Sent: []Event{OutputEvent("ghost output")}})
	ghost.Put(&ActionState{ID: RunID{Key: kb, Seq: 3, EventType: TypeInput, Action: "act"}, Pos: Position{Seq: 3}})
	useB.Store(false)
	rc3, m3, err := func() (*recorder[string], *runtime.Metrics, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "G", Text: "new"}, 1)), watermark.NoWatermarks[msg]())
		rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{Store: ghost.Factory()}))
		return rc, env.Metrics(), env.Execute(ctx)
	}()
	if err != nil {
		t.Fatal(err)
	}
	evs, _ = rc3.snapshot()
	if got := values(evs); !slices.Equal(got, []string{"a-live"}) || m3.Sum("agent", "divergences") != 1 {
		t.Fatalf("outputs %q, divergences %d", got, m3.Sum("agent", "divergences"))
	}
	if _, ok := ghost.Latest(kb); !ok {
		t.Fatal("the live run was not recorded")
	}
	if p, _ := ghost.Latest(kb); p.Seq != 0 {
		t.Fatalf("the ghost at seq 3 survived: latest %+v", p)
	}
}

// TestPruneAfterCheckpoint: states of finished inputs leave the store once
// a checkpoint covering them completes.
func TestPruneAfterCheckpoint(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	a := countingAgent(newGatedModel())
	a.Actions[0] = NewAction("chat", func(c *RunnerContext, ev Event) error {
		_, err := Durable(c, "call", nil, func(context.Context, string) (int, error) { return 1, nil })
		c.Output("ok")
		return err
	}, TypeInput)
	end := make(chan struct{})
	env, rc := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp"), "",
		rec(msg{Key: "A"}, 1), rec(msg{Key: "B"}, 2), rec(msg{Key: "A"}, 3), pause[msg](end))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(end); job.Wait() }()
	rc.waitFor(t, ctx, "3 outputs", func(evs []recEvent[string]) bool { return len(values(evs)) == 3 })
	if store.Len() != 3 {
		t.Fatalf("%d states recorded, want 3", store.Len())
	}
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	for store.Len() != 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d states left after the checkpoint", store.Len())
		case <-time.After(time.Millisecond):
		}
	}
}

// TestDurableReconciled: a call that took effect but whose result was not
// recorded (the process died in between) is reconciled after the restore,
// by its idempotency key, instead of being repeated; a call that had not
// taken effect is made.
func TestDurableReconciled(t *testing.T) {
	for _, tookEffect := range []bool{true, false} {
		t.Run(fmt.Sprintf("tookEffect=%v", tookEffect), func(t *testing.T) {
			ctx := testCtx(t)
			store := NewMemoryStore()
			var mu sync.Mutex
			service := map[string]string{} // idempotency key -> receipt
			var sends, reconciles atomic.Int64
			var g *gates
			a := &Agent{Actions: []Action{NewAction("send", func(c *RunnerContext, ev Event) error {
				v, err := DurableReconciled(c, "send", "hello",
					func(ctx context.Context, key string) (string, error) {
						if !tookEffect {
							if err := g.wait(ctx, "before"); err != nil {
								return "", err
							}
						}
						sends.Add(1)
						mu.Lock()
						service[key] = "receipt-" + key[:6]
						mu.Unlock()
						if err := g.wait(ctx, "after"); err != nil { // the crash comes here
							return "", err
						}
						return service[key], nil
					},
					func(_ context.Context, key string) (string, bool, error) {
						reconciles.Add(1)
						mu.Lock()
						defer mu.Unlock()
						r, ok := service[key]
						return r, ok, nil
					})
				if err != nil {
					return err
				}
				c.Output(v)
				return nil
			}, TypeInput)}}
			g = newGates("before", "after")
			hangAt := "after"
			if !tookEffect {
				hangAt = "before"
			}
			env, _ := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp"), "", rec(msg{Key: "A"}, 1), pause[msg](make(chan struct{})))
			cp := checkpointAndCrash(t, ctx, env, func() { g.waitArrived(t, ctx, hangAt) }, func() {})
			g = newGates()
			done := make(chan struct{})
			close(done)
			env2, rc := storeJob(a, store.Factory(), filepath.Join(t.TempDir(), "cp2"), cp, rec(msg{Key: "A"}, 1), pause[msg](done))
			if err := env2.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			evs, _ := rc.snapshot()
			got := values(evs)
			if len(got) != 1 || len(service) != 1 || got[0] != func() string {
				for _, v := range service {
					return v
				}
				return ""
			}() {
				t.Fatalf("outputs %q, service %v", got, service)
			}
			if sends.Load() != 1 || reconciles.Load() != 1 {
				t.Fatalf("%d sends (want 1), %d reconciles (want 1)", sends.Load(), reconciles.Load())
			}
		})
	}
}

// retainingStore is a MemoryStore that also keeps the states handed to Put
// as given, to check that the operator does not modify them afterwards
// (a store such as the WAL keeps them).
type retainingStore struct {
	*MemoryStore
	mu   sync.Mutex
	kept []*ActionState
	json []string
}

func (s *retainingStore) Put(st *ActionState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.kept = append(s.kept, st)
	s.json = append(s.json, string(b))
	s.mu.Unlock()
	return s.MemoryStore.Put(st)
}

func (s *retainingStore) Close() error { return nil }

func (s *retainingStore) factory() StoreFactory {
	return func(*runtime.Context) (ActionStateStore, error) { return s, nil }
}

func (s *retainingStore) verify(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, st := range s.kept {
		b, _ := json.Marshal(st)
		if string(b) != s.json[i] {
			t.Fatalf("state %d changed after Put:\nput  %s\nnow  %s", i, s.json[i], b)
		}
	}
}

// TestStoredStatesAreNotModified: many actions with durable calls, events
// and outputs; every state handed to the store stays as it was handed.
func TestStoredStatesAreNotModified(t *testing.T) {
	rs := &retainingStore{MemoryStore: NewMemoryStore()}
	a := &Agent{Actions: []Action{
		NewAction("one", func(c *RunnerContext, ev Event) error {
			in, _ := Input[msg](ev)
			for i := range 3 {
				if _, err := Durable(c, fmt.Sprint("call", i), i, func(context.Context, string) (int, error) { return i, nil }); err != nil {
					return err
				}
			}
			c.Output("one " + in.Text)
			return c.Send(NewEvent("two", in.Text, nil))
		}, TypeInput),
		NewAction("two", func(c *RunnerContext, ev Event) error {
			v, _ := ValueAs[string](ev)
			c.Output("two " + v)
			return nil
		}, "two"),
	}}
	var steps []step[msg]
	for i := range 300 {
		steps = append(steps, rec(msg{Key: fmt.Sprint("k", i%17), Text: fmt.Sprint(i)}, int64(i)))
	}
	rc, _, err := runAgent[string](t, a, Options{Store: rs.factory(), MaxConcurrentKeys: 4}, steps...)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	if n := len(values(evs)); n != 600 {
		t.Fatalf("%d outputs", n)
	}
	rs.verify(t)
}

// TestFailedRunIsRecorded: an action that fails, under ContinueOnError,
// before recording anything (a time-out, an error before its first durable
// call) leaves an empty run state, so that a later run of the same inputs
// (here a fresh start over the same store) finds the key's later runs
// where it recorded them: no divergence, and the later input's call is
// replayed, not made again. Without the state, the store knowing later
// runs of the key and not this one was taken for a divergence, and the
// key's recorded future discarded (found by internal/sim, seed 51 with the
// agent branch).
func TestFailedRunIsRecorded(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	var calls atomic.Int64
	a := &Agent{Actions: []Action{NewAction("act", func(c *RunnerContext, ev Event) error {
		in, err := Input[msg](ev)
		if err != nil {
			return err
		}
		if in.Text == "fail" {
			return errors.New("failed before any call")
		}
		v, err := Durable(c, "effect", in.Text, func(context.Context, string) (string, error) {
			calls.Add(1)
			return "done " + in.Text, nil
		})
		if err != nil {
			return err
		}
		c.Output(v)
		return nil
	}, TypeInput)}}
	for run := 1; run <= 2; run++ {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "A", Text: "fail"}, 1), rec(msg{Key: "A", Text: "ok"}, 2)), watermark.NoWatermarks[msg]())
		rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{Store: store.Factory(), ContinueOnError: true}))
		if err := env.Execute(ctx); err != nil {
			t.Fatal(err)
		}
		evs, _ := rc.snapshot()
		if got := values(evs); !slices.Equal(got, []string{"done ok"}) {
			t.Fatalf("run %d: outputs %q", run, got)
		}
		if n := env.Metrics().Sum("agent", "divergences"); n != 0 {
			t.Fatalf("run %d: %d divergences", run, n)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("run %d: the durable call was made %d times", run, n)
		}
	}
}

// TestNewBranchOfAKnownInputKeepsLaterInputs: an input whose action failed
// after a durable call (a time-out, say) and succeeds when a restore runs
// it again sends an event the store never saw: its run is unknown while
// the store knows the key's later inputs. That is a new branch of the same
// input's execution tree (the input's first run was found), not another
// input under its sequence number, so the later inputs' recorded calls
// must stay and not run again (found by internal/sim with a second action
// per input).
func TestNewBranchOfAKnownInputKeepsLaterInputs(t *testing.T) {
	ctx := testCtx(t)
	store := NewMemoryStore()
	var run int
	calls := map[string]int{}
	var mu sync.Mutex
	count := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		calls[name]++
	}
	a := &Agent{Actions: []Action{
		NewAction("first", func(c *RunnerContext, ev Event) error {
			in, err := Input[msg](ev)
			if err != nil {
				return err
			}
			v, err := Durable(c, "first", in.Text, func(context.Context, string) (string, error) {
				count("first " + in.Text)
				return in.Text, nil
			})
			if err != nil {
				return err
			}
			if in.Text == "flaky" && run == 1 {
				return errors.New("timed out after the first call")
			}
			return c.Send(NewEvent("next", v, nil))
		}, TypeInput),
		NewAction("second", func(c *RunnerContext, ev Event) error {
			text, err := ValueAs[string](ev)
			if err != nil {
				return err
			}
			v, err := Durable(c, "second", text, func(context.Context, string) (string, error) {
				count("second " + text)
				return "done " + text, nil
			})
			if err != nil {
				return err
			}
			c.Output(v)
			return nil
		}, "next"),
	}}
	for run = 1; run <= 2; run++ {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "A", Text: "flaky"}, 1), rec(msg{Key: "A", Text: "ok"}, 2)), watermark.NoWatermarks[msg]())
		rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{Store: store.Factory(), ContinueOnError: true}))
		if err := env.Execute(ctx); err != nil {
			t.Fatal(err)
		}
		evs, _ := rc.snapshot()
		want := []string{"done ok"}
		if run == 2 {
			want = []string{"done flaky", "done ok"}
		}
		if got := values(evs); !slices.Equal(got, want) {
			t.Fatalf("run %d: outputs %q, want %q", run, got, want)
		}
		if n := env.Metrics().Sum("agent", "divergences"); n != 0 {
			t.Fatalf("run %d: %d divergences", run, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for name, n := range calls {
		if n != 1 {
			t.Errorf("the durable call %q was made %d times, want once: %v", name, n, calls)
		}
	}
}
