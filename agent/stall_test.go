package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/watermark"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStallIsVisible: a watermark held by a hung call shows in the gauges
// and, past StallWarning, in a warning naming the key holding it.
func TestStallIsVisible(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	var logs syncBuffer
	m := newGatedModel()
	open := m.gate("A1")
	end := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	src := weir.FromSource[msg](env, "src", scripted(
		rec(msg{Key: "slow-user", Text: "A1"}, 1), rec(msg{Key: "B", Text: "B1"}, 2), wmark[msg](5), pause[msg](end)), watermark.NoWatermarks[msg]())
	rc := record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "stall", chatAgent(m), Options{StallWarning: time.Minute}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { open(); close(end); job.Wait() }()
	waitStatus(t, ctx, "stall", "held", func(s SubtaskStatus) bool { return s.HeldWatermarks == 1 && s.InFlightInputs == 1 })
	gauge := func(name string) int64 { return env.Metrics().Sum("stall", name) }
	if gauge("heldWatermarks") != 1 || gauge("inFlightInputs") != 1 {
		t.Fatalf("gauges held %d in flight %d", gauge("heldWatermarks"), gauge("inFlightInputs"))
	}
	clk.Advance(2 * time.Minute)
	for !strings.Contains(logs.String(), "held back") {
		select {
		case <-ctx.Done():
			t.Fatalf("no stall warning; logs:\n%s", logs.String())
		case <-time.After(time.Millisecond):
		}
	}
	line := logs.String()
	if !strings.Contains(line, "slow-user") || !strings.Contains(line, "watermark=5") || !strings.Contains(line, "ageMs=120000") {
		t.Fatalf("warning does not name the key, watermark and age: %s", line)
	}
	if got := gauge("oldestHeldWatermarkAgeMs"); got != 120000 {
		t.Fatalf("age gauge %d, want 120000", got)
	}
	open()
	rc.waitFor(t, ctx, "WM 5", hasWatermark(5))
	waitStatus(t, ctx, "stall", "released", func(s SubtaskStatus) bool { return s.HeldWatermarks == 0 })
	if gauge("heldWatermarks") != 0 || gauge("oldestHeldWatermarkAgeMs") != 0 {
		t.Fatalf("gauges after release: held %d age %d", gauge("heldWatermarks"), gauge("oldestHeldWatermarkAgeMs"))
	}
}

// TestActionTimeout: an action that outlives ActionTimeout gets a
// cancelled context; its error fails the job.
func TestActionTimeout(t *testing.T) {
	a := &Agent{Actions: []Action{NewAction("hang", func(c *RunnerContext, _ Event) error {
		<-c.Context().Done()
		return c.Context().Err()
	}, TypeInput)}}
	_, _, err := runAgent[string](t, a, Options{ActionTimeout: 20 * time.Millisecond}, rec(msg{Key: "k"}, 1))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"hang"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestActionTimeoutOnJobClock: ActionTimeout is measured on the job's
// clock. With a manual clock, an hour's time-out ends a hung action once
// the test has advanced the clock by an hour, and not before.
func TestActionTimeoutOnJobClock(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	started := make(chan struct{})
	a := &Agent{Actions: []Action{NewAction("hang", func(c *RunnerContext, _ Event) error {
		close(started)
		select {
		case <-c.Context().Done():
			return c.Context().Err()
		case <-ctx.Done():
			return ctx.Err()
		}
	}, TypeInput)}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk})
	src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "k"}, 1)), watermark.NoWatermarks[msg]())
	record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{ActionTimeout: time.Hour}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the action did not start")
	}
	clk.Advance(time.Hour - time.Millisecond)
	select {
	case <-job.Done():
		t.Fatalf("the action ended before the clock reached its time-out: %v", job.Wait())
	default:
	}
	clk.Advance(time.Millisecond)
	err = job.Wait()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"hang"`) {
		t.Fatalf("err = %v, want the action's context.DeadlineExceeded", err)
	}
}

// TestModelRetryOnJobClock: a model client's retry back-off
// (model.WithRetry) is measured on the job's clock, which every model and
// tool call carries on its context: with a manual clock, a call that
// failed transiently is tried again once the test has advanced the clock
// past the back-off, and not before; a tool's context carries the same
// clock.
func TestModelRetryOnJobClock(t *testing.T) {
	ctx := testCtx(t)
	clk := testenv.NewLongTimers(time.Unix(1_000_000, 0), 1)
	var calls atomic.Int32
	flaky := model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
		if calls.Add(1) == 1 {
			return nil, &model.APIError{StatusCode: 503, Message: "overloaded"}
		}
		return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "ok"}}, nil
	})
	toolClock := make(chan clock.Clock, 1)
	probe := tool.MustFunc("probe", "reports its context's clock", func(ctx context.Context, _ struct{}) (string, error) {
		toolClock <- clock.FromContext(ctx)
		return "ok", nil
	})
	answered := make(chan error, 1)
	a := &Agent{
		Models: map[string]model.ChatModel{"m": model.WithRetry(flaky, model.RetryPolicy{Attempts: 2, Initial: 4 * time.Hour, Max: 4 * time.Hour})},
		Tools:  []tool.Tool{probe},
		Actions: []Action{NewAction("ask", func(c *RunnerContext, _ Event) error {
			if _, err := c.CallTool("probe", json.RawMessage(`{}`)); err != nil {
				return err
			}
			_, err := c.Chat("m", model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
			answered <- err
			return err
		}, TypeInput)},
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk})
	src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "k"}, 1)), watermark.NoWatermarks[msg]())
	record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-toolClock:
		if c != clock.Clock(clk) {
			t.Fatalf("the tool's context carries %v, want the job's manual clock", c)
		}
	case <-ctx.Done():
		t.Fatal("the tool was not called")
	}
	var wait time.Duration
	select {
	case wait = <-clk.Armed: // drawn from [2h, 4h]
	case <-ctx.Done():
		t.Fatal("no back-off armed on the job's clock")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d attempts before the clock moved, want 1", n)
	}
	clk.Advance(wait - time.Nanosecond)
	select {
	case err := <-answered:
		t.Fatalf("the call returned (%v) before the clock reached the back-off of %v", err, wait)
	default:
	}
	clk.Advance(time.Nanosecond)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the retried call failed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the call was not retried once the clock passed the back-off")
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestActionContextCarriesJobClock: an action's Context() carries the
// job's clock (clock.FromContext), so a client the action calls directly
// (an embedder, a vector store's) waits on it as model and tool calls do.
func TestActionContextCarriesJobClock(t *testing.T) {
	ctx := testCtx(t)
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	got := make(chan clock.Clock, 1)
	a := &Agent{Actions: []Action{NewAction("look", func(c *RunnerContext, _ Event) error {
		got <- clock.FromContext(c.Context())
		return nil
	}, TypeInput)}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk})
	src := weir.FromSource[msg](env, "src", scripted(rec(msg{Key: "k"}, 1)), watermark.NoWatermarks[msg]())
	record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", a, Options{}))
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		if c != clock.Clock(clk) {
			t.Fatalf("the action's context carries %T %p, want the job's manual clock %p", c, c, clk)
		}
	case <-ctx.Done():
		t.Fatal("the action did not run")
	}
	job.Cancel()
	job.Wait()
}
