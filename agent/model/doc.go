// Package model is the chat-model interface of weir's agents and its
// implementations: a client of OpenAI-compatible chat-completions
// endpoints over net/http and encoding/json (OpenAI), an Ollama preset (Ollama), and an
// offline model (Offline) that is deterministic per request, with a
// seeded latency distribution, for the embedded demo, tests and
// benchmarks.
//
// # Guarantees
//
//  1. One interface. ChatModel.Chat takes messages, tools (name,
//     description, JSON Schema of the arguments), a tool choice and an
//     optional structured-output schema, and returns the reply: text, tool
//     calls (id, name, JSON arguments) or both, the finish reason and token
//     usage. Implementations are safe for concurrent use.
//  2. Wire format. OpenAIClient sends non-streaming chat-completions
//     requests (POST {base}/chat/completions) as the OpenAI API defines
//     them and reads tool calls from the reply; tool-call arguments that
//     are not valid JSON are kept as a JSON string, so the reply stays
//     serialisable.
//  3. Configuration. Base URL and key come from OpenAIConfig, else from
//     OPENAI_BASE_URL and OPENAI_API_KEY; Ollama defaults to
//     OLLAMA_HOST or http://localhost:11434/v1. The key is sent as a
//     bearer token and appears in no log, String or error.
//  4. Retries. Rate limits (429), 408, 409, server errors (5xx) and
//     network errors are retried with exponential back-off and jitter,
//     honouring Retry-After (RetryPolicy); other errors (400, 401, 404,
//     malformed replies) are not. Whatever still fails reaches the caller
//     (the action) as an error: *APIError (status, type, code, message,
//     and what to check) when the server answered.
//  5. Cancellation. Calls and back-off waits end when the context is done.
//  6. Determinism. Offline's reply and latency depend only on its Seed and
//     the request (FNV-1a hash); Latency.Sample maps a quantile to a
//     latency of the fixed, uniform, exponential or lognormal
//     distribution with the configured mean.
//  7. Idempotency. A call whose context carries an idempotency key
//     (WithIdempotencyKey; the agent operator sets one on every model call
//     it records) sends it as the Idempotency-Key header of every attempt
//     (OpenAIClient), so a server or gateway that deduplicates on it runs
//     the call once.
package model
