package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Role is the author of a chat message.
type Role string

// The roles of chat messages.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message. Assistant messages may carry tool calls;
// tool messages answer one call, named by ToolCallID.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// System returns a system message.
func System(content string) Message { return Message{Role: RoleSystem, Content: content} }

// User returns a user message.
func User(content string) Message { return Message{Role: RoleUser, Content: content} }

// Assistant returns an assistant message.
func Assistant(content string) Message { return Message{Role: RoleAssistant, Content: content} }

// ToolResult returns the tool message answering call id.
func ToolResult(id, content string) Message {
	return Message{Role: RoleTool, Content: content, ToolCallID: id}
}

// ToolCall is a model's request to call a tool. Arguments is a JSON object
// as the model wrote it (it may be invalid JSON: validate before use).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolSpec describes a tool to a model: its name, what it does, and the
// JSON Schema (an object schema) of its arguments.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResponseFormat asks for structured output: the reply's content is a JSON
// value conforming to Schema.
type ResponseFormat struct {
	// Name names the schema (letters, digits, '_' and '-').
	Name string `json:"name"`
	// Schema is a JSON Schema.
	Schema json.RawMessage `json:"schema"`
	// Strict asks the server to enforce the schema exactly (OpenAI's
	// strict mode; every property required, no additional properties).
	Strict bool `json:"strict,omitempty"`
	// Attempts bounds the model calls ChatStructured (and so an agent's
	// RunnerContext.Chat) makes for a reply that conforms to Schema, each
	// failure fed back to the model; 0 means DefaultSchemaAttempts, 1 no
	// retry. Clients do not send it.
	Attempts int `json:"attempts,omitempty"`
}

// Request is one chat completion request.
type Request struct {
	// Model overrides the client's default model name.
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`
	// Tools the model may call.
	Tools []ToolSpec `json:"tools,omitempty"`
	// ToolChoice is "", "auto", "none", "required", or the name of one
	// tool that must be called.
	ToolChoice string `json:"tool_choice,omitempty"`
	// ResponseFormat, when set, asks for structured output.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	Seed           *int64          `json:"seed,omitempty"`
}

// Usage counts the tokens of one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Response is a model's reply.
type Response struct {
	Message Message `json:"message"`
	// FinishReason is "stop", "tool_calls", "length", ... as the server
	// reported it.
	FinishReason string `json:"finish_reason,omitempty"`
	Usage        Usage  `json:"usage"`
	// Model is the model that answered, as the server named it.
	Model string `json:"model,omitempty"`
}

// Decode unmarshals the reply's content, a JSON value when the request
// asked for structured output, into v. The error quotes the start of the
// content when it is not valid JSON for v.
func (r *Response) Decode(v any) error {
	if err := json.Unmarshal([]byte(r.Message.Content), v); err != nil {
		c := r.Message.Content
		if len(c) > 80 {
			c = c[:80] + "..."
		}
		return fmt.Errorf("model: reply is not the structured output asked for (%v); content %q", err, c)
	}
	return nil
}

// ChatModel is a chat model with tool calling. Chat must be safe for
// concurrent use: the agent operator calls it from many actions at once.
// It returns the reply, or an error; errors from servers are *APIError.
type ChatModel interface {
	Chat(ctx context.Context, req Request) (*Response, error)
}

// Func adapts a function to ChatModel.
type Func func(ctx context.Context, req Request) (*Response, error)

// Chat calls f.
func (f Func) Chat(ctx context.Context, req Request) (*Response, error) { return f(ctx, req) }

// APIError is an error response from a model server.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Type, Code and Message are from the error body when it had them.
	Type, Code, Message string
	// Model is the model asked for; Endpoint the server's base URL.
	Model, Endpoint string
	// RetryAfter is the wait the server asked for (Retry-After), if any.
	RetryAfter time.Duration
	// KeyEnv is the environment variable the client's API key defaults to
	// (named in the hint of a 401 or 403); "" means OPENAI_API_KEY.
	KeyEnv string
}

// Error describes the failure and what to check.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model: %s answered HTTP %d", e.Endpoint, e.StatusCode)
	if e.Model != "" {
		fmt.Fprintf(&b, " for model %q", e.Model)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (code %s)", e.Code)
	}
	switch {
	case e.StatusCode == 401 || e.StatusCode == 403:
		env := e.KeyEnv
		if env == "" {
			env = "OPENAI_API_KEY"
		}
		fmt.Fprintf(&b, "; check the API key (%s or the client's APIKey)", env)
	case e.StatusCode == 404:
		b.WriteString("; check the base URL and the model name")
	case e.StatusCode == 429:
		b.WriteString("; rate limited: lower the agent's concurrency or raise the quota")
	}
	return b.String()
}

// Temporary reports whether retrying may succeed: rate limits (429),
// timeouts (408), conflicts (409) and server errors (5xx).
func (e *APIError) Temporary() bool {
	return e.StatusCode == 408 || e.StatusCode == 409 || e.StatusCode == 429 || e.StatusCode >= 500
}

// Retryable reports whether err is worth retrying: a temporary APIError, or
// an error that is not an APIError and not a cancellation of ctx (network
// errors, connection resets).
func Retryable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var api *APIError
	if errors.As(err, &api) {
		return api.Temporary()
	}
	var perm *PermanentError
	return !errors.As(err, &perm)
}

// PermanentError wraps an error that retrying cannot fix (a malformed
// request, a reply that cannot be parsed).
type PermanentError struct{ Err error }

// Error returns the wrapped error's text.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }
