package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/eventlog"
	"github.com/weirproject/weir/agent/replay"
	"github.com/weirproject/weir/broker"
)

// replayPipeline is an agent pipeline: keyed records, the offline model
// with seed, the prompt, an HTTP tool at url, the event log in logPath.
func replayPipeline(t *testing.T, dir, name string, seed int, prompt, url, logPath string) string {
	t.Helper()
	eventLog := ""
	if logPath != "" {
		eventLog = fmt.Sprintf("      eventLog: {file: %s}\n", logPath)
	}
	src := fmt.Sprintf(`source:
  generate: {count: 12, fields: {u: 'i %% 3', item: 'i', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: u
  - agent:
      prompt: '%s'
      model: {offline: {seed: %d}}
      tools:
        - http: {name: stock, url: '%s', parameters: {type: object, properties: {item: {type: string}}, required: [item]}}
%ssink:
  file: {dir: %s}
`, prompt, seed, url, eventLog, filepath.Join(dir, name+"-out"))
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentReplayEndToEnd: `weir run` of an agent pipeline with an HTTP
// tool that counts its executions writes an event log; `weir agent replay`
// of that log with a changed model runs the tool 0 times, answers every
// call from the record and reports every decision changed; with a changed
// prompt the calls are new (refused) and reported; with the same pipeline
// nothing changes. --json is parsed; --fail-on-change exits 4.
func TestAgentReplayEndToEnd(t *testing.T) {
	var execs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := execs.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "stock for %s: %d", b, 100+n)
	}))
	defer srv.Close()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "agent.jsonl")
	const prompt = "Review item {{.item}} of {{.u}}"
	orig := replayPipeline(t, dir, "orig", 1, prompt, srv.URL, logPath)
	var out, errb bytes.Buffer
	if code := run([]string{"run", orig}, &out, &errb); code != 0 {
		t.Fatalf("weir run: exit %d, stderr %s", code, errb.String())
	}
	if execs.Load() != 12 {
		t.Fatalf("the tool ran %d times in the job, want 12 (one call per record)", execs.Load())
	}
	execs.Store(0)

	replayJSON := func(pipelineFile string, extra ...string) replay.Report {
		t.Helper()
		out.Reset()
		errb.Reset()
		args := append([]string{"agent", "replay", "--log", logPath, "--pipeline", pipelineFile, "--json"}, extra...)
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, stderr %s", args, code, errb.String())
		}
		var rep replay.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("--json output is not a report: %v\n%s", err, out.String())
		}
		return rep
	}

	// The same agent: every decision unchanged, every call matched.
	same := replayPipeline(t, dir, "same", 1, prompt, srv.URL, "")
	rep := replayJSON(same)
	if s := rep.Summary; s.Inputs != 12 || s.Unchanged != 12 || s.MatchedCalls != 12 || s.NewCalls != 0 ||
		s.TokensBefore.Prompt != s.TokensAfter.Prompt || s.TokensBefore.Completion != s.TokensAfter.Completion || s.TokensBefore.Cost != nil {
		t.Fatalf("same agent: summary %+v", s)
	}

	// With a price table (the offline model's replies name it "offline"):
	// the cost before and after, beside the tokens.
	b, err := os.ReadFile(model2For(t, dir, prompt, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	priced := filepath.Join(dir, "priced.yaml")
	os.WriteFile(priced, []byte(strings.Replace(string(b), "sink:", "      pricing: {offline: {input: 1000, output: 2000}}\nsink:", 1)), 0o644)
	rep = replayJSON(priced)
	s := rep.Summary
	want := func(tk replay.Tokens) float64 { return (1000*float64(tk.Prompt) + 2000*float64(tk.Completion)) / 1e6 }
	if s.TokensBefore.Cost == nil || s.TokensAfter.Cost == nil || *s.TokensBefore.Cost != want(s.TokensBefore) || *s.TokensAfter.Cost != want(s.TokensAfter) || want(s.TokensAfter) == 0 {
		t.Fatalf("priced: tokens %+v before, %+v after", s.TokensBefore, s.TokensAfter)
	}
	out.Reset()
	if code := run([]string{"agent", "replay", "--log", logPath, "--pipeline", priced}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), fmt.Sprintf("cost: %.6f before, %.6f after", want(s.TokensBefore), want(s.TokensAfter))) {
		t.Fatalf("priced table (exit %d):\n%s", code, out.String())
	}

	// Another model: the same calls (answered from the record), other
	// answers.
	model2 := replayPipeline(t, dir, "model2", 2, prompt, srv.URL, "")
	rep = replayJSON(model2)
	if s := rep.Summary; s.Inputs != 12 || s.Changed != 12 || s.Unchanged != 0 || s.MatchedCalls != 12 || s.NewCalls != 0 || s.Failed != 0 {
		t.Fatalf("changed model: summary %+v", s)
	}
	for _, in := range rep.Inputs {
		if len(in.ToolCalls) != 1 || !in.ToolCalls[0].Matched || !strings.HasPrefix(in.ToolCalls[0].Result.Content, "stock for") {
			t.Fatalf("changed model: input %s/%d tool calls %+v; want one matched with the recorded result", in.Key, in.Seq, in.ToolCalls)
		}
		if a, b := fmt.Sprint(in.OldOutputs), fmt.Sprint(in.NewOutputs); a == b {
			t.Fatalf("changed model: input %s/%d decided the same: %s", in.Key, in.Seq, a)
		}
	}

	// Another prompt: new tool calls, refused and reported.
	prompt2 := replayPipeline(t, dir, "prompt2", 1, "Should {{.item}} of {{.u}} be reordered?", srv.URL, "")
	rep = replayJSON(prompt2)
	if s := rep.Summary; s.NewCalls != 12 || s.MatchedCalls != 0 || s.Changed != 12 {
		t.Fatalf("changed prompt: summary %+v", s)
	}
	if c := rep.Inputs[0].ToolCalls[0]; c.Matched || !c.Result.IsError || !strings.Contains(c.Result.Content, "not recorded") {
		t.Fatalf("changed prompt: call %+v; want refused", c)
	}
	// A fixed sample of a range, as CI would run it.
	rep = replayJSON(model2, "--from", "2", "--to", "10", "--sample", "4")
	if s := rep.Summary; s.Inputs != 4 || s.Changed != 4 {
		t.Fatalf("sample: summary %+v", s)
	}
	if execs.Load() != 0 {
		t.Fatalf("the tool ran %d times during the replays, want 0", execs.Load())
	}

	// The table, and --fail-on-change.
	out.Reset()
	errb.Reset()
	if code := run([]string{"agent", "replay", "--log", logPath, "--pipeline", model2, "--fail-on-change"}, &out, &errb); code != exitStatusChanged {
		t.Fatalf("--fail-on-change: exit %d, want %d; stderr %s", code, exitStatusChanged, errb.String())
	}
	if !strings.Contains(out.String(), "12 inputs: 12 changed, 0 unchanged, 0 failed, 0 skipped") ||
		!strings.Contains(out.String(), "tool calls: 12 answered from the record, 0 new (not run)") ||
		!strings.Contains(errb.String(), "12 decisions changed") {
		t.Fatalf("table:\n%s\nstderr: %s", out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"agent", "replay", "--log", logPath, "--pipeline", same, "--fail-on-change"}, &out, &errb); code != 0 {
		t.Fatalf("--fail-on-change with nothing changed: exit %d", code)
	}
}

