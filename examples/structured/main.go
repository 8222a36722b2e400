// Command structured runs a tool-calling agent with structured output: a
// ReAct agent triages a keyed stream of support tickets, looking up each
// customer's plan with a tool, and answers with a Triage value whose JSON
// Schema comes from the Go type. Every answer is validated against the
// schema; one that does not conform is sent back to the model with the
// validation error until one does (at most three calls).
//
//	go run ./examples/structured
//
// Without API keys the model is weir's offline one, made to get its first
// answer of every ticket wrong so the correction loop shows in the
// counters; with ANTHROPIC_API_KEY the job calls Anthropic's Messages API
// (model WEIR_MODEL, default claude-haiku-4-5), with OPENAI_API_KEY the
// chat-completions API (default gpt-4o-mini).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/watermark"
)

// Ticket is one support ticket at an event time.
type Ticket struct {
	ID       int    `json:"id"`
	Customer string `json:"customer"`
	Text     string `json:"text"`
	Time     int64  `json:"time"` // Unix ms
}

// Triage is the agent's structured answer for a ticket.
type Triage struct {
	Queue    string `json:"queue" jsonschema:"the team that takes the ticket"`
	Priority int    `json:"priority" jsonschema:"1 (urgent) to 3 (whenever)"`
	Summary  string `json:"summary" jsonschema:"the problem in one sentence"`
}

// PlanArgs are the arguments of the plan tool.
type PlanArgs struct {
	Customer string `json:"customer" jsonschema:"the customer's id"`
}

// triageFormat is the response format of Triage: the schema inferred
// from the type, narrowed by hand where a Go type cannot say it (the
// queues, the priority's range).
func triageFormat() (*model.ResponseFormat, error) {
	s, err := jsonschema.For[Triage](nil)
	if err != nil {
		return nil, err
	}
	s.Properties["queue"].Enum = []any{"billing", "technical", "sales"}
	one, three := 1.0, 3.0
	s.Properties["priority"].Minimum, s.Properties["priority"].Maximum = &one, &three
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return &model.ResponseFormat{Name: "triage", Schema: raw, Attempts: 3}, nil
}

func chooseModel() (model.ChatModel, string) {
	name := os.Getenv("WEIR_MODEL")
	switch {
	case os.Getenv("ANTHROPIC_API_KEY") != "":
		return model.Anthropic(model.AnthropicConfig{Model: cmp.Or(name, "claude-haiku-4-5")}), "anthropic"
	case os.Getenv("OPENAI_API_KEY") != "":
		return model.OpenAI(model.OpenAIConfig{Model: cmp.Or(name, "gpt-4o-mini")}), "openai"
	}
	return &model.Offline{Seed: 11, ToolCalls: true, SchemaMistakes: 1}, "offline"
}

func main() {
	texts := []string{
		"I was charged twice this month.",
		"The export button does nothing since the update.",
		"Can we get a quote for 50 more seats?",
		"Login fails with error 502.",
	}
	var tickets []Ticket
	for i := range 12 {
		tickets = append(tickets, Ticket{ID: i, Customer: fmt.Sprintf("c%d", i%4), Text: texts[i%len(texts)], Time: int64(i) * 1000})
	}

	plan := tool.MustFunc("plan", "The customer's plan: free, team or enterprise", func(_ context.Context, a PlanArgs) (string, error) {
		return []string{"free", "team", "enterprise"}[len(a.Customer)%3], nil
	})
	rf, err := triageFormat()
	if err != nil {
		log.Fatal(err)
	}
	m, kind := chooseModel()
	a := agent.ReAct(m, []tool.Tool{plan}, agent.ReActOptions{
		System: "You triage support tickets. Look up the customer's plan first; enterprise customers get priority 1.",
		Prompt: func(in any) (string, error) {
			t := in.(Ticket)
			return fmt.Sprintf("Customer %s writes: %s", t.Customer, t.Text), nil
		},
		Output: rf,
	})

	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "tickets", tickets,
		watermark.ForMonotonous[Ticket]().WithTimestamp(func(t Ticket, _ int64) (int64, bool) { return t.Time, true }))
	answers := agent.Apply[string, Ticket, agent.ReActAnswer](
		weir.KeyBy(src, func(t Ticket) string { return t.Customer }), "triage", a,
		agent.Options{Store: agent.NewMemoryStore().Factory()})
	out := weir.Collect(answers)
	if err := env.Execute(context.Background()); err != nil {
		log.Fatal(err)
	}

	perQueue := map[string]int{}
	var failed int
	var first Triage
	for i, ans := range out.Values() {
		var t Triage
		if err := ans.Decode(&t); err != nil {
			failed++
			continue
		}
		if i == 0 {
			first = t
		}
		perQueue[t.Queue]++
	}
	fmt.Printf("%d tickets triaged by the %s model, %d without a valid answer\n", len(out.Values())-failed, kind, failed)
	for _, q := range slices.Sorted(maps.Keys(perQueue)) {
		fmt.Printf("  queue %-10s %d\n", q, perQueue[q])
	}
	fmt.Printf("for example: %+v\n", first)
	var calls, in, outTok int64
	for _, x := range env.Metrics().Snapshot() {
		switch x.Name {
		case "modelCalls":
			calls += x.Value
		case "modelInputTokens":
			in += x.Value
		case "modelOutputTokens":
			outTok += x.Value
		}
	}
	fmt.Printf("model calls %d (tool calls, rejected and accepted answers), tokens in %d, out %d\n", calls, in, outTok)
}
