package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/clock"
)

// TestEvaluatorRunsTheExecutionTree: an input's actions run breadth first
// in the operator's order (G2), sent events trigger further
// actions, conditions select actions, short-term memory carries over
// between a key's inputs (and not to other keys), memory updates are
// events, outputs are collected in order, and the log gets each run.
func TestEvaluatorRunsTheExecutionTree(t *testing.T) {
	var order []string
	note := func(s string) { order = append(order, s) }
	a := &agent.Agent{Actions: []agent.Action{
		agent.NewAction("first", func(c *agent.RunnerContext, ev agent.Event) error {
			note("first")
			n, _, err := agent.Recall[int](c.ShortTerm(), "count")
			if err != nil {
				return err
			}
			if err := c.ShortTerm().Set("count", n+1); err != nil {
				return err
			}
			return c.Send(agent.NewEvent("step", n+1, nil))
		}, agent.TypeInput),
		agent.NewAction("second", func(c *agent.RunnerContext, ev agent.Event) error {
			note("second")
			c.Output("second")
			return nil
		}, agent.TypeInput),
		agent.NewAction("big", func(c *agent.RunnerContext, ev agent.Event) error {
			note("big")
			return nil
		}, agent.TypeInput).WithCondition("event.value.n > 10"),
		agent.NewAction("step", func(c *agent.RunnerContext, ev agent.Event) error {
			note("step")
			c.Output(fmt.Sprintf("count %v", ev.Value))
			return nil
		}, "step"),
		agent.NewAction("updated", func(c *agent.RunnerContext, ev agent.Event) error {
			u, err := agent.MemoryUpdateOf(ev)
			if err != nil {
				return err
			}
			note("updated " + u.Name)
			return nil
		}, agent.TypeMemoryUpdated),
	}}
	var kinds []string
	ev, err := agent.NewEvaluator(a, agent.EvalOptions{Listeners: []agent.Listener{agent.ListenerFunc(func(e *agent.LogEntry) {
		kinds = append(kinds, e.Action+":"+e.Kind)
	})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := ev.Evaluate(ctx, "k", 0, map[string]any{"n": 1})
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if want := []string{"first", "second", "step", "updated count"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if want := []any{"second", "count 1"}; !reflect.DeepEqual(res.Outputs, want) || res.Actions != 4 {
		t.Fatalf("outputs %v after %d actions, want %v after 4", res.Outputs, res.Actions, want)
	}
	if kinds[0] != "first:action_start" || !strings.Contains(strings.Join(kinds, " "), "first:memory_update") {
		t.Fatalf("log %v", kinds)
	}
	order = nil
	res, _ = ev.Evaluate(ctx, "k", 1, map[string]any{"n": 20})
	if want := []any{"second", "count 2"}; !reflect.DeepEqual(res.Outputs, want) || !reflect.DeepEqual(order[:3], []string{"first", "second", "big"}) {
		t.Fatalf("the key's second input: outputs %v, order %v", res.Outputs, order)
	}
	res, _ = ev.Evaluate(ctx, "other", 0, map[string]any{"n": 1})
	if want := []any{"second", "count 1"}; !reflect.DeepEqual(res.Outputs, want) {
		t.Fatalf("another key: outputs %v, want %v (memory is per key)", res.Outputs, want)
	}
}

// TestEvaluatorStopsAtAFailure: a failed action ends the input's
// evaluation with its error; a failed action's writes and events are not
// applied; a cancelled context is the returned error.
func TestEvaluatorStopsAtAFailure(t *testing.T) {
	boom := errors.New("boom")
	a := &agent.Agent{Actions: []agent.Action{
		agent.NewAction("fails", func(c *agent.RunnerContext, ev agent.Event) error {
			c.Output("not emitted")
			return boom
		}, agent.TypeInput),
		agent.NewAction("after", func(c *agent.RunnerContext, ev agent.Event) error {
			t.Error("an action after a failure ran")
			return nil
		}, agent.TypeInput),
	}}
	ev, err := agent.NewEvaluator(a, agent.EvalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ev.Evaluate(context.Background(), "k", 0, 1)
	if err != nil || !errors.Is(res.Err, boom) || len(res.Outputs) != 0 || !strings.Contains(res.Err.Error(), `action "fails"`) {
		t.Fatalf("err %v, result %+v", err, res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ev.Evaluate(ctx, "k", 1, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := agent.NewEvaluator(&agent.Agent{}, agent.EvalOptions{}); err == nil {
		t.Fatal("an agent without actions was accepted")
	}
}

// TestEvaluatorContextCarriesItsClock: as in the operator, an evaluated
// action's Context() and the context of its tool calls carry the
// Evaluator's clock (EvalOptions.Clock), so that what the action calls
// directly waits on it as the model and tool clients do.
func TestEvaluatorContextCarriesItsClock(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	var got []clock.Clock
	probe := tool.MustFunc("probe", "reports its context's clock", func(ctx context.Context, _ struct{}) (string, error) {
		got = append(got, clock.FromContext(ctx))
		return "ok", nil
	})
	a := &agent.Agent{Tools: []tool.Tool{probe}, Actions: []agent.Action{agent.NewAction("look", func(c *agent.RunnerContext, _ agent.Event) error {
		got = append(got, clock.FromContext(c.Context()))
		_, err := c.CallTool("probe", json.RawMessage(`{}`))
		return err
	}, agent.TypeInput)}}
	ev, err := agent.NewEvaluator(a, agent.EvalOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ev.Evaluate(context.Background(), "k", 0, "in")
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if len(got) != 2 || got[0] != clock.Clock(clk) || got[1] != clock.Clock(clk) {
		t.Fatalf("the action's and the tool's contexts carry %v, want the evaluator's manual clock %p twice", got, clk)
	}
}
