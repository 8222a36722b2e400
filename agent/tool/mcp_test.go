package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/clock"
)

func checkMCPPromptsAndResources(t *testing.T, c *MCPClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps, err := c.Prompts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Name != "review" || len(ps[0].Arguments) != 1 || !ps[0].Arguments[0].Required || ps[0].Arguments[0].Name != "order" {
		t.Fatalf("prompts %+v", ps)
	}
	msgs, err := c.Prompt(ctx, "review", map[string]string{"order": "o-7"})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Message{model.User("Review order o-7"), model.Assistant("Which policy applies?")}
	if len(msgs) != 2 || msgs[0].Role != want[0].Role || msgs[0].Content != want[0].Content || msgs[1].Role != want[1].Role || msgs[1].Content != want[1].Content {
		t.Fatalf("prompt messages %+v, want %+v", msgs, want)
	}
	if _, err := c.Prompt(ctx, "nope", nil); err == nil {
		t.Fatal("an unknown prompt rendered")
	}
	rs, err := c.Resources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].URI != "weir://policy" || rs[0].MIMEType != "text/plain" {
		t.Fatalf("resources %+v", rs)
	}
	text, err := c.ReadResource(ctx, "weir://policy")
	if err != nil || text != "Refunds within 30 days." {
		t.Fatalf("read: %q %v", text, err)
	}
	rt, err := c.ResourceTool(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if rt.Spec().Name != "read_resource" || !strings.Contains(rt.Spec().Description, "weir://policy: The refund policy") {
		t.Fatalf("resource tool spec %+v", rt.Spec())
	}
	if r, err := rt.Call(ctx, json.RawMessage(`{"uri":"weir://policy"}`)); err != nil || r.IsError || r.Content != "Refunds within 30 days." {
		t.Fatalf("resource tool: %+v %v", r, err)
	}
	if r, err := rt.Call(ctx, json.RawMessage(`{"uri":"weir://none"}`)); err != nil || !r.IsError {
		t.Fatalf("resource tool on an unknown URI: %+v %v", r, err)
	}
}

