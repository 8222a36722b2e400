package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/weirproject/weir/internal/retry"
)

// DefaultAnthropicBaseURL is the base URL when neither the config nor
// ANTHROPIC_BASE_URL sets one.
const DefaultAnthropicBaseURL = "https://api.anthropic.com"

// DefaultAnthropicMaxTokens is the max_tokens of a request that sets none:
// the Messages API requires the field.
const DefaultAnthropicMaxTokens = 4096

// The ways AnthropicClient asks for structured output (AnthropicConfig.
// StructuredOutput).
const (
	// StructuredTool offers the schema as a tool whose input is the answer
	// (forced when the request has no other tools) and turns the model's
	// call of it into the reply's content. Every Claude model that calls
	// tools supports it.
	StructuredTool = "tool"
	// StructuredNative sends the schema as output_config.format
	// (type json_schema), the Messages API's own structured outputs, for
	// models that support them.
	StructuredNative = "native"
)

// AnthropicConfig configures a client of Anthropic's Messages API.
type AnthropicConfig struct {
	// BaseURL of the API, e.g. "https://api.anthropic.com" (the client
	// appends /v1/messages). "" means $ANTHROPIC_BASE_URL, else
	// DefaultAnthropicBaseURL.
	BaseURL string
	// APIKey is sent in the x-api-key header. "" means $ANTHROPIC_API_KEY.
	// It is never logged nor shown by String or errors.
	APIKey string
	// Model is the default model name (e.g. "claude-sonnet-4-5");
	// Request.Model overrides it.
	Model string
	// MaxTokens is max_tokens for requests that set no MaxTokens; 0 means
	// DefaultAnthropicMaxTokens.
	MaxTokens int
	// HTTPClient makes the requests; nil means the SDK's default.
	HTTPClient *http.Client
	// Timeout bounds each attempt; 0 means 10 minutes.
	Timeout time.Duration
	// Retry is how failed calls are retried (429, 408, 409, 5xx including
	// Anthropic's 529 "overloaded", and network errors); see RetryPolicy.
	Retry RetryPolicy
	// RateLimit, when set, lets every attempt through this limiter (see
	// Limiter): calls wait for the request rate, token budget and
	// concurrency it allows, and a 429 pauses it for the Retry-After the
	// server sent (retry-after-ms or Retry-After; every call sharing the
	// limiter waits) and is tried again without counting against
	// Retry.Attempts, up to RateLimit.MaxRateLimitedRetries times. nil
	// means no limiter: a 429 is retried as Retry says, honouring
	// Retry-After for that call only.
	RateLimit *Limiter
	// Headers are added to every request.
	Headers map[string]string
	// Stream makes every call a streaming one (server-sent events),
	// assembled into the same Response as a non-streaming call.
	Stream bool
	// StructuredOutput is how a Request.ResponseFormat is sent:
	// StructuredTool ("" means it) or StructuredNative.
	StructuredOutput string
}

// AnthropicClient is a ChatModel speaking Anthropic's Messages API through
// the official SDK (github.com/anthropics/anthropic-sdk-go/v2). It maps
// weir's messages onto the API's: system messages become the system
// prompt; an assistant message's tool calls become tool_use blocks; tool
// messages become tool_result blocks of the user turn that follows (one
// turn for consecutive results). Replies come back the other way, with the
// stop reason in OpenAI's words (end_turn and stop_sequence "stop",
// tool_use "tool_calls", max_tokens "length", refusal "content_filter")
// so agents read every model alike. Retries are the client's own (the
// SDK's are disabled).
type AnthropicClient struct {
	client     anthropic.Client
	model      string
	baseURL    string
	maxTokens  int
	retry      RetryPolicy
	stream     bool
	structured string
	limiter    *Limiter
}

