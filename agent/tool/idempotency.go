package tool

import "context"

// MCPIdempotencyMetaKey is the key under which an MCP tool call carries its
// idempotency key in the request's metadata (params._meta), as a string.
// A server handler reads it from CallToolRequest.Params.Meta.
const MCPIdempotencyMetaKey = "weir/idempotencyKey"

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns ctx carrying key, the idempotency key of the
// tool call made under it. The agent operator sets it on every tool call it
// records (RunnerContext.CallTool); Go tools read it with IdempotencyKey,
// MCP tools send it in the request's _meta (MCPIdempotencyMetaKey). An
// empty key removes it.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// IdempotencyKey returns the idempotency key of the tool call running
// under ctx, or ok false when there is none (the call is not recorded). A
// tool with side effects passes it to the service it calls, or keeps a
// record of the keys it has acted on, so that a call repeated after a crash
// (the window between the effect and its recording) takes effect once.
func IdempotencyKey(ctx context.Context) (key string, ok bool) {
	key, _ = ctx.Value(idempotencyKeyCtx{}).(string)
	return key, key != ""
}
