package model

import "context"

// IdempotencyHeader is the HTTP header in which HTTP-based model clients
// (OpenAIClient) send the idempotency key of a call.
const IdempotencyHeader = "Idempotency-Key"

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns ctx carrying key, the idempotency key of the
// model call made under it. The agent operator sets it on every model call
// it records (RunnerContext.Chat); a client that talks to a service able to
// deduplicate requests passes it on (OpenAIClient sends it as the
// Idempotency-Key header of every attempt; I8). An empty key removes it.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// IdempotencyKey returns the idempotency key ctx carries (see
// WithIdempotencyKey), or ok false when it carries none: the call is then
// not a recorded one, and the client sends no key.
func IdempotencyKey(ctx context.Context) (key string, ok bool) {
	key, _ = ctx.Value(idempotencyKeyCtx{}).(string)
	return key, key != ""
}
