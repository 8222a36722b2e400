package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
)

// MCPClient is a connection to an MCP server: the tools it offers, and its
// prompts and resources. Its methods and tools may be used concurrently;
// they share the session. Every request to the server (the connection,
// listings, prompts, resources and tool calls) is retried on transient
// failures as MCPOptions.Retry says.
type MCPClient struct {
	session *mcp.ClientSession
	server  string
	tools   []Tool
	retry   MCPRetry
}

// MCPOptions configure a connection to an MCP server. The zero value is
// usable.
type MCPOptions struct {
	// Headers are set on every HTTP request of the streamable HTTP
	// transport, e.g. {"Authorization": "Bearer " + token}. Their values
	// appear in no error and no log. Ignored by other transports.
	Headers map[string]string
	// HTTPClient makes the HTTP requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Retry says how requests failing transiently are retried.
	Retry MCPRetry
}

// MCPRetry says how a request to an MCP server that fails transiently is
// retried: up to Attempts requests in all, waiting Initial before the
// second, twice as long before each further one (at most Max), with
// jitter (each wait drawn from [d/2, d)). Transient failures are those of
// the connection (the HTTP request did not reach the server), HTTP
// statuses 5xx and 429, and attempts that Timeout cut short. Errors the
// server returns (JSON-RPC errors, a tool's IsError result, 4xx such as a
// rejected Authorization header) are not retried, nor is anything once
// the caller's context is done.
//
// A retried tool call carries the same idempotency key (in _meta, see
// MCPIdempotencyMetaKey) as the attempt before it, so a server that honours
// it does not repeat the call's effect when the failed attempt did reach it
// (I6, I7).
type MCPRetry struct {
	// Attempts is the number of requests in all; 0 means 3, 1 means no
	// retry.
	Attempts int
	// Initial is the first wait; 0 means 200ms.
	Initial time.Duration
	// Max caps every wait; 0 means 5s.
	Max time.Duration
	// Timeout bounds each attempt; 0 means no bound of its own (the
	// caller's context still applies).
	Timeout time.Duration
	// Clock is the clock the waits and Timeout are measured on. nil means
	// the clock the request's context carries (clock.NewContext: the
	// agent operator's tool calls carry the job's weir.Config.Clock, so a
	// job on a manual clock retries when that clock is advanced), else the
	// system clock.
	Clock clock.Clock
	// Sleep, when set, waits for d or until ctx is done instead of a timer
	// on Clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Validate reports what is wrong with r (nil if nothing is).
func (r MCPRetry) Validate() error {
	var errs []error
	if r.Attempts < 0 {
		errs = append(errs, fmt.Errorf("tool: MCPRetry.Attempts %d: want 0 (meaning 3) or a positive number of attempts", r.Attempts))
	}
	if r.Initial < 0 || r.Max < 0 || r.Timeout < 0 {
		errs = append(errs, fmt.Errorf("tool: MCPRetry durations (initial %v, max %v, timeout %v): want 0 (the default) or positive", r.Initial, r.Max, r.Timeout))
	}
	return errors.Join(errs...)
}

func (r MCPRetry) withDefaults() MCPRetry {
	if r.Attempts <= 0 {
		r.Attempts = 3
	}
	if r.Initial <= 0 {
		r.Initial = 200 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 5 * time.Second
	}
	return r
}

// clockOf is the clock r's waits are measured on for a request under ctx.
func (r MCPRetry) clockOf(ctx context.Context) clock.Clock {
	if r.Clock != nil {
		return r.Clock
	}
	return clock.FromContext(ctx)
}

// attemptInfo is what the HTTP transport learns of one attempt: whether
// it failed transiently, and the last HTTP status it saw.
type attemptInfo struct {
	mu        sync.Mutex
	transient bool
	status    int
}

type attemptKey struct{}

func (a *attemptInfo) note(status int, connErr bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if status != 0 {
		a.status = status
	}
	if connErr || status >= 500 || status == http.StatusTooManyRequests {
		a.transient = true
	}
}

// do runs f until it succeeds, fails other than transiently, or the
// attempts are used up. what names the request in errors.
func do[T any](ctx context.Context, r MCPRetry, server, what string, f func(ctx context.Context) (T, error)) (T, error) {
	r = r.withDefaults()
	clk := r.clockOf(ctx)
	b := retry.Policy{Initial: r.Initial, Max: r.Max, Jitter: 0.5}.Start()
	for attempt := 1; ; attempt++ {
		info := &attemptInfo{}
		actx := context.WithValue(ctx, attemptKey{}, info)
		var cancel context.CancelFunc = func() {}
		if r.Timeout > 0 {
			actx, cancel = clock.WithTimeout(actx, clk, r.Timeout)
		}
		v, err := f(actx)
		timedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return v, nil
		}
		info.mu.Lock()
		transient, status := info.transient || timedOut, info.status
		info.mu.Unlock()
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			err = fmt.Errorf("%w (HTTP %d %s: check the Authorization or other headers of the MCP server's configuration)", err, status, http.StatusText(status))
		}
		if !transient || attempt >= r.Attempts || ctx.Err() != nil {
			var zero T
			if attempt > 1 {
				return zero, fmt.Errorf("tool: MCP server %s: %s: giving up after %d attempts: %w", server, what, attempt, err)
			}
			return zero, fmt.Errorf("tool: MCP server %s: %s: %w", server, what, err)
		}
		d := b.Next(0)
		sleep := r.Sleep
		if sleep == nil {
			sleep = func(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, clk, d) }
		}
		if serr := sleep(ctx, d); serr != nil {
			var zero T
			return zero, fmt.Errorf("tool: MCP server %s: %s: cancelled while waiting to retry (attempt %d failed: %w)", server, what, attempt, err)
		}
	}
}

