package durability

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/replay"
	"github.com/weirproject/weir/agent/tool"
)

// replayInputs is how many recorded inputs BenchmarkReplay evaluates.
const replayInputs = 5000

// reviewAgent is a pipeline agent step's shape: the prompt, the model,
// the tool it asks for, the model again, one output.
func reviewAgent(seed int64, lookup tool.Tool) *agent.Agent {
	return &agent.Agent{
		Models: map[string]model.ChatModel{"model": &model.Offline{Seed: seed, ToolCalls: true}},
		Tools:  []tool.Tool{lookup},
		Actions: []agent.Action{agent.NewAction("respond", func(c *agent.RunnerContext, ev agent.Event) error {
			in, err := agent.Input[map[string]any](ev)
			if err != nil {
				return err
			}
			msgs := []model.Message{model.User(fmt.Sprintf("Review item %v", in["item"]))}
			var answer string
			for step := 0; step < 4; step++ {
				resp, err := c.Chat("model", model.Request{Messages: msgs, Tools: c.Tools().Specs()})
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
			out := map[string]any{"item": in["item"], "answer": answer}
			c.Output(out)
			return nil
		}, agent.TypeInput)},
	}
}

// BenchmarkReplay measures, in one run, the replay evaluation rate
// (package agent/replay: recorded inputs through a changed agent, two
// offline model calls and one tool call answered from the record per
// input) and the WAL store's replay rate (completed actions looked up
// after a reopen, what a restored operator does per replayed action:
// the replayActionsPerSec of `weir experiment durability`).
func BenchmarkReplay(b *testing.B) {
	lookup := tool.Raw{
		ToolSpec: model.ToolSpec{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}`)},
		Fn: func(_ context.Context, args json.RawMessage) (tool.Result, error) {
			return tool.Result{Content: "stock for " + string(args) + ": 42"}, nil
		},
	}
	var col replay.Collector
	ev, err := agent.NewEvaluator(reviewAgent(1, lookup), agent.EvalOptions{Listeners: []agent.Listener{agent.ListenerFunc(func(e *agent.LogEntry) {
		// Through JSON, as a log file gives them.
		bs, _ := json.Marshal(e)
		var x agent.LogEntry
		if err := json.Unmarshal(bs, &x); err == nil {
			col.Add(x)
		}
	})}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range replayInputs {
		if _, err := ev.Evaluate(context.Background(), fmt.Sprint(i%100), int64(i/100), map[string]any{"item": fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
	}
	runs := col.Runs()
	changed := reviewAgent(2, lookup)
	var evalSum, storeSum float64
	for b.Loop() {
		began := time.Now()
		rep, err := replay.Evaluate(context.Background(), runs, changed, replay.Options{})
		if err != nil {
			b.Fatal(err)
		}
		evalSum += float64(len(runs)) / time.Since(began).Seconds()
		if s := rep.Summary; s.Evaluated != replayInputs || s.MatchedCalls != replayInputs || s.Changed != replayInputs {
			b.Fatalf("summary %+v", s)
		}
		var r Result
		if err := measureStore("wal", b.TempDir(), &r); err != nil {
			b.Fatal(err)
		}
		storeSum += r.ReplayActionsPerSec
	}
	n := float64(b.N)
	b.ReportMetric(evalSum/n, "evaluated-inputs/s")
	b.ReportMetric(storeSum/n, "store-replay-actions/s")
	b.ReportMetric(evalSum/storeSum, "ratio")
}
