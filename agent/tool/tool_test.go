package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirproject/weir/agent/model"
)

type addArgs struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b" jsonschema:"the second addend"`
}

type addResult struct {
	Sum int `json:"sum"`
}

func add(_ context.Context, a addArgs) (addResult, error) { return addResult{Sum: a.A + a.B}, nil }

// testServer is the MCP server of the tests: "add", "fail" (a tool error)
// and "wait" (blocks until cancelled, or until release is closed: over
// streamable HTTP the server does not learn of the client's cancellation
// in every case, and closing the session waits for running handlers).
func testServer(release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "weir-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two integers"}, func(ctx context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, addResult, error) {
		r, err := add(ctx, in)
		return nil, r, err
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Waits until cancelled"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-release:
			return nil, nil, errors.New("released")
		}
	})
	addPromptAndResource(s)
	return s
}

// addPromptAndResource gives s the prompt "review" (argument order) and
// the resource weir://policy.
func addPromptAndResource(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{Name: "review", Description: "Reviews an order",
		Arguments: []*mcp.PromptArgument{{Name: "order", Description: "the order id", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Review order " + req.Params.Arguments["order"]}},
				{Role: "assistant", Content: &mcp.TextContent{Text: "Which policy applies?"}},
			}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "weir://policy", Name: "policy", Description: "The refund policy", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "Refunds within 30 days."}}}, nil
		})
}

const serverEnv = "WEIR_TOOL_TEST_MCP_SERVER"