// headerTransport sets the configured headers on every request and tells
// the attempt in the request's context how it went.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if info, ok := req.Context().Value(attemptKey{}).(*attemptInfo); ok {
		if err != nil {
			info.note(0, req.Context().Err() == nil)
		} else {
			info.note(resp.StatusCode, false)
		}
	}
	return resp, err
}

// MCPStdio starts cmd (which must not have been started) as an MCP server
// speaking over its stdin and stdout, connects, and lists its tools. Close
// ends the session and waits for the process to exit.
func MCPStdio(ctx context.Context, cmd *exec.Cmd) (*MCPClient, error) {
	return MCPStdioWith(ctx, cmd, MCPOptions{})
}

// MCPStdioWith is MCPStdio with opts (Retry applies; the connection itself
// is not retried: the process runs once).
func MCPStdioWith(ctx context.Context, cmd *exec.Cmd, opts MCPOptions) (*MCPClient, error) {
	return ConnectMCPWith(ctx, &mcp.CommandTransport{Command: cmd}, "stdio:"+cmd.Path, opts)
}

// MCPHTTP connects to the MCP server at endpoint over the streamable HTTP
// transport (httpClient nil means http.DefaultClient) and lists its tools.
func MCPHTTP(ctx context.Context, endpoint string, httpClient *http.Client) (*MCPClient, error) {
	return MCPHTTPWith(ctx, endpoint, MCPOptions{HTTPClient: httpClient})
}

// MCPHTTPWith connects to the MCP server at endpoint over the streamable
// HTTP transport with opts (headers, HTTP client, retries) and lists its
// tools.
func MCPHTTPWith(ctx context.Context, endpoint string, opts MCPOptions) (*MCPClient, error) {
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *hc
	c.Transport = &headerTransport{base: base, headers: opts.Headers}
	return ConnectMCPWith(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &c}, endpoint, opts)
}

// ConnectMCP connects over any MCP transport and lists the server's tools;
// name identifies the server in errors.
func ConnectMCP(ctx context.Context, t mcp.Transport, name string) (*MCPClient, error) {
	return ConnectMCPWith(ctx, t, name, MCPOptions{})
}

