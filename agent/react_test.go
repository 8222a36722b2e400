package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
)

type sumArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

var sumTool = tool.MustFunc("sum", "Adds two integers", func(_ context.Context, a sumArgs) (int, error) { return a.A + a.B, nil })

func textPrompt(v any) (string, error) {
	m, err := convert[msg](v, "input", "", "")
	return m.Text, err
}

func reactOutputs(t *testing.T, a *Agent, inputs ...string) []ReActAnswer {
	t.Helper()
	var steps []step[msg]
	for i, in := range inputs {
		steps = append(steps, rec(msg{Key: fmt.Sprintf("u%d", i), Text: in}, int64(i)))
	}
	rc, _, err := runAgent[ReActAnswer](t, a, Options{}, steps...)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	return values(evs)
}

func TestReActWithOfflineModel(t *testing.T) {
	a := ReAct(&model.Offline{Seed: 3, ToolCalls: true}, []tool.Tool{sumTool}, ReActOptions{System: "use tools", Prompt: textPrompt})
	out := reactOutputs(t, a, "add 2 and 3")
	if len(out) != 1 {
		t.Fatalf("outputs %+v", out)
	}
	got := out[0]
	if !got.Complete || got.Steps != 2 || got.ToolCalls != 1 || !strings.Contains(got.Answer, `using "0"`) || got.Error != "" {
		t.Fatalf("answer %+v", got)
	}
}

// scriptedModel answers the n-th call of each conversation with replies[n].
func scriptedModel(replies func(call int, req model.Request) (*model.Response, error)) model.ChatModel {
	return model.Func(func(_ context.Context, req model.Request) (*model.Response, error) {
		calls := 0
		for _, m := range req.Messages {
			if m.Role == model.RoleAssistant {
				calls++
			}
		}
		return replies(calls, req)
	})
}

func callTools(calls ...model.ToolCall) *model.Response {
	return &model.Response{Message: model.Message{Role: model.RoleAssistant, ToolCalls: calls}, FinishReason: "tool_calls"}
}

func TestReActParallelCallsAndObservations(t *testing.T) {
	var seen atomic.Value
	m := scriptedModel(func(call int, req model.Request) (*model.Response, error) {
		if len(req.Tools) != 1 || req.Tools[0].Name != "sum" {
			return nil, fmt.Errorf("tools %+v", req.Tools)
		}
		if call == 0 {
			return callTools(
				model.ToolCall{ID: "c1", Name: "sum", Arguments: json.RawMessage(`{"a":1,"b":2}`)},
				model.ToolCall{ID: "c2", Name: "sum", Arguments: json.RawMessage(`{"a":"x"}`)},
				model.ToolCall{ID: "c3", Name: "nope", Arguments: json.RawMessage(`{}`)},
			), nil
		}
		var obs []string
		for _, msg := range req.Messages {
			if msg.Role == model.RoleTool {
				obs = append(obs, msg.ToolCallID+"="+msg.Content)
			}
		}
		seen.Store(obs)
		return &model.Response{Message: model.Assistant("three")}, nil
	})
	out := reactOutputs(t, ReAct(m, []tool.Tool{sumTool}, ReActOptions{Prompt: textPrompt}), "q")
	if len(out) != 1 || !out[0].Complete || out[0].Answer != "three" || out[0].Steps != 2 || out[0].ToolCalls != 3 {
		t.Fatalf("answer %+v", out)
	}
	obs := seen.Load().([]string)
	if len(obs) != 3 || obs[0] != "c1=3" || !strings.HasPrefix(obs[1], "c2=error: invalid arguments for sum") || !strings.HasPrefix(obs[2], `c3=error: no tool named "nope"`) {
		t.Fatalf("observations %q", obs)
	}
}

func TestReActStepLimitAndModelErrors(t *testing.T) {
	loop := scriptedModel(func(call int, _ model.Request) (*model.Response, error) {
		return callTools(model.ToolCall{ID: fmt.Sprint("c", call), Name: "sum", Arguments: json.RawMessage(`{"a":1,"b":1}`)}), nil
	})
	out := reactOutputs(t, ReAct(loop, []tool.Tool{sumTool}, ReActOptions{MaxSteps: 3, Prompt: textPrompt}), "q")
	if len(out) != 1 || out[0].Complete || out[0].Steps != 3 || out[0].ToolCalls != 2 || !strings.Contains(out[0].Error, "step limit of 3") {
		t.Fatalf("answer %+v", out)
	}
	failing := model.Func(func(context.Context, model.Request) (*model.Response, error) {
		return nil, &model.APIError{StatusCode: 500, Message: "overloaded", Endpoint: "http://x"}
	})
	out = reactOutputs(t, ReAct(failing, nil, ReActOptions{Prompt: textPrompt}), "q")
	if len(out) != 1 || out[0].Complete || !strings.Contains(out[0].Error, "overloaded") {
		t.Fatalf("answer %+v", out)
	}
}

// I9: model and tool calls are counted per model and per tool, with their
// errors, and every action run is timed.
func TestCallCounters(t *testing.T) {
	a := ReAct(&model.Offline{Seed: 3, ToolCalls: true}, []tool.Tool{sumTool}, ReActOptions{System: "use tools", Prompt: textPrompt})
	_, m, err := runAgent[ReActAnswer](t, a, Options{}, rec(msg{Key: "u", Text: "add 2 and 3"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name, label, value string) int64 {
		for _, x := range m.Snapshot() {
			if x.Operator == "agent" && x.Name == name && len(x.Labels) == 1 && x.Labels[0].Name == label && x.Labels[0].Value == value {
				return x.Value
			}
		}
		return -1
	}
	// Two steps (see TestReActWithOfflineModel): two model calls, one tool call.
	if got := get(MetricModelCalls, "model", reactModel); got != 2 {
		t.Errorf("model calls = %d, want 2", got)
	}
	if got := get(MetricModelCallErrors, "model", reactModel); got != 0 {
		t.Errorf("model call errors = %d, want 0", got)
	}
	if got := get(MetricToolCalls, "tool", "sum"); got != 1 {
		t.Errorf("tool calls = %d, want 1", got)
	}
	if runs, timed := m.Sum("agent", "actionsRun"), m.Sum("agent", MetricActionsTimed); timed != runs || timed == 0 {
		t.Errorf("actions timed %d, run %d: want every run timed", timed, runs)
	}
}