// Anthropic returns a client for cfg (see AnthropicConfig for defaults).
// An unknown StructuredOutput is reported by every call.
func Anthropic(cfg AnthropicConfig) *AnthropicClient {
	base := cfg.BaseURL
	if base == "" {
		base = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("ANTHROPIC_API_KEY")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	opts := []option.RequestOption{
		// The client reads no environment beyond the two variables above
		// (the SDK would otherwise walk its credential chain: profiles,
		// federation) and sends the key as x-api-key, the header every
		// Anthropic endpoint and gateway accepts.
		option.WithoutEnvironmentDefaults(),
		option.WithHeader("x-api-key", key),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(timeout),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultAnthropicMaxTokens
	}
	return &AnthropicClient{client: anthropic.NewClient(opts...), model: cfg.Model, baseURL: strings.TrimRight(base, "/"),
		maxTokens: maxTokens, retry: cfg.Retry, stream: cfg.Stream, structured: cfg.StructuredOutput, limiter: cfg.RateLimit}
}

// String names the endpoint and model (never the key).
func (c *AnthropicClient) String() string {
	return fmt.Sprintf("anthropic model %q at %s", c.model, c.baseURL)
}

// Chat implements ChatModel. When ctx carries an idempotency key
// (WithIdempotencyKey), every attempt sends it as the Idempotency-Key
// header: Anthropic's API does not document deduplication on it (it
// ignores the header), but a gateway in front of it may.
func (c *AnthropicClient) Chat(ctx context.Context, req Request) (*Response, error) {
	params, outTool, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var opts []option.RequestOption
	if req.Temperature != nil {
		// The SDK's params have no temperature field; the API takes one.
		opts = append(opts, option.WithJSONSet("temperature", *req.Temperature))
	}
	if key, ok := IdempotencyKey(ctx); ok {
		opts = append(opts, option.WithHeader(IdempotencyHeader, key))
	}
	return c.retry.do(ctx, c.limiter, func(ctx context.Context) (*Response, error) {
		msg, err := c.call(ctx, params, opts)
		if err != nil {
			return nil, c.convertError(ctx, params.Model, err)
		}
		return c.response(msg, outTool), nil
	})
}

// call makes one attempt, streaming or not.
func (c *AnthropicClient) call(ctx context.Context, params anthropic.MessageNewParams, opts []option.RequestOption) (*anthropic.Message, error) {
	if !c.stream {
		return c.client.Messages.New(ctx, params, opts...)
	}
	stream := c.client.Messages.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return nil, &PermanentError{fmt.Errorf("model: %s: malformed stream: %w", c.baseURL, err)}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return &msg, nil
}

// params builds the API request; outTool is the name of the tool that
// carries structured output ("" when none).
func (c *AnthropicClient) params(req Request) (p anthropic.MessageNewParams, outTool string, err error) {
	name := req.Model
	if name == "" {
		name = c.model
	}
	if name == "" {
		return p, "", &PermanentError{fmt.Errorf("model: no model name for %s; set AnthropicConfig.Model or Request.Model", c.baseURL)}
	}
	p.Model = anthropic.Model(name)
	p.MaxTokens = int64(c.maxTokens)
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	// Consecutive messages of one API role share a turn: the API wants
	// user and assistant turns to alternate, and every tool result of an
	// assistant turn in the user turn right after it.
	appendBlock := func(role string, b anthropic.ContentBlockParamUnion) {
		if n := len(p.Messages); n > 0 {
			last := &p.Messages[n-1]
			if role == "user" && last.OfUser != nil {
				last.OfUser.Content = append(last.OfUser.Content, b)
				return
			}
			if role == "assistant" && last.OfAssistant != nil {
				last.OfAssistant.Content = append(last.OfAssistant.Content, b)
				return
			}
		}
		if role == "user" {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(b))
		} else {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(b))
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			p.System = append(p.System, anthropic.TextBlockParam{Text: m.Content})
		case RoleUser:
			appendBlock("user", anthropic.NewTextBlock(m.Content))
		case RoleTool:
			if m.ToolCallID == "" {
				return p, "", &PermanentError{fmt.Errorf("model: message %d is a tool result without ToolCallID (the id of the tool call it answers)", i)}
			}
			appendBlock("user", anthropic.NewToolResultBlock(m.ToolCallID, m.Content, false))
		case RoleAssistant:
			// The API refuses empty text blocks: an empty assistant
			// message (an empty answer, fed back as rejected) is left
			// out, and the user turns around it become one.
			if m.Content != "" {
				appendBlock("assistant", anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				appendBlock("assistant", anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
			}
		default:
			return p, "", &PermanentError{fmt.Errorf("model: message %d has unknown role %q (use system, user, assistant or tool)", i, m.Role)}
		}
	}
	for _, t := range req.Tools {
		tp, err := anthropicTool(t.Name, t.Description, t.Parameters)
		if err != nil {
			return p, "", err
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	switch req.ToolChoice {
	case "":
	case "auto":
		p.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{}
	case "required":
		p.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{}
	case "none":
		p.ToolChoice.OfNone = &anthropic.ToolChoiceNoneParam{}
	default:
		p.ToolChoice.OfTool = &anthropic.ToolChoiceToolParam{Name: req.ToolChoice}
	}
	if rf := req.ResponseFormat; rf != nil {
		var schema map[string]any
		if err := json.Unmarshal(rf.Schema, &schema); err != nil {
			return p, "", &PermanentError{fmt.Errorf("model: response format %q: schema is not a JSON object: %w", rf.Name, err)}
		}
		switch c.structured {
		case "", StructuredTool:
			outTool = rf.Name
			if outTool == "" {
				outTool = "answer"
			}
			for _, t := range req.Tools {
				if t.Name == outTool {
					return p, "", &PermanentError{fmt.Errorf("model: response format %q has the name of a tool; rename one of them", rf.Name)}
				}
			}
			tp, err := anthropicTool(outTool, "Give the final answer with this tool; its input is the answer.", rf.Schema)
			if err != nil {
				return p, "", err
			}
			p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
			// Forced when there is nothing else to call: no tools, or
			// tool choice "none" (the answer tool is not one of them).
			if (len(req.Tools) == 0 && req.ToolChoice == "") || req.ToolChoice == "none" {
				p.ToolChoice = anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: outTool}}
			}
		case StructuredNative:
			p.OutputConfig.Format = anthropic.JSONOutputFormatParam{Schema: schema}
		default:
			return p, "", &PermanentError{fmt.Errorf("model: AnthropicConfig.StructuredOutput %q is unknown; use %q or %q", c.structured, StructuredTool, StructuredNative)}
		}
	}
	return p, outTool, nil
}

// toolInput is a tool call's arguments as a tool_use block's input, which
// must be a JSON object: arguments that are not one (a model wrote broken
// JSON, kept as a string) are sent as an empty object.
func toolInput(args json.RawMessage) any {
	var obj map[string]json.RawMessage
	if len(args) == 0 || json.Unmarshal(args, &obj) != nil || obj == nil {
		return map[string]any{}
	}
	return args
}

// anthropicTool is a tool definition: the API takes the input schema's
// properties and required list as fields and every other keyword as is.
func anthropicTool(name, description string, schema json.RawMessage) (*anthropic.ToolParam, error) {
	tp := &anthropic.ToolParam{Name: name}
	if description != "" {
		tp.Description = param.NewOpt(description)
	}
	if len(schema) == 0 {
		return tp, nil
	}
	var s map[string]json.RawMessage
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, &PermanentError{fmt.Errorf("model: parameters of tool %q are not a JSON object: %w", name, err)}
	}
	if t, ok := s["type"]; ok && string(t) != `"object"` {
		return nil, &PermanentError{fmt.Errorf("model: parameters of tool %q have type %s; Anthropic takes object schemas only", name, t)}
	}
	for k, v := range s {
		switch k {
		case "type":
		case "properties":
			tp.InputSchema.Properties = v
		case "required":
			if err := json.Unmarshal(v, &tp.InputSchema.Required); err != nil {
				return nil, &PermanentError{fmt.Errorf("model: parameters of tool %q: required is not a list of names: %w", name, err)}
			}
		default:
			if tp.InputSchema.ExtraFields == nil {
				tp.InputSchema.ExtraFields = map[string]any{}
			}
			tp.InputSchema.ExtraFields[k] = v
		}
	}
	return tp, nil
}

