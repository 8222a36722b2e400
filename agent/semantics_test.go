package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

func runAgent[OUT any](t *testing.T, a *Agent, opts Options, steps ...step[msg]) (*recorder[OUT], *runtime.Metrics, error) {
	t.Helper()
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]())
	out := Apply[string, msg, OUT](weir.KeyBy(src, keyOfMsg), "agent", a, opts)
	rc := record(out)
	err := env.Execute(testCtx(t))
	return rc, env.Metrics(), err
}

func values[T any](evs []recEvent[T]) []T {
	var out []T
	for _, e := range evs {
		if !e.wm && !e.idle {
			out = append(out, e.v)
		}
	}
	return out
}

// TestExecutionTree: events sent by actions trigger the actions listening
// to them, breadth first in the order sent and declared, one action at a
// time; outputs carry the input's timestamp and lineage.
func TestExecutionTree(t *testing.T) {
	var running, overlap atomic.Int64
	guard := func(f func(*RunnerContext, Event) error) func(*RunnerContext, Event) error {
		return func(c *RunnerContext, ev Event) error {
			if running.Add(1) > 1 {
				overlap.Add(1)
			}
			defer running.Add(-1)
			return f(c, ev)
		}
	}
	a := &Agent{Actions: []Action{
		NewAction("plan", guard(func(c *RunnerContext, ev Event) error {
			in, err := Input[msg](ev)
			if err != nil {
				return err
			}
			for i := 1; i <= 2; i++ {
				if err := c.Send(NewEvent("step", nil, map[string]any{"n": i, "text": in.Text})); err != nil {
					return err
				}
			}
			c.Output("planned " + in.Text)
			return nil
		}), TypeInput),
		NewAction("work", guard(func(c *RunnerContext, ev Event) error {
			n, err := Attr[int](ev, "n")
			if err != nil {
				return err
			}
			if n == 1 {
				if err := c.Send(NewEvent("deeper", nil, nil)); err != nil {
					return err
				}
			}
			c.Output(fmt.Sprintf("work %d", n))
			return nil
		}), "step"),
		NewAction("audit", guard(func(c *RunnerContext, ev Event) error {
			n, _ := Attr[int](ev, "n")
			c.Output(fmt.Sprintf("audit %d", n))
			return nil
		}), "step", "deeper"),
	}}
	rc, metrics, err := runAgent[Event](t, a, Options{}, rec(msg{Key: "k", Text: "x"}, 42))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	var got []string
	for _, e := range evs {
		if e.wm {
			continue
		}
		if e.ts != 42 {
			t.Fatalf("output %+v has timestamp %d, want the input's 42", e.v, e.ts)
		}
		v, _ := ValueAs[string](e.v)
		got = append(got, fmt.Sprintf("%s(id %d, parent %d, by %s)", v, e.v.ID, e.v.Parent, e.v.Action))
	}
	want := []string{
		"planned x(id 3, parent 0, by plan)", // step events got ids 1 and 2 first
		"work 1(id 5, parent 1, by work)",    // "deeper" got id 4
		"audit 1(id 6, parent 1, by audit)",
		"work 2(id 7, parent 2, by work)",
		"audit 2(id 8, parent 2, by audit)",
		"audit 0(id 9, parent 4, by audit)", // the "deeper" event, queued last
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if overlap.Load() != 0 {
		t.Fatalf("actions of one input overlapped %d times", overlap.Load())
	}
	if n := metrics.Sum("agent", "actionsRun"); n != 6 {
		t.Fatalf("actionsRun = %d, want 6", n)
	}
}

// TestInputsWithoutActions: an input that triggers no action finishes at
// once and starts the key's next input; watermarks are not stranded.
func TestInputsWithoutActions(t *testing.T) {
	var seqs []int64
	a := &Agent{Actions: []Action{NewAction("maybe", func(c *RunnerContext, ev Event) error {
		in, _ := Input[msg](ev)
		seqs = append(seqs, c.Seq()) // actions of one key never overlap
		if in.N%2 == 0 {
			c.Output(in.Text)
		}
		return nil
	}, TypeInput)}}
	rc, _, err := runAgent[string](t, a, Options{},
		rec(msg{Key: "A", Text: "a0", N: 0}, 1),
		rec(msg{Key: "A", Text: "a1", N: 1}, 2),
		rec(msg{Key: "A", Text: "a2", N: 2}, 3),
		wmark[msg](3),
		rec(msg{Key: "A", Text: "a3", N: 3}, 4),
	)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	if got, want := render(evs), fmt.Sprintf("a0@1 a2@3 WM(3) WM(%d)", watermark.Max); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if !slices.Equal(seqs, []int64{0, 1, 2, 3}) {
		t.Fatalf("sequence numbers %v", seqs)
	}

	// An agent none of whose actions listens to input events.
	b := &Agent{Actions: []Action{NewAction("never", func(*RunnerContext, Event) error { return nil }, "custom")}}
	rc, m, err := runAgent[string](t, b, Options{},
		rec(msg{Key: "A"}, 1), rec(msg{Key: "A"}, 2), wmark[msg](2), rec(msg{Key: "B"}, 3))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ = rc.snapshot()
	if got, want := render(evs), fmt.Sprintf("WM(2) WM(%d)", watermark.Max); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if n := m.Sum("agent", "eventsUnhandled"); n != 3 {
		t.Fatalf("eventsUnhandled = %d, want 3", n)
	}
}

// TestMemory: short-term memory survives across a key's inputs, sensory
// memory across the actions of one input only; writes are visible to the
// writer at once and to others when it finishes; a failed action leaves
// no trace.
func TestMemory(t *testing.T) {
	a := &Agent{Actions: []Action{
		NewAction("first", func(c *RunnerContext, ev Event) error {
			in, _ := Input[msg](ev)
			n, _, err := Recall[int](c.ShortTerm(), "n")
			if err != nil {
				return err
			}
			if c.Sensory().Has("scratch") {
				return errors.New("sensory memory leaked from the previous input")
			}
			if err := c.ShortTerm().Set("n", n+1); err != nil {
				return err
			}
			if v, _, _ := Recall[int](c.ShortTerm(), "n"); v != n+1 {
				return fmt.Errorf("own write not visible: %d", v)
			}
			if err := c.Sensory().Set("scratch", in.Text); err != nil {
				return err
			}
			if in.Text == "fail" {
				_ = c.ShortTerm().Set("poison", true)
				c.Output("must not appear")
				return errors.New("boom")
			}
			return nil
		}, TypeInput),
		NewAction("second", func(c *RunnerContext, ev Event) error {
			n, _, _ := Recall[int](c.ShortTerm(), "n")
			s, ok, _ := Recall[string](c.Sensory(), "scratch")
			c.Output(fmt.Sprintf("n=%d scratch=%q/%v poison=%v names=%v", n, s, ok, c.ShortTerm().Has("poison"), c.ShortTerm().Names()))
			return nil
		}, TypeInput),
	}}
	rc, m, err := runAgent[string](t, a, Options{ContinueOnError: true},
		rec(msg{Key: "A", Text: "one"}, 1),
		rec(msg{Key: "A", Text: "fail"}, 2),
		rec(msg{Key: "A", Text: "three"}, 3),
		rec(msg{Key: "B", Text: "other"}, 4),
	)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	got := values(evs)
	slices.Sort(got)
	want := []string{
		`n=1 scratch="one"/true poison=false names=[n]`,
		`n=1 scratch="other"/true poison=false names=[n]`,
		`n=1 scratch=""/false poison=false names=[n]`, // the failed action's writes are dropped
		`n=2 scratch="three"/true poison=false names=[n]`,
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := m.Sum("agent", "actionErrors"); n != 1 {
		t.Fatalf("actionErrors = %d", n)
	}
}

// TestActionFailureFailsJob: an error or a panic in an action fails the
// job with an error naming the action and key.
func TestActionFailureFailsJob(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(*RunnerContext, Event) error
		want string
	}{
		{"error", func(*RunnerContext, Event) error { return errors.New("model unreachable") }, "model unreachable"},
		{"panic", func(*RunnerContext, Event) error { panic("nil map") }, "panic: nil map"},
		{"bad output", func(c *RunnerContext, _ Event) error { c.Output(map[string]int{"x": 1}); return nil }, "cannot be read as string"},
		{"send input", func(c *RunnerContext, _ Event) error { return c.Send(NewEvent(TypeInput, nil, nil)) }, "only the operator creates those"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &Agent{Actions: []Action{NewAction("act", c.run, TypeInput)}}
			_, _, err := runAgent[string](t, a, Options{}, rec(msg{Key: "user-7"}, 1))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"act"`) || !strings.Contains(err.Error(), "user-7") {
				t.Fatalf("err = %v; want it to name the action, the key and %q", err, c.want)
			}
		})
	}
}

// TestBlockingModeSameOutputs: the blocking variant produces what the
// asynchronous one does (per key), with every action on the subtask
// goroutine.
func TestBlockingModeSameOutputs(t *testing.T) {
	var steps []step[msg]
	for i := range 200 {
		steps = append(steps, rec(msg{Key: fmt.Sprintf("k%d", i%7), Text: fmt.Sprint(i), N: i}, int64(i)))
		if i%20 == 19 {
			steps = append(steps, wmark[msg](int64(i)))
		}
	}
	run := func(blocking bool) []string {
		rc, _, err := runAgent[string](t, countingAgent(newGatedModel()), Options{blocking: blocking}, steps...)
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := rc.snapshot()
		var lastWM int64 = -1 << 62
		for _, e := range evs {
			if e.wm {
				lastWM = e.ts
			} else if e.ts <= lastWM {
				t.Fatalf("blocking=%v: %s behind WM %d", blocking, e, lastWM)
			}
		}
		v := values(evs)
		slices.Sort(v)
		return v
	}
	a, b := run(false), run(true)
	if len(a) != 200 || !slices.Equal(a, b) {
		t.Fatalf("async %d outputs, blocking %d; differ", len(a), len(b))
	}
}

// TestIdleStatusHeld: an idle-status change does not overtake the outputs
// of earlier inputs.
func TestIdleStatusHeld(t *testing.T) {
	ctx := testCtx(t)
	m := newGatedModel()
	open := m.gate("A1")
	end := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(
		rec(msg{Key: "A", Text: "A1"}, 1), idle[msg](), pause[msg](end)), watermark.NoWatermarks[msg]())
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "idle", chatAgent(m), Options{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.waitEntered(t, ctx, "A1")
	waitStatus(t, ctx, "idle", "idle held", func(s SubtaskStatus) bool { return s.HeldWatermarks == 1 && s.OldestHeldIsStatus })
	open()
	evs := rc.waitFor(t, ctx, "idle", func(evs []recEvent[string]) bool { return len(evs) >= 2 })
	if got := render(evs[:2]); got != "re:A1@1 IDLE" {
		t.Fatalf("got %s, want the output before the idle status", got)
	}
	close(end)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestInFlightLimitAndBackPressure: at most MaxConcurrentKeys keys run,
// and at most MaxBufferedInputs inputs wait; the source waits beyond.
func TestInFlightLimitAndBackPressure(t *testing.T) {
	ctx := testCtx(t)
	m := newGatedModel()
	var opens []func()
	var steps []step[msg]
	for i := range 10 {
		p := fmt.Sprintf("p%d", i)
		opens = append(opens, m.gate(p))
		steps = append(steps, rec(msg{Key: fmt.Sprintf("k%d", i), Text: p}, int64(i)))
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource[msg](env, "src", scripted(steps...), watermark.NoWatermarks[msg]())
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "limited", chatAgent(m), Options{MaxConcurrentKeys: 2, MaxBufferedInputs: 3}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, o := range opens {
			o()
		}
		job.Cancel()
		job.Wait()
	}()
	st := waitStatus(t, ctx, "limited", "full", func(s SubtaskStatus) bool { return s.RunningKeys == 2 && s.WaitingInputs == 3 })
	if st.InFlightInputs != 5 {
		t.Fatalf("status %+v; want 5 inputs accepted (2 running, 3 waiting), the source waiting", st)
	}
	for i, o := range opens {
		o()
		rc.waitFor(t, ctx, "output", hasValue(fmt.Sprintf("re:p%d", i)))
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if mx := m.maxSeen.Load(); mx != 2 {
		t.Fatalf("%d calls ran at once, want 2", mx)
	}
}