// TestMain turns the test binary into the MCP server of TestMCPStdio when
// serverEnv is set: no external program is needed.
func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		if err := testServer(nil).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "mcp test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestFuncTool(t *testing.T) {
	tl, err := Func("add", "Adds two integers", add)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(tl.Spec().Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	props := schema["properties"].(map[string]any)
	if schema["type"] != "object" || props["a"].(map[string]any)["type"] != "integer" || props["a"].(map[string]any)["description"] != "the first addend" {
		t.Fatalf("schema %s", tl.Spec().Parameters)
	}
	ctx := context.Background()
	r, err := tl.Call(ctx, json.RawMessage(`{"a":2,"b":40}`))
	if err != nil || r.IsError || r.Content != `{"sum":42}` || string(r.Structured) != `{"sum":42}` {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{`{"a":"two","b":1}`, `{"a":1}`, `[1,2]`, `not json`} {
		r, err := tl.Call(ctx, json.RawMessage(bad))
		if err != nil || !r.IsError || !strings.Contains(r.Content, "invalid arguments for add") {
			t.Fatalf("args %s: %+v %v", bad, r, err)
		}
	}
	boom, _ := Func("boom", "", func(context.Context, struct{}) (string, error) { return "", errors.New("out of cheese") })
	if r, err := boom.Call(ctx, nil); err != nil || !r.IsError || r.Content != "out of cheese" {
		t.Fatalf("%+v %v", r, err)
	}
	echo := MustFunc("echo", "", func(_ context.Context, a struct {
		S string `json:"s"`
	}) (string, error) {
		return a.S, nil
	})
	if r, _ := echo.Call(ctx, json.RawMessage(`{"s":"hi"}`)); r.Content != "hi" || r.Structured != nil {
		t.Fatalf("string result %+v", r)
	}
	if _, err := Func("n", "", func(context.Context, int) (int, error) { return 0, nil }); err == nil || !strings.Contains(err.Error(), "wrap it in a struct") {
		t.Fatalf("non-object arguments: %v", err)
	}
}

func TestSet(t *testing.T) {
	a, _ := Func("add", "", add)
	s, err := NewSet(a, Raw{ToolSpec: specNamed("raw"), Fn: func(context.Context, json.RawMessage) (Result, error) { return Result{Content: "r"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); len(got) != 2 || got[0] != "add" || got[1] != "raw" {
		t.Fatalf("names %v", got)
	}
	if r, _ := s.Call(context.Background(), "nope", nil); !r.IsError || !strings.Contains(r.Content, "add, raw") {
		t.Fatalf("unknown tool: %+v", r)
	}
	if err := s.Add(a); err == nil {
		t.Fatal("duplicate name accepted")
	}
}

func checkMCPTools(t *testing.T, c *MCPClient) {
	t.Helper()
	ctx := context.Background()
	s, err := NewSet(c.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Names(), ","); got != "add,fail,wait" {
		t.Fatalf("tools %s", got)
	}
	addTool, _ := s.Get("add")
	if !strings.Contains(string(addTool.Spec().Parameters), `"a"`) || addTool.Spec().Description != "Adds two integers" {
		t.Fatalf("spec %+v", addTool.Spec())
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Call(ctx, "add", json.RawMessage(fmt.Sprintf(`{"a":%d,"b":1}`, i)))
			if err != nil {
				errs <- err
				return
			}
			var out addResult
			if err := json.Unmarshal(r.Structured, &out); err != nil || out.Sum != i+1 || r.IsError {
				errs <- fmt.Errorf("add(%d,1) = %+v (%v)", i, r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if r, err := s.Call(ctx, "fail", nil); err != nil || !r.IsError || r.Content != "disk full" {
		t.Fatalf("fail: %+v %v", r, err)
	}
	if r, err := s.Call(ctx, "add", json.RawMessage(`{"a":"x"}`)); err == nil && !r.IsError {
		t.Fatalf("invalid arguments accepted: %+v", r)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.Call(cctx, "wait", nil); err == nil {
		t.Fatal("a cancelled call returned no error")
	}
}

// TestMCPStdio runs the test binary itself as an MCP server over stdio.
func TestMCPStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	c, err := MCPStdio(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	checkMCPTools(t, c)
	checkMCPPromptsAndResources(t, c)
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Exited() {
		t.Fatalf("the server process has not exited after Close")
	}
}

// TestMCPStreamableHTTP connects over the streamable HTTP transport to a
// server on loopback.
func TestMCPStreamableHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	release := make(chan struct{})
	server := testServer(release)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()
	c, err := MCPHTTP(ctx, srv.URL, srv.Client())
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	checkMCPTools(t, c)
	checkMCPPromptsAndResources(t, c)
	close(release)
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func specNamed(n string) model.ToolSpec { return model.ToolSpec{Name: n} }

// TestMCPIdempotencyKeyInMeta: a call under a context carrying an
// idempotency key sends it in the request's _meta, where the server's
// handler reads it; a call without one sends none.
func TestMCPIdempotencyKeyInMeta(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var seen []any // the _meta value of each call (nil when absent)
	s := mcp.NewServer(&mcp.Implementation{Name: "weir-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "stamp", Description: "Records the idempotency key"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req.Params.Meta[MCPIdempotencyMetaKey])
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	c, err := ConnectMCP(ctx, ct, "in-memory")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stamp := c.Tools()[0]
	const key = "fedcba9876543210fedcba9876543210"
	if r, err := stamp.Call(WithIdempotencyKey(ctx, key), nil); err != nil || r.Content != "ok" {
		t.Fatalf("call: %+v %v", r, err)
	}
	if _, err := stamp.Call(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != key || seen[1] != nil {
		t.Fatalf("_meta[%q] seen by the server: %v, want [%s <nil>]", MCPIdempotencyMetaKey, seen, key)
	}
}

// TestGoToolIdempotencyKey: a Go tool reads the key of its call from the
// context.
func TestGoToolIdempotencyKey(t *testing.T) {
	var got []string
	tl := MustFunc("send", "Sends", func(ctx context.Context, _ struct{}) (string, error) {
		k, ok := IdempotencyKey(ctx)
		if !ok {
			k = "none"
		}
		got = append(got, k)
		return "sent", nil
	})
	if _, err := tl.Call(WithIdempotencyKey(context.Background(), "k1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Call(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "k1" || got[1] != "none" {
		t.Fatalf("keys seen by the tool: %q", got)
	}
}

// TestResultJSONRoundTrip: results survive the JSON round trip of the
// action-state store unchanged.
func TestResultJSONRoundTrip(t *testing.T) {
	for _, r := range []Result{
		{Content: `{"sum":5}`, Structured: json.RawMessage(`{"sum":5}`)},
		{Content: "disk full", IsError: true},
		{Content: "<b>&</b>", Structured: json.RawMessage(`["x",1,null]`), IsError: true},
		{},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Result
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, back) {
			t.Fatalf("round trip changed %+v into %+v", r, back)
		}
	}
}