func (c *AnthropicClient) response(m *anthropic.Message, outTool string) *Response {
	u := m.Usage
	r := &Response{Model: string(m.Model), FinishReason: anthropicStop(string(m.StopReason)),
		Usage:   Usage{PromptTokens: int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens), CompletionTokens: int(u.OutputTokens)},
		Message: Message{Role: RoleAssistant}}
	var text strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			} else if !json.Valid(args) {
				args, _ = json.Marshal(string(b.Input))
			}
			if outTool != "" && b.Name == outTool {
				// The structured answer: the content, not a call to run.
				r.Message.Content = string(args)
				continue
			}
			r.Message.ToolCalls = append(r.Message.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	if r.Message.Content == "" {
		r.Message.Content = text.String()
	}
	if outTool != "" && len(r.Message.ToolCalls) == 0 && r.FinishReason == "tool_calls" {
		r.FinishReason = "stop"
	}
	return r
}

// anthropicStop maps a stop reason to OpenAI's finish reasons (unknown
// ones are kept).
func anthropicStop(s string) string {
	switch s {
	case "end_turn", "stop_sequence", "pause_turn":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return s
}

func (c *AnthropicClient) convertError(ctx context.Context, modelName string, err error) error {
	var pe *PermanentError
	if errors.As(err, &pe) {
		return err
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		e := &APIError{StatusCode: ae.StatusCode, Type: string(ae.Type()), Message: ae.Message,
			Model: modelName, Endpoint: c.baseURL, KeyEnv: "ANTHROPIC_API_KEY"}
		if ae.Response != nil {
			e.RetryAfter = retry.RetryAfter(ae.Response.Header)
		}
		if e.StatusCode < 300 {
			// An error event inside a stream that had started well: the
			// status the API gives that error type when it can still say
			// so, so that overloads and rate limits are retried.
			e.Message = "error event in the stream: " + e.Message
			switch e.Type {
			case "overloaded_error":
				e.StatusCode = 529
			case "rate_limit_error":
				e.StatusCode = 429
			case "api_error":
				e.StatusCode = 500
			case "timeout_error":
				e.StatusCode = 504
			}
		}
		return e
	}
	if ctx.Err() != nil {
		return fmt.Errorf("model: call to %s: %w", c.baseURL, ctx.Err())
	}
	return fmt.Errorf("model: request to %s failed: %w", c.baseURL, err)
}
