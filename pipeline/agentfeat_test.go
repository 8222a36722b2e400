package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirproject/weir/pipeline"
)

// TestAgentWhen: an agent step with a CEL condition answers the records
// that meet it; the others pass through unchanged.
func TestAgentWhen(t *testing.T) {
	dir := t.TempDir()
	src := fmt.Sprintf(`
source:
  generate: {count: 20, fields: {amount: 'i * 10', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: amount
  - agent:
      prompt: 'Check order of {{.amount}}'
      when: event.value.amount > 100
      output: answer
sink:
  file: {dir: %s}
`, filepath.Join(dir, "out"))
	spec, err := pipeline.Parse("w.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 20 {
		t.Fatalf("%d outputs, want 20", s.Outputs["sink"])
	}
	answered := 0
	for _, r := range committed(t, filepath.Join(dir, "out")) {
		amount := r["amount"].(float64)
		_, has := r["answer"]
		if has != (amount > 100) {
			t.Errorf("record %v: answered %v, want %v", r, has, amount > 100)
		}
		if has {
			answered++
		}
	}
	if answered != 9 {
		t.Fatalf("%d records answered, want 9 (110..190)", answered)
	}
}

func TestAgentWhenAndMCPConfigErrors(t *testing.T) {
	t.Setenv("WEIR_TEST_EMPTY", "")
	head := "source:\n  file: {paths: [in.jsonl]}\n  timestamp: time\nsink:\n  stdout: {}\nsteps:\n  - keyBy: u\n"
	cases := []struct{ name, src, want string }{
		{"unknown field", head + "  - agent: {prompt: p, when: 'event.valu.x > 1'}\n", "p.yaml:8:36: steps[1].agent.when: bad condition: undefined field 'valu'"},
		{"not bool", head + "  - agent: {prompt: p, when: event.id + 1}\n", "p.yaml:8:30: steps[1].agent.when: bad condition: the condition is a int, not a bool"},
		{"syntax", head + "  - agent:\n      prompt: p\n      when: event.id >\n", "p.yaml:10:"},
		{"header not string", head + "  - agent: {prompt: p, tools: [{mcp: {url: 'http://h/mcp', headers: {X: [1]}}}]}\n", "steps[1].agent.tools[0].mcp.headers.X: want a string value"},
		{"header unset env", head + "  - agent: {prompt: p, tools: [{mcp: {url: 'http://h/mcp', headers: {Authorization: 'Bearer ${WEIR_TEST_UNSET_TOKEN}'}}}]}\n", "mcp.headers.Authorization: environment variable WEIR_TEST_UNSET_TOKEN is not set"},
		{"header empty", head + "  - agent: {prompt: p, tools: [{mcp: {url: 'http://h/mcp', headers: {Authorization: '${WEIR_TEST_EMPTY}'}}}]}\n", "mcp.headers.Authorization: the value is empty"},
		{"headers on stdio", head + "  - agent: {prompt: p, tools: [{mcp: {command: [srv], headers: {A: b}}}]}\n", "mcp.headers: headers apply to an MCP server over HTTP"},
		{"bad attempts", head + "  - agent: {prompt: p, tools: [{mcp: {url: 'http://h/mcp', retries: {attempts: 0}}}]}\n", "mcp.retries.attempts: 0 is out of range; want an integer from 1 to 100"},
		{"bad timeout", head + "  - agent: {prompt: p, tools: [{mcp: {url: 'http://h/mcp', retries: {timeout: soon}}}]}\n", `mcp.retries.timeout: "soon" is not a duration`},
		{"bad url", head + "  - agent: {prompt: p, tools: [{mcp: {url: 'h/mcp'}}]}\n", `mcp.url: "h/mcp": want an http:// or https:// URL`},
	}
	for _, c := range cases {
		_, err := pipeline.Parse("p.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v\nwant it to contain %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(c.name, "header") && strings.Contains(err.Error(), "Bearer") {
			t.Errorf("%s: the error shows the header's value: %v", c.name, err)
		}
	}
}

// TestAgentMCPHeadersAndRetries: the agent step's MCP tool sends the
// Authorization header from the environment to a server that requires it,
// and retries the calls the server fails with 503.
func TestAgentMCPHeadersAndRetries(t *testing.T) {
	const token = "pipeline-token"
	t.Setenv("WEIR_TEST_MCP_TOKEN", token)
	server := mcp.NewServer(&mcp.Implementation{Name: "stock", Version: "1"}, nil)
	var calls atomic.Int64
	type args struct {
		Sku string `json:"sku"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "stock", Description: "Stock level of an item"}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stock level 17 for " + a.Sku}}}, nil, nil
	})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != token {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	// The first attempt of every tool call fails with 503 and the retry
	// succeeds. Attempts are counted per sku: calls for one key run one
	// after another, so the count does not depend on how the keys
	// interleave (a shared counter did, and failed a call three times in a
	// row under load).
	var mu sync.Mutex
	attempts := map[string]int{}
	var failed atomic.Int64
	flaky := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Arguments struct {
						Sku string `json:"sku"`
					} `json:"arguments"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				mu.Lock()
				attempts[msg.Params.Arguments.Sku]++
				first := attempts[msg.Params.Arguments.Sku]%2 == 1
				mu.Unlock()
				if first {
					failed.Add(1)
					http.Error(w, "overloaded", http.StatusServiceUnavailable)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: flaky}}
	srv.Start()
	defer srv.Close()
	dir := t.TempDir()
	src := fmt.Sprintf(`
source:
  generate: {count: 10, fields: {sku: '"sku-" + string(i %% 4)', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: sku
  - agent:
      prompt: 'How many {{.sku}} are left?'
      tools:
        - mcp:
            url: %s
            headers: {Authorization: 'Bearer ${WEIR_TEST_MCP_TOKEN}'}
            retries: {attempts: 3, initial: 1ms, max: 5ms}
      maxSteps: 3
sink:
  file: {dir: %s}
`, srv.URL, filepath.Join(dir, "out"))
	spec, err := pipeline.Parse("m.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprintf("%+v", spec), token) {
		t.Fatal("the parsed spec holds the token")
	}
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 10 || calls.Load() != 10 || failed.Load() != 10 {
		t.Fatalf("%d outputs, %d tool calls, %d failed attempts; want 10, 10 and 10", s.Outputs["sink"], calls.Load(), failed.Load())
	}
	for _, r := range committed(t, filepath.Join(dir, "out")) {
		if !strings.Contains(r["answer"].(string), "stock level 17") {
			t.Errorf("answer without the tool's result: %v", r)
		}
	}
}