// ConnectMCPWith is ConnectMCP with opts: over a transport other than
// MCPHTTPWith's only Retry applies, and only attempts cut short by
// Retry.Timeout count as transient (the transport's errors are not
// classified), and the connection itself is made once.
func ConnectMCPWith(ctx context.Context, t mcp.Transport, name string, opts MCPOptions) (*MCPClient, error) {
	if err := opts.Retry.Validate(); err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "weir-agent", Version: "1"}, nil)
	connectRetry := opts.Retry
	if _, ok := t.(*mcp.StreamableClientTransport); !ok {
		// A transport may not connect twice (a command starts once).
		connectRetry.Attempts = 1
	}
	session, err := do(ctx, connectRetry, name, "connecting", func(ctx context.Context) (*mcp.ClientSession, error) {
		return client.Connect(ctx, t, nil)
	})
	if err != nil {
		return nil, err
	}
	c := &MCPClient{session: session, server: name, retry: opts.Retry}
	if session.InitializeResult() != nil && session.InitializeResult().Capabilities != nil && session.InitializeResult().Capabilities.Tools == nil {
		return c, nil
	}
	list, err := do(ctx, c.retry, name, "listing the tools", func(ctx context.Context) ([]*mcp.Tool, error) {
		var out []*mcp.Tool
		for mt, err := range session.Tools(ctx, nil) {
			if err != nil {
				return nil, err
			}
			out = append(out, mt)
		}
		return out, nil
	})
	if err != nil {
		session.Close()
		return nil, err
	}
	for _, mt := range list {
		schema, err := json.Marshal(mt.InputSchema)
		if err != nil {
			session.Close()
			return nil, fmt.Errorf("tool: MCP server %s: schema of tool %q: %w", name, mt.Name, err)
		}
		c.tools = append(c.tools, &mcpTool{c: c, spec: model.ToolSpec{Name: mt.Name, Description: mt.Description, Parameters: schema}})
	}
	return c, nil
}

// Tools returns the server's tools, in the order it listed them.
func (c *MCPClient) Tools() []Tool { return append([]Tool(nil), c.tools...) }

// Close ends the session (for stdio, closes the server's stdin and waits
// for it to exit).
func (c *MCPClient) Close() error { return c.session.Close() }

// MCPPrompt describes a prompt template of an MCP server.
type MCPPrompt struct {
	Name        string
	Description string
	Arguments   []MCPPromptArgument
}

// MCPPromptArgument is an argument of an MCPPrompt.
type MCPPromptArgument struct {
	Name        string
	Description string
	Required    bool
}

