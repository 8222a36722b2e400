// Package model is the chat-model interface of weir's agents and its
// implementations: a client of OpenAI-compatible chat-completions
// endpoints on the official SDK (OpenAI), with presets for Ollama
// (Ollama) and Azure OpenAI (AzureOpenAI), a client of Anthropic's
// Messages API on its official SDK (Anthropic), and an
// offline model (Offline) that is deterministic per request, with a
// seeded latency distribution, for the embedded demo, tests and
// benchmarks.
//
// # Guarantees
//
//	I1. One interface. ChatModel.Chat takes messages, tools (name,
//	    description, JSON Schema of the arguments), a tool choice and an
//	    optional structured-output schema, and returns the reply: text, tool
//	    calls (id, name, JSON arguments) or both, the finish reason and token
//	    usage. Implementations are safe for concurrent use.
//	I2. Wire format. OpenAIClient sends chat-completions requests
//	    (POST {base}/chat/completions) as the OpenAI API defines them and
//	    reads tool calls from the reply; AnthropicClient sends Messages API
//	    requests (POST {base}/v1/messages) and maps tool calls to tool_use
//	    and tool_result blocks. Tool-call arguments that are not valid JSON
//	    are kept as a JSON string, so the reply stays serialisable. With
//	    Stream set, a client asks for server-sent events and assembles them
//	    into the same Response, usage included.
//	I3. Configuration. Base URL and key come from the config, else from
//	    OPENAI_BASE_URL and OPENAI_API_KEY (ANTHROPIC_BASE_URL and
//	    ANTHROPIC_API_KEY; AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY);
//	    Ollama defaults to OLLAMA_HOST or http://localhost:11434/v1. The key
//	    is sent as a bearer token (OpenAI), in the header
//	    OpenAIConfig.APIKeyHeader names (Azure: api-key), or as x-api-key
//	    (Anthropic), and appears in no log, String or error.
//	I4. Retries. Rate limits (429), 408, 409, server errors (5xx) and
//	    network errors are retried with exponential back-off and jitter
//	    (RetryPolicy, on package internal/retry), honouring the server's
//	    wait: retry-after-ms, else Retry-After in seconds or as an
//	    HTTP-date counted from the reply's Date (negative or unreadable
//	    values are ignored). The waits are measured on RetryPolicy.Clock,
//	    else on the clock the context carries (clock.NewContext: the agent
//	    operator's calls carry the job's), else on the system clock. Other
//	    errors (400, 401, 404, malformed replies) are not retried. Whatever
//	    still fails reaches the caller (the action) as an error: *APIError
//	    (status, type, code, message, and what to check) when the server
//	    answered. A RetryObserver on the context (WithRetryObserver) is
//	    told of every retry.
//	I5. Rate limits. A Limiter (RateLimit: requests per interval in a
//	    sliding window, a token budget charged with the usage replies
//	    report, a bound on calls in flight) makes calls wait instead of
//	    fail; reservations are first come, first served. A client with
//	    OpenAIConfig.RateLimit or AnthropicConfig.RateLimit lets every
//	    attempt through it, and a 429 pauses it for the server's
//	    retry-after-ms or Retry-After (every call sharing it waits) and is
//	    tried again without counting against RetryPolicy.Attempts, up to
//	    RateLimit.MaxRateLimitedRetries times; WithRateLimit does the same
//	    for any ChatModel.
//	I6. Cancellation. Calls and back-off waits end when the context is done.
//	I7. Determinism. Offline's reply and latency depend only on its Seed and
//	    the request (FNV-1a hash); Latency.Sample maps a quantile to a
//	    latency of the fixed, uniform, exponential or lognormal
//	    distribution with the configured mean.
//	I8. Idempotency. A call whose context carries an idempotency key
//	    (WithIdempotencyKey; the agent operator sets one on every model call
//	    it records) sends it as the Idempotency-Key header of every attempt
//	    (OpenAIClient, AnthropicClient), so a server or gateway that
//	    deduplicates on it runs the call once.
//	I9. Usage. Every Response carries the call's token usage as the server
//	    reported it (Anthropic: input tokens including cache reads and
//	    writes); Offline estimates it from the request's length.
package model