func serveMCP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestMCPAuthHeaders: a server behind the SDK's bearer-token middleware
// rejects a client without the header or with a wrong token, without
// retrying and without the token in the error, and serves one with the
// right token.
func TestMCPAuthHeaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const token = "s3cret-token-value"
	var requests atomic.Int64
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		requests.Add(1)
		if tok != token {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	server := testServer(nil)
	h := auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	url := serveMCP(t, h)

	if _, err := MCPHTTPWith(ctx, url, MCPOptions{}); err == nil || !strings.Contains(err.Error(), "Authorization") {
		t.Fatalf("no header: err = %v, want a rejection naming the Authorization header", err)
	}
	// The requests one connection makes with a wrong token, without and
	// with retries: the same (a 401 is not retried).
	wrong := func(attempts int) int64 {
		before := requests.Load()
		_, err := MCPHTTPWith(ctx, url, MCPOptions{Headers: map[string]string{"Authorization": "Bearer wrong-" + token},
			Retry: MCPRetry{Attempts: attempts, Sleep: func(context.Context, time.Duration) error { return nil }}})
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("wrong token: err = %v, want HTTP 401", err)
		}
		if strings.Contains(err.Error(), token) {
			t.Fatalf("the error shows the token: %v", err)
		}
		return requests.Load() - before
	}
	if n1, n4 := wrong(1), wrong(4); n1 != n4 || n1 == 0 {
		t.Fatalf("a rejected token was sent %d times with 4 attempts allowed, %d with 1; 4xx must not be retried", n4, n1)
	}
	c, err := MCPHTTPWith(ctx, url, MCPOptions{Headers: map[string]string{"Authorization": "Bearer " + token}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, _ := NewSet(c.Tools()...)
	if r, err := s.Call(ctx, "add", json.RawMessage(`{"a":2,"b":3}`)); err != nil || r.IsError || !strings.Contains(r.Content, "5") {
		t.Fatalf("authorized call: %+v %v", r, err)
	}
	checkMCPPromptsAndResources(t, c)
}

// flaky fails the first n tool calls (JSON-RPC method tools/call) it sees
// with HTTP 503, then passes them on; it counts the calls that reach the
// server.
type flaky struct {
	next    http.Handler
	mu      sync.Mutex
	failing int
	failed  int
	passed  map[string]int // method -> calls passed on
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		f.mu.Lock()
		if msg.Method == "tools/call" && f.failing > 0 {
			f.failing--
			f.failed++
			f.mu.Unlock()
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		if f.passed == nil {
			f.passed = map[string]int{}
		}
		f.passed[msg.Method]++
		f.mu.Unlock()
	}
	f.next.ServeHTTP(w, r)
}

func (f *flaky) set(n int) {
	f.mu.Lock()
	f.failing, f.failed, f.passed = n, 0, nil
	f.mu.Unlock()
}

func (f *flaky) counts() (failed, calls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed, f.passed["tools/call"]
}

// TestMCPRetries: tool calls failing with 503 are retried with backoff up
// to the bound and then succeed, reaching the server once; past the bound
// the call fails saying how many attempts it made; tool errors and
// protocol errors are not retried; an unreachable server is retried and
// then reported.
func TestMCPRetries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := testServer(nil)
	fl := &flaky{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
	url := serveMCP(t, fl)
	var waits []time.Duration
	var wmu sync.Mutex
	sleep := func(ctx context.Context, d time.Duration) error {
		wmu.Lock()
		waits = append(waits, d)
		wmu.Unlock()
		return ctx.Err()
	}
	c, err := MCPHTTPWith(ctx, url, MCPOptions{Retry: MCPRetry{Attempts: 4, Initial: 100 * time.Millisecond, Max: 150 * time.Millisecond, Sleep: sleep}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, _ := NewSet(c.Tools()...)

	fl.set(3)
	r, err := s.Call(ctx, "add", json.RawMessage(`{"a":1,"b":1}`))
	if err != nil || r.IsError || !strings.Contains(r.Content, "2") {
		t.Fatalf("a call failing 3 times of 4 allowed: %+v %v", r, err)
	}
	if failed, calls := fl.counts(); failed != 3 || calls != 1 {
		t.Fatalf("503s %d, calls reaching the server %d; want 3 and 1", failed, calls)
	}
	wmu.Lock()
	got := slices.Clone(waits)
	waits = nil
	wmu.Unlock()
	if len(got) != 3 || got[0] < 50*time.Millisecond || got[0] > 100*time.Millisecond || got[2] > 150*time.Millisecond {
		t.Fatalf("waits %v: want 3, from [50ms,100ms) doubling, capped at 150ms", got)
	}

	fl.set(4)
	if _, err := s.Call(ctx, "add", json.RawMessage(`{"a":1,"b":1}`)); err == nil || !strings.Contains(err.Error(), "giving up after 4 attempts") {
		t.Fatalf("a call failing 4 times of 4: err = %v", err)
	}
	if failed, calls := fl.counts(); failed != 4 || calls != 0 {
		t.Fatalf("503s %d, calls %d; want 4 and 0", failed, calls)
	}

	fl.set(0)
	if r, err := s.Call(ctx, "fail", nil); err != nil || !r.IsError {
		t.Fatalf("tool error: %+v %v", r, err)
	}
	if _, calls := fl.counts(); calls != 1 {
		t.Fatalf("a tool error was retried: %d calls", calls)
	}
	fl.set(0)
	unknown := &mcpTool{c: c, spec: model.ToolSpec{Name: "no-such-tool"}}
	if r, err := unknown.Call(ctx, nil); err == nil && !r.IsError {
		t.Fatalf("an unknown tool answered %+v", r)
	}
	if _, calls := fl.counts(); calls != 1 {
		t.Fatalf("a protocol error was retried: %d calls", calls)
	}

	// Nothing listens: the connection is retried, then reported.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, err = MCPHTTPWith(ctx, dead, MCPOptions{Retry: MCPRetry{Attempts: 3, Sleep: sleep}})
	if err == nil || !strings.Contains(err.Error(), "giving up after 3 attempts") {
		t.Fatalf("unreachable server: err = %v", err)
	}
}

// TestMCPRetryTimeout: an attempt cut short by Retry.Timeout is retried;
// the caller's own cancellation is not.
func TestMCPRetryTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "weir-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow-once", Description: "Hangs on its first call"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if calls.Add(1) == 1 {
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, nil, errors.New("hung")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	url := serveMCP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	noWait := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	c, err := MCPHTTPWith(ctx, url, MCPOptions{Retry: MCPRetry{Attempts: 2, Timeout: 300 * time.Millisecond, Sleep: noWait}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Tools()[0].Call(ctx, nil)
	if err != nil || r.Content != "done" || calls.Load() != 2 {
		t.Fatalf("after a timed-out attempt: %+v %v (%d calls)", r, err, calls.Load())
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	before := calls.Load()
	if _, err := c.Tools()[0].Call(cctx, nil); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if calls.Load() != before {
		t.Fatal("a cancelled call was retried")
	}
}

// TestMCPRetryOnTheContextsClock: the back-off between attempts and the
// per-attempt Timeout are measured on the clock the call's context
// carries (the agent operator's tool calls carry the job's): with a
// manual clock, a call failing with 503 is tried again once the clock has
// been advanced past the back-off, and a hung attempt is cut short once it
// has been advanced by Timeout, never in real time.
func TestMCPRetryOnTheContextsClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	hung := make(chan struct{})
	var slowCalls atomic.Int64
	server := testServer(nil)
	mcp.AddTool(server, &mcp.Tool{Name: "slow-once", Description: "Hangs on its first call"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if slowCalls.Add(1) == 1 {
			close(hung)
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, nil, errors.New("hung")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	fl := &flaky{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
	url := serveMCP(t, fl)
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	cctx := clock.NewContext(ctx, clk)
	call := func(r MCPRetry, name string, args json.RawMessage) chan error {
		c, err := MCPHTTPWith(ctx, url, MCPOptions{Retry: r})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, _ := NewSet(c.Tools()...)
		done := make(chan error, 1)
		go func() {
			r, err := s.Call(cctx, name, args)
			if err == nil && r.IsError {
				err = errors.New(r.Content)
			}
			done <- err
		}()
		return done
	}
	notYet := func(done chan error, what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s: the call returned (%v) before the clock was advanced", what, err)
		default:
		}
	}

	// A 503, then the back-off (drawn from [1h, 2h]) on the manual clock:
	// the only timer armed on it.
	fl.set(1)
	done := call(MCPRetry{Attempts: 2, Initial: 2 * time.Hour, Max: 2 * time.Hour}, "add", json.RawMessage(`{"a":1,"b":1}`))
	if err := clk.AwaitTimers(ctx, 1); err != nil {
		t.Fatalf("no back-off armed on the context's clock: %v", err)
	}
	clk.Advance(time.Hour - time.Nanosecond)
	notYet(done, "back-off")
	if failed, calls := fl.counts(); failed != 1 || calls != 0 {
		t.Fatalf("503s %d, calls reaching the server %d before the back-off passed; want 1 and 0", failed, calls)
	}
	clk.Advance(time.Hour + time.Nanosecond)
	if err := <-done; err != nil {
		t.Fatalf("the retried call: %v", err)
	}
	if _, calls := fl.counts(); calls != 1 {
		t.Fatalf("calls reaching the server %d, want 1", calls)
	}

	// A hung attempt, cut short by Timeout on the manual clock, then the
	// back-off on the same clock.
	fl.set(0)
	done = call(MCPRetry{Attempts: 2, Initial: time.Hour, Max: time.Hour, Timeout: 3 * time.Hour}, "slow-once", json.RawMessage(`{}`))
	select {
	case <-hung:
	case err := <-done:
		t.Fatalf("the slow tool's call returned before it hung: %v", err)
	}
	clk.Advance(3*time.Hour - time.Nanosecond)
	notYet(done, "timeout")
	clk.Advance(time.Nanosecond)
	if err := clk.AwaitTimers(ctx, 1); err != nil {
		t.Fatalf("no back-off after the timed-out attempt: %v", err)
	}
	notYet(done, "back-off after the timeout")
	clk.Advance(time.Hour)
	if err := <-done; err != nil {
		t.Fatalf("after a timed-out attempt: %v (%d calls)", err, slowCalls.Load())
	}
	if n := slowCalls.Load(); n != 2 {
		t.Fatalf("slow tool called %d times, want 2", n)
	}
}
