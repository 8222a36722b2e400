package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/eventlog"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/replay"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/kafkasec"
)

// lookupTool is a Go tool that counts its executions.
func lookupTool(n *atomic.Int64) tool.Tool {
	return tool.Raw{
		ToolSpec: model.ToolSpec{Name: "lookup", Description: "looks an item up",
			Parameters: json.RawMessage(`{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}`)},
		Fn: func(_ context.Context, args json.RawMessage) (tool.Result, error) {
			c := n.Add(1)
			return tool.Result{Content: fmt.Sprintf("stock of %s: %d", args, 40+c)}, nil
		},
	}
}

// reviewer is an agent like a pipeline's agent step: a prompt, the model,
// the tools it asks for, the model again; the output is the last answer.
func reviewer(prompt string, seed int64, tools ...tool.Tool) *agent.Agent {
	return &agent.Agent{
		Models: map[string]model.ChatModel{"llm": &model.Offline{Seed: seed, ToolCalls: true}},
		Tools:  tools,
		Actions: []agent.Action{agent.NewAction("review", func(c *agent.RunnerContext, ev agent.Event) error {
			in, err := agent.Input[map[string]any](ev)
			if err != nil {
				return err
			}
			msgs := []model.Message{model.User(fmt.Sprintf(prompt, in["item"]))}
			var answer string
			for step := 0; step < 4; step++ {
				resp, err := c.Chat("llm", model.Request{Messages: msgs, Tools: c.Tools().Specs()})
				if err != nil {
					return err
				}
				answer = resp.Message.Content
				if len(resp.Message.ToolCalls) == 0 {
					break
				}
				msgs = append(msgs, resp.Message)
				for _, tc := range resp.Message.ToolCalls {
					res, err := c.CallTool(tc.Name, tc.Arguments)
					if err != nil {
						return err
					}
					msgs = append(msgs, model.ToolResult(tc.ID, res.Content))
				}
			}
			c.Output(map[string]any{"item": in["item"], "answer": answer})
			return nil
		}, agent.TypeInput)},
	}
}

