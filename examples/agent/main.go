// Command agent runs a ReAct agent (a model and a tool in turn) on a keyed
// stream of customer questions, with the action-state store that makes its
// model and tool calls exactly-once across restores, and counts the
// answers per one-minute event-time window behind it.
//
//	go run ./examples/agent
//
// Without OPENAI_API_KEY the model is weir's offline one (deterministic
// replies, simulated latency, tool calls); with it, the same job calls the
// chat-completions API at OPENAI_BASE_URL (default api.openai.com) with the
// model in WEIR_MODEL (default gpt-4o-mini).
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// Question is one customer question at an event time.
type Question struct {
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Text     string `json:"text"`
	Time     int64  `json:"time"` // Unix ms
}

// StockArgs are the arguments of the stock tool.
type StockArgs struct {
	Item string `json:"item" jsonschema:"the item to look up"`
}

func main() {
	minute := func(m int64) int64 { return m * 60_000 }
	var questions []Question
	for i := range 40 {
		questions = append(questions, Question{
			Customer: fmt.Sprintf("customer-%d", i%5),
			Item:     fmt.Sprintf("item-%d", i%7),
			Text:     fmt.Sprintf("Is item-%d in stock, and when can it ship?", i%7),
			Time:     minute(int64(i/10)) + int64(i%10)*1000, // four minutes, ten questions each
		})
	}

	// The tool: a stock lookup (any Go function with JSON arguments).
	stock := tool.MustFunc("stock", "Units in stock of an item", func(_ context.Context, a StockArgs) (int, error) {
		return len(a.Item) * 7 % 13, nil
	})
	var m model.ChatModel = &model.Offline{Seed: 7, ToolCalls: true,
		Latency: model.Latency{Dist: "exponential", Mean: 20 * time.Millisecond}}
	if os.Getenv("OPENAI_API_KEY") != "" {
		name := os.Getenv("WEIR_MODEL")
		if name == "" {
			name = "gpt-4o-mini"
		}
		m = model.OpenAI(model.OpenAIConfig{Model: name})
	}
	a := agent.ReAct(m, []tool.Tool{stock}, agent.ReActOptions{
		System: "You answer stock questions. Call the stock tool before answering.",
		Prompt: func(in any) (string, error) { return in.(Question).Text, nil },
	})

	// The action-state store: completed actions and recorded model and
	// tool calls survive a restart, so a restored job does not call again.
	dir, err := os.MkdirTemp("", "weir-agent-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "questions", questions,
		watermark.ForMonotonous[Question]().WithTimestamp(func(q Question, _ int64) (int64, bool) { return q.Time, true }))
	answers := agent.Apply[string, Question, agent.ReActAnswer](
		weir.KeyBy(src, func(q Question) string { return q.Customer }), "stock-agent", a,
		agent.Options{Store: wal.Factory(dir, wal.Options{}), MaxConcurrentKeys: 5})
	// Answers keep their question's timestamp, and the agent holds each
	// watermark until every question before it is answered, so the window
	// counts below are complete: no answer arrives after its window fired.
	perMinute := window.AggregateKeyed(weir.KeyBy(answers, func(agent.ReActAnswer) string { return "all" }), "per-minute",
		window.Tumbling(time.Minute), window.AggregateFuncs[agent.ReActAnswer, int, int]{
			AddFn:    func(_ agent.ReActAnswer, n int) int { return n + 1 },
			ResultFn: func(n int) int { return n },
			MergeFn:  func(a, b int) int { return a + b },
		})
	out := weir.Collect(answers)
	counts := weir.Collect(perMinute)

	start := time.Now()
	if err := env.Execute(context.Background()); err != nil {
		log.Fatal(err)
	}
	got := out.Values()
	slices.SortFunc(got, func(x, y agent.ReActAnswer) int { return cmp.Compare(x.Answer, y.Answer) })
	tools := 0
	for _, r := range got {
		tools += r.ToolCalls
	}
	fmt.Printf("%d questions answered in %v, %d tool calls; for example:\n  %.100s\n",
		len(got), time.Since(start).Round(time.Millisecond), tools, got[0].Answer)
	for _, c := range counts.Values() {
		fmt.Printf("window %s: %d answers\n", time.UnixMilli(c.Window.Start).UTC().Format("15:04"), c.Value)
	}
}