// model2For writes the pipeline of the changed model (seed 2).
func model2For(t *testing.T, dir, prompt, url string) string {
	return replayPipeline(t, dir, "model2", 2, prompt, url, "")
}

// TestAgentReplayFlags: every flag is checked before any work, in one line
// naming what is wrong and what is accepted (exit status 2).
func TestAgentReplayFlags(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := replayPipeline(t, dir, "p", 1, "x {{.item}}", "http://127.0.0.1:1/", "")
	noAgent := filepath.Join(dir, "noagent.yaml")
	os.WriteFile(noAgent, []byte("source:\n  generate: {count: 1, fields: {t: 'i'}}\n  timestamp: t\nsink:\n  stdout: {}\n"), 0o644)
	two := filepath.Join(dir, "two.yaml")
	os.WriteFile(two, []byte(`source:
  generate: {count: 2, fields: {u: 'i', t: 'i'}}
  timestamp: t
steps:
  - keyBy: u
  - {agent: {prompt: 'a {{.u}}'}, name: first}
  - keyBy: u
  - {agent: {prompt: 'b {{.u}}', output: answer2}, name: second}
sink:
  stdout: {}
`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pipeline", p}, "give --log FILE or --topic TOPIC"},
		{[]string{"--log", logPath, "--topic", "t", "--pipeline", p}, "--log and --topic: give one of them"},
		{[]string{"--topic", "t", "--pipeline", p}, "give --brokers"},
		{[]string{"--topic", "t", "--brokers", "9092", "--pipeline", p}, `--brokers "9092": want host:port`},
		{[]string{"--log", logPath, "--brokers", "h:9092", "--pipeline", p}, "--brokers: only with --topic"},
		{[]string{"--log", filepath.Join(dir, "none"), "--pipeline", p}, "--log"},
		{[]string{"--log", logPath}, "give --pipeline FILE"},
		{[]string{"--log", logPath, "--pipeline", p, "--from", "yesterday"}, `--from: "yesterday" is neither an input position`},
		{[]string{"--log", logPath, "--pipeline", p, "--from", "5", "--to", "2"}, "--to must be after --from"},
		{[]string{"--log", logPath, "--pipeline", p, "--from", "5", "--to", "2026-12-04T10:00:00Z"}, "both as positions or both as times"},
		{[]string{"--log", logPath, "--pipeline", p, "--sample", "-1"}, "--sample -1: want an integer >= 0"},
		{[]string{"--log", logPath, "--pipeline", p, "--unmatched", "skip"}, `--unmatched "skip": want refuse or stub`},
		{[]string{"--log", logPath, "--pipeline", p, "--stub-content", "x"}, "--stub-content: only with --unmatched stub"},
		{[]string{"--log", logPath, "--pipeline", noAgent}, "the pipeline has no agent step"},
		{[]string{"--log", logPath, "--pipeline", p, "--step", "other"}, `no agent step named "other"`},
		{[]string{"--log", logPath, "--pipeline", two}, `2 agent steps; name one (the agent steps are "first", "second", named by their name: key); --step NAME picks one`},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"agent", "replay"}, c.args...), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) || strings.Count(strings.TrimSpace(errb.String()), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestAgentReplayMCPTool: the same with an MCP server's tool (streamable
// HTTP): the replay connects to list the tools and calls none of them.
func TestAgentReplayMCPTool(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "stock", Version: "1"}, nil)
	var calls atomic.Int64
	type args struct {
		Sku string `json:"sku"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "stock", Description: "Stock level of an item"}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		n := calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("stock level %d for %s", n, a.Sku)}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "agent.jsonl")
	pipe := func(name string, seed int, eventLog string) string {
		src := fmt.Sprintf(`source:
  generate: {count: 8, fields: {sku: '"sku-" + string(i %% 4)', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: sku
  - agent:
      prompt: 'How many {{.sku}} are left?'
      model: {offline: {seed: %d}}
      tools: [{mcp: {url: '%s'}}]
%ssink:
  file: {dir: %s}
`, seed, srv.URL, eventLog, filepath.Join(dir, name+"-out"))
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var out, errb bytes.Buffer
	if code := run([]string{"run", pipe("orig", 1, "      eventLog: {file: "+logPath+"}\n")}, &out, &errb); code != 0 {
		t.Fatalf("weir run: exit %d, stderr %s", code, errb.String())
	}
	if calls.Load() != 8 {
		t.Fatalf("the MCP tool ran %d times in the job, want 8", calls.Load())
	}
	out.Reset()
	if code := run([]string{"agent", "replay", "--log", logPath, "--pipeline", pipe("new", 2, ""), "--json"}, &out, &errb); code != 0 {
		t.Fatalf("weir agent replay: exit %d, stderr %s", code, errb.String())
	}
	var rep replay.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary; calls.Load() != 8 || s.Inputs != 8 || s.Changed != 8 || s.MatchedCalls != 8 || s.NewCalls != 0 {
		t.Fatalf("the MCP tool ran %d times in all (want 8: none in the replay); summary %+v", calls.Load(), s)
	}
}

// TestAgentReplayOperators: a log holding two agent operators' entries
// needs --operator, which keeps that operator's inputs.
func TestAgentReplayOperators(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "two.jsonl")
	w, err := eventlog.CreateFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range []string{"agent-a", "agent-b", "agent-a"} {
		e := agent.LogEntry{Operator: op, Key: "k", Seq: int64(i), Action: "respond", Kind: agent.LogActionStart,
			Data: agent.Event{Type: agent.TypeInput, Value: map[string]any{"item": i, "u": 1}}}
		w.OnEntry(&e)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := replayPipeline(t, dir, "p", 1, "x {{.item}}", "http://127.0.0.1:1/", "")
	var out, errb bytes.Buffer
	if code := run([]string{"agent", "replay", "--log", logPath, "--pipeline", p}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `the log holds the entries of 2 agent operators ("agent-a", "agent-b"); --operator NAME picks one`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"agent", "replay", "--log", logPath, "--pipeline", p, "--operator", "agent-a", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--operator: exit %d, stderr %q", code, errb.String())
	}
	var rep replay.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary; s.Inputs != 2 || rep.Inputs[0].Operator != "agent-a" || rep.Inputs[1].Seq != 2 || s.NewCalls != 2 || s.Changed != 2 {
		t.Fatalf("--operator agent-a: %+v", rep)
	}
}

// TestAgentReplayInputTopic: `weir agent replay --input-topic` takes the
// agent's inputs from the topic's history. With the event log of the run
// that read them, every input finds its record: decisions unchanged,
// tool calls answered from the record; without it every input has no
// record and its tool calls are refused; --from/--to select offsets. The
// tool never runs during the replays.
func TestAgentReplayInputTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"orders": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 6; i++ {
		v := fmt.Sprintf(`{"u":"u%d","item":"i%d","t":%d}`, i%2, i, 1000*(i+1))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var execs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		execs.Add(1)
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "stock for %s", body)
	}))
	defer srv.Close()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "agent.jsonl")
	p := filepath.Join(dir, "p.yaml")
	os.WriteFile(p, []byte(fmt.Sprintf(`kafka: {brokers: ['%s']}
source:
  kafka: {topics: [orders], bounded: true}
  timestamp: t
steps:
  - keyBy: u
  - agent:
      prompt: 'Review item {{.item}} of {{.u}}'
      tools:
        - http: {name: stock, url: '%s', parameters: {type: object, properties: {item: {type: string}}, required: [item]}}
      eventLog: {file: %s}
sink:
  file: {dir: %s}
`, b.Addrs()[0], srv.URL, logPath, filepath.Join(dir, "out"))), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"run", p}, &out, &errb); code != 0 {
		t.Fatalf("weir run: exit %d, stderr %s", code, errb.String())
	}
	if execs.Load() != 6 {
		t.Fatalf("the tool ran %d times in the job, want 6", execs.Load())
	}
	execs.Store(0)
	replayJSON := func(args ...string) replay.Report {
		t.Helper()
		out.Reset()
		errb.Reset()
		args = append([]string{"agent", "replay", "--input-topic", "orders", "--brokers", b.Addrs()[0], "--pipeline", p, "--json"}, args...)
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, stderr %s", args, code, errb.String())
		}
		var rep replay.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("--json output is not a report: %v\n%s", err, out.String())
		}
		return rep
	}
	rep := replayJSON("--log", logPath)
	if s := rep.Summary; s.Inputs != 6 || s.Unchanged != 6 || s.MatchedCalls != 6 || s.NoRecord != 0 {
		t.Fatalf("with the log: summary %+v", s)
	}
	if !strings.Contains(errb.String(), "6 of 6 inputs of topic orders found in the event log") {
		t.Fatalf("stderr %q", errb.String())
	}
	rep = replayJSON()
	if s := rep.Summary; s.Inputs != 6 || s.NoRecord != 6 || s.NewCalls != 6 || s.Changed != 0 || s.Unchanged != 0 {
		t.Fatalf("without the log: summary %+v", s)
	}
	rep = replayJSON("--log", logPath, "--from", "2", "--to", "4")
	if s := rep.Summary; s.Inputs != 2 || s.Unchanged != 2 || rep.Inputs[0].Key != "u0" || rep.Inputs[0].Seq != 0 {
		t.Fatalf("offsets 2-4: summary %+v, first input %s/%d", s, rep.Inputs[0].Key, rep.Inputs[0].Seq)
	}
	if execs.Load() != 0 {
		t.Fatalf("the tool ran %d times during the replays", execs.Load())
	}
}