// record runs the agent over n inputs with its real tool and returns the
// event log's runs (written and read back as JSON lines).
func record(t *testing.T, a *agent.Agent, n int) []*replay.Run {
	t.Helper()
	var buf bytes.Buffer
	w := eventlog.NewWriter(&buf)
	ev, err := agent.NewEvaluator(a, agent.EvalOptions{Listeners: []agent.Listener{w}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", i%3)
		res, err := ev.Evaluate(context.Background(), key, int64(i/3), map[string]any{"item": fmt.Sprintf("item-%d", i)})
		if err != nil || res.Err != nil {
			t.Fatalf("recording input %d: %v %v", i, err, res.Err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var c replay.Collector
	if err := eventlog.Read(&buf, "", c.Add); err != nil {
		t.Fatal(err)
	}
	return c.Runs()
}

const prompt = "Review the stock of %v"

// TestReplayUnchangedAgent: the same agent over its own log decides the
// same on every input, every tool call is answered from the record, the
// tool never runs, and the tokens are the same.
func TestReplayUnchangedAgent(t *testing.T) {
	var execs atomic.Int64
	runs := record(t, reviewer(prompt, 1, lookupTool(&execs)), 9)
	if len(runs) != 9 || execs.Load() != 9 {
		t.Fatalf("recorded %d runs with %d tool executions, want 9 and 9", len(runs), execs.Load())
	}
	execs.Store(0)
	rep, err := replay.Evaluate(context.Background(), runs, reviewer(prompt, 1, lookupTool(&execs)), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if execs.Load() != 0 {
		t.Fatalf("the tool ran %d times during the replay", execs.Load())
	}
	if s.Evaluated != 9 || s.Unchanged != 9 || s.Changed != 0 || s.Failed != 0 || s.MatchedCalls != 9 || s.NewCalls != 0 {
		t.Fatalf("summary %+v; want 9 unchanged, 9 matched calls", s)
	}
	if s.TokensBefore.Prompt != s.TokensAfter.Prompt || s.TokensBefore.Completion != s.TokensAfter.Completion || s.TokensBefore.Total() == 0 || s.ModelCallsBefore != 18 || s.ModelCallsAfter != 18 {
		t.Fatalf("tokens %+v before, %+v after; model calls %d, %d", s.TokensBefore, s.TokensAfter, s.ModelCallsBefore, s.ModelCallsAfter)
	}
	// The recorded result reached the model: the answer quotes it.
	for _, in := range rep.Inputs {
		out := in.NewOutputs[0].(map[string]any)["answer"].(string)
		if !strings.Contains(out, "stock of") {
			t.Fatalf("input %s/%d: answer %q does not quote the recorded tool result", in.Key, in.Seq, out)
		}
	}
}

// TestReplayChangedModel: another model (seed) with the same prompt makes
// the same tool calls, answered from the record, and answers otherwise:
// every decision changed.
func TestReplayChangedModel(t *testing.T) {
	var execs atomic.Int64
	runs := record(t, reviewer(prompt, 1, lookupTool(&execs)), 6)
	execs.Store(0)
	rep, err := replay.Evaluate(context.Background(), runs, reviewer(prompt, 2, lookupTool(&execs)), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if execs.Load() != 0 || s.Changed != 6 || s.Unchanged != 0 || s.MatchedCalls != 6 || s.NewCalls != 0 {
		t.Fatalf("%d tool executions, summary %+v; want 0, 6 changed, 6 matched", execs.Load(), s)
	}
	for _, in := range rep.Inputs {
		if !in.Changed || len(in.ToolCalls) != 1 || !in.ToolCalls[0].Matched || !strings.HasPrefix(in.ToolCalls[0].Result.Content, "stock of") {
			t.Fatalf("input %+v", in)
		}
	}
}

// TestReplayNewToolCalls: a changed prompt changes the tool's arguments:
// the calls are new, refused (the model sees the refusal) or, with Stub,
// answered with the stub; the tool never runs either way.
func TestReplayNewToolCalls(t *testing.T) {
	var execs atomic.Int64
	runs := record(t, reviewer(prompt, 1, lookupTool(&execs)), 4)
	execs.Store(0)
	changed := "Check carefully whether %v must be reordered"
	rep, err := replay.Evaluate(context.Background(), runs, reviewer(changed, 1, lookupTool(&execs)), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if execs.Load() != 0 || s.NewCalls != 4 || s.MatchedCalls != 0 || s.Changed != 4 {
		t.Fatalf("%d tool executions, summary %+v; want 0, 4 new calls, 4 changed", execs.Load(), s)
	}
	in := rep.Inputs[0]
	if c := in.ToolCalls[0]; c.Matched || c.Stubbed || !c.Result.IsError || !strings.Contains(c.Result.Content, "not recorded") {
		t.Fatalf("refused call: %+v", c)
	}
	rep, err = replay.Evaluate(context.Background(), runs, reviewer(changed, 1, lookupTool(&execs)),
		replay.Options{Unmatched: replay.Stub, StubContent: "stub-result"})
	if err != nil {
		t.Fatal(err)
	}
	in = rep.Inputs[0]
	if c := in.ToolCalls[0]; execs.Load() != 0 || !c.Stubbed || c.Result.Content != "stub-result" ||
		!strings.Contains(in.NewOutputs[0].(map[string]any)["answer"].(string), "stub-result") {
		t.Fatalf("stubbed call: %+v, output %v", c, in.NewOutputs)
	}
	if _, err := replay.Evaluate(context.Background(), runs, reviewer(changed, 1), replay.Options{Unmatched: "ignore"}); err == nil ||
		!strings.Contains(err.Error(), `want "refuse" or "stub"`) {
		t.Fatalf("bad Unmatched: %v", err)
	}
}

// TestReplaySkipsInputsNotRecorded: a log without the input's
// action_start (an older log, or one that began mid-input) skips the input
// and says why; the failure of the new agent counts as failed.
func TestReplaySkipsInputsNotRecorded(t *testing.T) {
	var c replay.Collector
	for _, e := range []agent.LogEntry{
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogOutput, Data: "old"},
		{Key: "b", Seq: 0, Action: "review", Kind: agent.LogActionStart, Data: agent.Event{Type: agent.TypeInput, Value: map[string]any{"item": "x"}}},
		{Key: "b", Seq: 0, Action: "review", Kind: agent.LogOutput, Data: "old"},
	} {
		if err := c.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	failing := &agent.Agent{Actions: []agent.Action{agent.NewAction("review", func(*agent.RunnerContext, agent.Event) error {
		return fmt.Errorf("boom")
	}, agent.TypeInput)}}
	rep, err := replay.Evaluate(context.Background(), c.Runs(), failing, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if s.Inputs != 2 || s.Skipped != 1 || s.Failed != 1 || rep.Inputs[0].Skipped == "" || !strings.Contains(rep.Inputs[1].NewError, "boom") {
		t.Fatalf("report %+v", rep)
	}
}

// TestCollectorAfterARestore: a run logged again after a restore (a second
// action_start of the same run) replaces the first attempt, and outputs
// re-emitted from the store (replayed) are not counted twice.
func TestCollectorAfterARestore(t *testing.T) {
	in := agent.Event{Type: agent.TypeInput, Value: map[string]any{"item": "x"}}
	var c replay.Collector
	for _, e := range []agent.LogEntry{
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogActionStart, Data: in},
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogToolCall, Name: "lookup", Data: json.RawMessage(`{"item":"x"}`)},
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogToolResult, Name: "lookup", Data: tool.Result{Content: "first"}},
		// The crash; the restored job runs the action again.
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogActionStart, Data: in},
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogToolCall, Name: "lookup", Data: json.RawMessage(`{"item":"x"}`)},
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogToolResult, Name: "lookup", Data: tool.Result{Content: "first"}, Replayed: true},
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogOutput, Data: "done"},
		// Another crash after the action completed: replayed from the store.
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogActionReplayed, Replayed: true},
		{Key: "a", Seq: 0, Action: "review", Kind: agent.LogOutput, Data: "done", Replayed: true},
		// A log that holds only the replay of an input.
		{Key: "b", Seq: 3, Action: "review", Kind: agent.LogActionReplayed, Replayed: true},
		{Key: "b", Seq: 3, Action: "review", Kind: agent.LogOutput, Data: "kept", Replayed: true},
	} {
		if err := c.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	runs := c.Runs()
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	a, b := runs[0], runs[1]
	if !a.HasInput || len(a.ToolCalls) != 1 || a.ToolCalls[0].Result.Content != "first" || !reflect.DeepEqual(a.Outputs, []any{"done"}) {
		t.Fatalf("run a: %+v", a)
	}
	if b.HasInput || !reflect.DeepEqual(b.Outputs, []any{"kept"}) {
		t.Fatalf("run b: %+v", b)
	}
}

// TestReadTopic: the runs of an event log written to a Kafka topic (the
// embedded broker) are those of the same entries in a file.
func TestReadTopic(t *testing.T) {
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateTopic("agent-log", 3, nil); err != nil {
		t.Fatal(err)
	}
	w, err := eventlog.NewKafkaWriter(b.Addrs(), "agent-log")
	if err != nil {
		t.Fatal(err)
	}
	var execs atomic.Int64
	ev, err := agent.NewEvaluator(reviewer(prompt, 1, lookupTool(&execs)), agent.EvalOptions{Listeners: []agent.Listener{w}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := ev.Evaluate(context.Background(), fmt.Sprint(i%2), int64(i/2), map[string]any{"item": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	runs, err := replay.ReadTopic(context.Background(), b.Addrs(), kafkasec.Security{}, "agent-log")
	if err != nil {
		t.Fatal(err)
	}
	execs.Store(0)
	rep, err := replay.Evaluate(context.Background(), runs, reviewer(prompt, 1, lookupTool(&execs)), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary; s.Inputs != 5 || s.Unchanged != 5 || s.MatchedCalls != 5 || execs.Load() != 0 {
		t.Fatalf("summary %+v, %d tool executions", s, execs.Load())
	}
}

// TestReplayCost: with a price table the report prices the tokens before
// and after, per input and in the summary, by the model that answered
// ("offline") else by the agent's name for it ("llm"); models without a
// price are named, not priced; without a table there is no cost.
func TestReplayCost(t *testing.T) {
	var execs atomic.Int64
	runs := record(t, reviewer(prompt, 1, lookupTool(&execs)), 6)
	for _, c := range []struct {
		name     string
		pricing  model.Pricing
		per      func(replay.Tokens) float64 // the expected cost
		unpriced []string
	}{
		{"by answering model", model.Pricing{"offline": {Input: 1, Output: 2}, "llm": {Input: 100, Output: 100}},
			func(tk replay.Tokens) float64 { return (float64(tk.Prompt) + 2*float64(tk.Completion)) / 1e6 }, nil},
		{"by agent name", model.Pricing{"llm": {Input: 3, Output: 0}},
			func(tk replay.Tokens) float64 { return 3 * float64(tk.Prompt) / 1e6 }, nil},
		{"no price", model.Pricing{"other": {Input: 1, Output: 1}},
			func(replay.Tokens) float64 { return 0 }, []string{"offline"}},
	} {
		rep, err := replay.Evaluate(context.Background(), runs, reviewer(prompt, 2, lookupTool(&execs)), replay.Options{Pricing: c.pricing})
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, tk replay.Tokens) {
			t.Helper()
			if tk.Cost == nil || math.Abs(*tk.Cost-c.per(tk)) > 1e-12 || !slices.Equal(tk.Unpriced, c.unpriced) {
				t.Errorf("%s: %s: tokens %+v cost %v, want %v, unpriced %q", c.name, what, tk, tk.Cost, c.per(tk), c.unpriced)
			}
		}
		for _, in := range rep.Inputs {
			check("input before", in.TokensBefore)
			check("input after", in.TokensAfter)
		}
		check("summary before", rep.Summary.TokensBefore)
		check("summary after", rep.Summary.TokensAfter)
		if c.per(rep.Summary.TokensBefore) == 0 && c.unpriced == nil {
			t.Errorf("%s: nothing priced", c.name)
		}
	}
	rep, err := replay.Evaluate(context.Background(), runs, reviewer(prompt, 2, lookupTool(&execs)), replay.Options{})
	if err != nil || rep.Summary.TokensBefore.Cost != nil {
		t.Fatalf("without a price table: cost %v, %v", rep.Summary.TokensBefore.Cost, err)
	}
	if _, err := replay.Evaluate(context.Background(), runs, reviewer(prompt, 2), replay.Options{Pricing: model.Pricing{"x": {Input: -1}}}); err == nil {
		t.Fatal("a negative price is accepted")
	}
}