// Prompts lists the server's prompt templates.
func (c *MCPClient) Prompts(ctx context.Context) ([]MCPPrompt, error) {
	return do(ctx, c.retry, c.server, "listing the prompts", func(ctx context.Context) ([]MCPPrompt, error) {
		var out []MCPPrompt
		for p, err := range c.session.Prompts(ctx, nil) {
			if err != nil {
				return nil, err
			}
			mp := MCPPrompt{Name: p.Name, Description: p.Description}
			for _, a := range p.Arguments {
				mp.Arguments = append(mp.Arguments, MCPPromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
			}
			out = append(out, mp)
		}
		return out, nil
	})
}

// Prompt renders the server's prompt template name with args and returns
// its messages, ready for a model.Request: roles user and assistant, text
// content as it is, other content (images, embedded resources) as its
// JSON.
func (c *MCPClient) Prompt(ctx context.Context, name string, args map[string]string) ([]model.Message, error) {
	res, err := do(ctx, c.retry, c.server, fmt.Sprintf("getting prompt %q", name), func(ctx context.Context) (*mcp.GetPromptResult, error) {
		return c.session.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
	})
	if err != nil {
		return nil, err
	}
	msgs := make([]model.Message, 0, len(res.Messages))
	for _, pm := range res.Messages {
		text := contentText(pm.Content)
		switch pm.Role {
		case "assistant":
			msgs = append(msgs, model.Assistant(text))
		default:
			msgs = append(msgs, model.User(text))
		}
	}
	return msgs, nil
}

// MCPResource describes a resource of an MCP server.
type MCPResource struct {
	URI         string
	Name        string
	Description string
	MIMEType    string
}

// Resources lists the server's resources.
func (c *MCPClient) Resources(ctx context.Context) ([]MCPResource, error) {
	return do(ctx, c.retry, c.server, "listing the resources", func(ctx context.Context) ([]MCPResource, error) {
		var out []MCPResource
		for r, err := range c.session.Resources(ctx, nil) {
			if err != nil {
				return nil, err
			}
			out = append(out, MCPResource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
		}
		return out, nil
	})
}

// ReadResource reads the resource at uri and returns its text: the text of
// each of its contents, joined by newlines (binary contents are reported
// by size and MIME type, not inlined).
func (c *MCPClient) ReadResource(ctx context.Context, uri string) (string, error) {
	res, err := do(ctx, c.retry, c.server, fmt.Sprintf("reading resource %q", uri), func(ctx context.Context) (*mcp.ReadResourceResult, error) {
		return c.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	})
	if err != nil {
		return "", err
	}
	parts := make([]string, 0, len(res.Contents))
	for _, rc := range res.Contents {
		if rc.Blob != nil && rc.Text == "" {
			parts = append(parts, fmt.Sprintf("[%d bytes of %s at %s]", len(rc.Blob), rc.MIMEType, rc.URI))
			continue
		}
		parts = append(parts, rc.Text)
	}
	return strings.Join(parts, "\n"), nil
}

// ResourceTool returns a tool named name that reads a resource of the
// server by URI ({"uri": "..."}), for a model to fetch context; its
// description lists the resources the server has now. name "" means
// "read_resource".
func (c *MCPClient) ResourceTool(ctx context.Context, name string) (Tool, error) {
	if name == "" {
		name = "read_resource"
	}
	list, err := c.Resources(ctx)
	if err != nil {
		return nil, err
	}
	var desc strings.Builder
	fmt.Fprintf(&desc, "Reads a resource of MCP server %s by URI and returns its text.", c.server)
	if len(list) > 0 {
		desc.WriteString(" Resources:")
		slices.SortFunc(list, func(a, b MCPResource) int { return strings.Compare(a.URI, b.URI) })
		for _, r := range list {
			fmt.Fprintf(&desc, "\n- %s", r.URI)
			if r.Description != "" {
				fmt.Fprintf(&desc, ": %s", r.Description)
			} else if r.Name != "" {
				fmt.Fprintf(&desc, ": %s", r.Name)
			}
		}
	}
	schema := json.RawMessage(`{"type":"object","properties":{"uri":{"type":"string","description":"the resource's URI"}},"required":["uri"]}`)
	return Raw{
		ToolSpec: model.ToolSpec{Name: name, Description: desc.String(), Parameters: schema},
		Fn: func(ctx context.Context, args json.RawMessage) (Result, error) {
			var a struct {
				URI string `json:"uri"`
			}
			if err := json.Unmarshal(args, &a); err != nil || a.URI == "" {
				return Errorf(`want arguments {"uri": "<resource URI>"}`), nil
			}
			text, err := c.ReadResource(ctx, a.URI)
			if err != nil {
				if ctx.Err() != nil {
					return Result{}, err
				}
				// The model sees why (an unknown URI, a server down).
				return Errorf("%v", err), nil
			}
			return Result{Content: text}, nil
		},
	}, nil
}

func contentText(ct mcp.Content) string {
	switch x := ct.(type) {
	case *mcp.TextContent:
		return x.Text
	case nil:
		return ""
	}
	b, err := json.Marshal(ct)
	if err != nil {
		return fmt.Sprintf("[%T]", ct)
	}
	return string(b)
}

// mcpTool is one tool of an MCP server. A call under a context carrying an
// idempotency key (WithIdempotencyKey) sends it in the request's _meta
// under MCPIdempotencyMetaKey.
type mcpTool struct {
	c    *MCPClient
	spec model.ToolSpec
}

func (t *mcpTool) Spec() model.ToolSpec { return t.spec }

func (t *mcpTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return Errorf("invalid arguments for %s: not JSON", t.spec.Name), nil
	}
	params := &mcp.CallToolParams{Name: t.spec.Name, Arguments: args}
	if key, ok := IdempotencyKey(ctx); ok {
		params.Meta = mcp.Meta{MCPIdempotencyMetaKey: key}
	}
	res, err := do(ctx, t.c.retry, t.c.server, fmt.Sprintf("tool %q", t.spec.Name), func(ctx context.Context) (*mcp.CallToolResult, error) {
		return t.c.session.CallTool(ctx, params)
	})
	if err != nil {
		return Result{}, err
	}
	r := Result{IsError: res.IsError}
	var parts []string
	for _, ct := range res.Content {
		parts = append(parts, contentText(ct))
	}
	r.Content = strings.Join(parts, "\n")
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return Result{}, fmt.Errorf("tool %q (MCP server %s): structured result: %w", t.spec.Name, t.c.server, err)
		}
		r.Structured = b
	}
	return r, nil
}
