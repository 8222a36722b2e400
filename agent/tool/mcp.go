package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirproject/weir/agent/model"
)

// MCPClient is a connection to an MCP server and the tools it offers. Its
// tools may be called concurrently; they share the session.
type MCPClient struct {
	session *mcp.ClientSession
	server  string
	tools   []Tool
}

// MCPStdio starts cmd (which must not have been started) as an MCP server
// speaking over its stdin and stdout, connects, and lists its tools. Close
// ends the session and waits for the process to exit.
func MCPStdio(ctx context.Context, cmd *exec.Cmd) (*MCPClient, error) {
	return ConnectMCP(ctx, &mcp.CommandTransport{Command: cmd}, "stdio:"+cmd.Path)
}

// MCPHTTP connects to the MCP server at endpoint over the streamable HTTP
// transport (httpClient nil means http.DefaultClient) and lists its tools.
func MCPHTTP(ctx context.Context, endpoint string, httpClient *http.Client) (*MCPClient, error) {
	return ConnectMCP(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: httpClient}, endpoint)
}

// ConnectMCP connects over any MCP transport and lists the server's tools;
// name identifies the server in errors.
func ConnectMCP(ctx context.Context, t mcp.Transport, name string) (*MCPClient, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "weir-agent", Version: "1"}, nil)
	session, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("tool: connecting to MCP server %s: %w", name, err)
	}
	c := &MCPClient{session: session, server: name}
	for mt, err := range session.Tools(ctx, nil) {
		if err != nil {
			session.Close()
			return nil, fmt.Errorf("tool: listing the tools of MCP server %s: %w", name, err)
		}
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
	res, err := t.c.session.CallTool(ctx, params)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return Result{}, fmt.Errorf("tool %q (MCP server %s): %w", t.spec.Name, t.c.server, err)
		}
		return Result{}, fmt.Errorf("tool %q (MCP server %s): call failed: %w", t.spec.Name, t.c.server, err)
	}
	r := Result{IsError: res.IsError}
	var parts []string
	for _, ct := range res.Content {
		switch x := ct.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		default:
			if b, err := json.Marshal(ct); err == nil {
				parts = append(parts, string(b))
			}
		}
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
