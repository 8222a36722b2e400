package pipeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/pipeline"
)

// TestAgentBudgetInPipeline: an agent step on the offline model with a
// budget of 3 requests per key a day answers 3 records of each of the two
// keys; the 14 others are refused before their call and become the step's
// dead letters.
func TestAgentBudgetInPipeline(t *testing.T) {
	dir := t.TempDir()
	src := fmt.Sprintf(`
source:
  generate: {count: 20, fields: {u: 'i %% 2', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: u
  - agent:
      prompt: 'Review {{.u}}'
      continueOnError: true
      budgets:
        - {name: per-user, requests: 3, window: 24h}
    deadLetters: refused
outputs:
  refused: {file: {dir: %s}}
sink:
  file: {dir: %s}
`, filepath.Join(dir, "refused"), filepath.Join(dir, "out"))
	spec, err := pipeline.Parse("b.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 6 || s.DeadLetters != 14 {
		t.Fatalf("%d answered, %d dead letters; want 6 and 14", s.Outputs["sink"], s.DeadLetters)
	}
	refused := committed(t, filepath.Join(dir, "refused"))
	if len(refused) != 14 {
		t.Fatalf("%d refused records written, want 14", len(refused))
	}
	if b, _ := json.Marshal(refused[0]); !strings.Contains(string(b), `budget \"per-user\" spent`) {
		t.Fatalf("dead letter %s does not name the budget", b)
	}
}

// TestAgentFallbackRateLimitEventLogInPipeline: past the budget of the
// step's model the calls go to its fallbackModel (every record answered,
// none refused); both models are rate limited, and the event log file
// gets every call.
func TestAgentFallbackRateLimitEventLogInPipeline(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "agent.jsonl")
	src := fmt.Sprintf(`
source:
  generate: {count: 20, fields: {u: 'i %% 2', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: u
  - agent:
      prompt: 'Review {{.u}}'
      model: {offline: {seed: 1}, rateLimit: {requests: 10000, interval: 1s}}
      fallbackModel: {offline: {seed: 2}, rateLimit: {maxConcurrent: 4}}
      budgets:
        - {name: big, scope: job, models: [model], tokens: 1, window: 1h, onLimit: fallback}
      eventLog: {file: %s}
sink:
  file: {dir: %s}
`, logPath, filepath.Join(dir, "out"))
	spec, err := pipeline.Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 20 || s.DeadLetters != 0 {
		t.Fatalf("%d answered, %d dead letters; want 20 and 0", s.Outputs["sink"], s.DeadLetters)
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"kind":"model_call"`) {
			calls++
		}
	}
	if calls != 20 {
		t.Fatalf("%d model_call entries in the event log, want 20", calls)
	}
}

// TestAgentLimitsConfigErrors: bad budgets, rate limits and event logs
// are refused at their line and column, naming what is accepted.
func TestAgentLimitsConfigErrors(t *testing.T) {
	head := "source:\n  file: {paths: [in.jsonl]}\n  timestamp: time\nsink:\n  stdout: {}\nsteps:\n  - keyBy: u\n"
	agent := func(rest string) string {
		return head + "  - agent:\n      prompt: p\n      continueOnError: true\n" + rest
	}
	cases := []struct{ name, src, want string }{
		{"scope", agent("      budgets: [{name: b, scope: user, tokens: 1, window: 1h}]\n"), `p.yaml:11:34: steps[1].agent.budgets[0].scope: "user": want one of key, model, job`},
		{"no limit", agent("      budgets: [{name: b, window: 1h}]\n"), "p.yaml:11:17: steps[1].agent.budgets[0]: want tokens, requests or both"},
		{"tokens", agent("      budgets: [{name: b, tokens: -5, window: 1h}]\n"), "steps[1].agent.budgets[0].tokens: -5 is out of range"},
		{"window", agent("      budgets: [{name: b, tokens: 5, window: 24}]\n"), `steps[1].agent.budgets[0].window: "24" has no unit`},
		{"no window", agent("      budgets: [{name: b, tokens: 5}]\n"), `steps[1].agent.budgets[0]: missing key "window" (accepted: models, name, onLimit, requests, scope, tokens, window)`},
		{"onLimit", agent("      budgets: [{name: b, tokens: 5, window: 1h, onLimit: retry}]\n"), `budgets[0].onLimit: "retry": want one of fail, wait, fallback`},
		{"fallback without model", agent("      budgets: [{name: b, tokens: 5, window: 1h, onLimit: fallback}]\n"), "onLimit fallback needs steps[1].agent.fallbackModel"},
		{"models", agent("      budgets: [{name: b, tokens: 5, window: 1h, models: [gpt]}]\n"), `budgets[0].models[0]: "gpt": want model or fallback`},
		{"twice", agent("      budgets: [{name: b, tokens: 5, window: 1h}, {name: b, requests: 5, window: 1h}]\n"), `budgets[1].name: "b" is used twice`},
		{"unknown key", agent("      budgets: [{name: b, tokens: 5, window: 1h, per: key}]\n"), `unknown key "per"; accepted: models, name, onLimit, requests, scope, tokens, window`},
		{"fail without continueOnError", head + "  - agent:\n      prompt: p\n      budgets: [{name: b, tokens: 5, window: 1h}]\n", "onLimit fail needs steps[1].agent.continueOnError: true"},
		{"rate limit empty", agent("      model: {offline: {}, rateLimit: {}}\n"), "steps[1].agent.model.rateLimit: want at least one of requests, tokens"},
		{"rate limit interval", agent("      model: {offline: {}, rateLimit: {requests: 5, interval: 0s}}\n"), "steps[1].agent.model.rateLimit.interval: 0s: want a duration > 0"},
		{"rate limit key", agent("      model: {offline: {}, rateLimit: {rps: 5}}\n"), `rateLimit: unknown key "rps"; accepted: interval, maxConcurrent, requests, tokens`},
		{"event log both", agent("      eventLog: {file: a.jsonl, kafka: {topic: t}}\n"), "steps[1].agent.eventLog: want exactly one of file (a path) or kafka ({topic})"},
		{"event log empty", agent("      eventLog: {file: ''}\n"), "steps[1].agent.eventLog.file: empty; want a JSON-lines file"},
	}
	for _, c := range cases {
		_, err := pipeline.Parse("p.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v\nwant it to contain %q", c.name, err, c.want)
		}
	}
}
