package agent

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/runtime"
)

// triage is the structured answer of the tests' agents.
type triage struct {
	Queue    string `json:"queue" jsonschema:"the team that takes the ticket"`
	Priority int    `json:"priority"`
	Summary  string `json:"summary"`
}

var triageFormat = model.MustSchemaFor[triage]("triage")

// countingModel counts the calls made to m.
type countingModel struct {
	m     model.ChatModel
	calls atomic.Int64
}

func (c *countingModel) Chat(ctx context.Context, req model.Request) (*model.Response, error) {
	c.calls.Add(1)
	return c.m.Chat(ctx, req)
}

// modelMetric is the value of the named counter of model name in m.
func modelMetric(m *runtime.Metrics, metric, name string) int64 {
	var s int64
	for _, x := range m.Snapshot() {
		if x.Operator == "agent" && x.Name == metric && len(x.Labels) == 1 && x.Labels[0] == (runtime.Label{Name: "model", Value: name}) {
			s += x.Value
		}
	}
	return s
}

// TestStructuredChatDurable: Chat with a response format validates the
// reply and feeds the error back until one conforms; with a store the
// validated reply is what is recorded, so the re-run after a restore gets
// it without a model call. Calls and tokens are counted per model when
// made, not when replayed.
func TestStructuredChatDurable(t *testing.T) {
	ctx := testCtx(t)
	m := &countingModel{m: &model.Offline{SchemaMistakes: 1}}
	var mu sync.Mutex
	var replies []model.Response
	var g *gates
	a := &Agent{Models: map[string]model.ChatModel{"llm": m},
		Actions: []Action{NewAction("triage", func(c *RunnerContext, ev Event) error {
			in, _ := Input[msg](ev)
			resp, err := c.Chat("llm", model.Request{Messages: []model.Message{model.User(in.Text)}, ResponseFormat: triageFormat})
			if err != nil {
				return err
			}
			mu.Lock()
			replies = append(replies, *resp)
			mu.Unlock()
			if err := g.wait(c.Context(), "hang"); err != nil {
				return err
			}
			var tr triage
			if err := resp.Decode(&tr); err != nil {
				return err
			}
			c.Output(tr.Queue)
			return nil
		}, TypeInput)}}
	opts := Options{Store: NewMemoryStore().Factory()}
	input := rec(msg{Key: "A", Text: "printer on fire"}, 1)

	g = newGates("hang")
	env, _ := callsJob[string](t, a, opts, "", input, pause[msg](make(chan struct{})))
	cp := checkpointAndCrash(t, ctx, env, func() { g.waitArrived(t, ctx, "hang") }, func() {})
	if m.calls.Load() != 2 {
		t.Fatalf("%d model calls before the crash, want 2 (a mistake, then a conforming answer)", m.calls.Load())
	}
	before := env.Metrics()
	one, _ := (&model.Offline{}).Reply(model.Request{Messages: []model.Message{model.User("printer on fire")}, ResponseFormat: triageFormat})
	if modelMetric(before, "modelCalls", "llm") != 2 || modelMetric(before, "modelOutputTokens", "llm") != 2*int64(one.Usage.CompletionTokens) ||
		modelMetric(before, "modelInputTokens", "llm") == 0 || modelMetric(before, "modelCallErrors", "llm") != 0 {
		t.Fatalf("counters before the crash: %+v", before.Snapshot())
	}

	g = newGates()
	got, after := restoreAndRun[string](t, ctx, a, opts, cp, input)
	if m.calls.Load() != 2 {
		t.Fatalf("the restored run called the model %d times, want none", m.calls.Load()-2)
	}
	if !reflect.DeepEqual(got, []string{"printer on fire"}) || after.Sum("agent", "callsReplayed") != 1 {
		t.Fatalf("outputs %q, callsReplayed %d", got, after.Sum("agent", "callsReplayed"))
	}
	if len(replies) != 2 || !reflect.DeepEqual(replies[0], replies[1]) || triageFormat.Validate(replies[1].Message.Content) != nil {
		t.Fatalf("the replayed reply is not the validated one:\n%+v", replies)
	}
	if replies[1].Usage.CompletionTokens != 2*one.Usage.CompletionTokens {
		t.Fatalf("the recorded usage %+v is not that of both calls", replies[1].Usage)
	}
	if modelMetric(after, "modelCalls", "llm") != 0 || modelMetric(after, "modelOutputTokens", "llm") != 0 {
		t.Fatalf("a replayed call was counted: %+v", after.Snapshot())
	}
}

// TestStructuredChatGivesUp: a model that never conforms fails the call
// with a SchemaError after the attempts; ChatAction reports it.
func TestStructuredChatGivesUp(t *testing.T) {
	m := &countingModel{m: &model.Offline{SchemaMistakes: 100}}
	rf := *triageFormat
	rf.Attempts = 4
	a := &Agent{Models: map[string]model.ChatModel{"llm": m},
		Actions: []Action{
			NewAction("ask", func(c *RunnerContext, ev Event) error {
				in, _ := Input[msg](ev)
				return c.Send(NewChatRequest("llm", model.Request{Messages: []model.Message{model.User(in.Text)}, ResponseFormat: &rf}))
			}, TypeInput),
			ChatAction("chat"),
			NewAction("report", func(c *RunnerContext, ev Event) error {
				cr, err := ChatResponseOf(ev)
				if err != nil {
					return err
				}
				c.Output(cr.Error)
				return nil
			}, TypeChatResponse),
		}}
	rc, metrics, err := runAgent[string](t, a, Options{}, rec(msg{Key: "A", Text: "x"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	out := values(evs)
	if len(out) != 1 || m.calls.Load() != 4 || !strings.Contains(out[0], `no reply conforming to response format "triage" in 4 attempts`) {
		t.Fatalf("outputs %q after %d calls", out, m.calls.Load())
	}
	if modelMetric(metrics, "modelCalls", "llm") != 4 {
		t.Fatalf("modelCalls %d, want 4", modelMetric(metrics, "modelCalls", "llm"))
	}
}

// TestReActStructuredOutput: ReAct with an output schema calls its tools,
// then answers with a value of the schema; a first answer that does not
// conform is corrected; the answer's Output decodes into the Go type.
func TestReActStructuredOutput(t *testing.T) {
	m := &countingModel{m: &model.Offline{Seed: 3, ToolCalls: true, SchemaMistakes: 1}}
	a := ReAct(m, []tool.Tool{sumTool}, ReActOptions{System: "triage tickets", Prompt: textPrompt, Output: triageFormat})
	out := reactOutputs(t, a, "printer on fire")
	if len(out) != 1 {
		t.Fatalf("outputs %+v", out)
	}
	got := out[0]
	var tr triage
	if err := got.Decode(&tr); err != nil || !got.Complete || got.Steps != 2 || got.ToolCalls != 1 || tr.Queue != "printer on fire" {
		t.Fatalf("answer %+v (%+v, %v)", got, tr, err)
	}
	if m.calls.Load() != 3 {
		t.Fatalf("%d model calls, want 3 (a tool call, a mistaken answer, a conforming one)", m.calls.Load())
	}
	if err := (ReActAnswer{Complete: true}).Decode(&tr); err == nil {
		t.Fatal("an answer without output decoded")
	}
}
