package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/weirproject/weir/agent/internal/openaiopts"
	"github.com/weirproject/weir/internal/retry"
)

// DefaultOpenAIBaseURL is the base URL when neither the config nor
// OPENAI_BASE_URL sets one.
const DefaultOpenAIBaseURL = openaiopts.DefaultBaseURL

// OpenAIConfig configures a client of an OpenAI-compatible chat-completions
// endpoint (OpenAI, Azure-style gateways, vLLM, LM Studio, Ollama, ...).
type OpenAIConfig struct {
	// BaseURL of the API, e.g. "https://api.openai.com/v1". "" means
	// $OPENAI_BASE_URL, else DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token (Authorization: Bearer), or in the
	// header APIKeyHeader names. "" means $OPENAI_API_KEY (none if unset).
	// It is never logged nor shown by String or errors.
	APIKey string
	// APIKeyHeader, when set, is the header the key is sent in instead of
	// Authorization (Azure OpenAI: "api-key"); no Authorization header is
	// sent then.
	APIKeyHeader string
	// Query parameters added to every request (Azure OpenAI:
	// "api-version").
	Query map[string]string
	// Stream makes every call a streaming one (server-sent events, with
	// stream_options.include_usage so token usage is reported), assembled
	// into the same Response as a non-streaming call.
	Stream bool
	// Model is the default model name; Request.Model overrides it.
	Model string
	// HTTPClient makes the requests; nil means the SDK's default.
	HTTPClient *http.Client
	// Timeout bounds each attempt; 0 means 2 minutes.
	Timeout time.Duration
	// Retry is how failed calls are retried (429, 408, 409, 5xx and network
	// errors); see RetryPolicy for the defaults.
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
}

// OpenAIClient is a ChatModel speaking the chat-completions API through the
// official SDK (github.com/openai/openai-go/v3), non-streaming, with tool
// calling and structured output. Retries are the client's own (the SDK's
// are disabled), so every model in weir retries the same way.
type OpenAIClient struct {
	client  openai.Client
	model   string
	baseURL string
	retry   RetryPolicy
	stream  bool
	limiter *Limiter
}

// OpenAI returns a client for cfg (see OpenAIConfig for defaults).
func OpenAI(cfg OpenAIConfig) *OpenAIClient {
	opts, base := openaiopts.Options(openaiopts.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, APIKeyHeader: cfg.APIKeyHeader,
		Timeout: cfg.Timeout, DefaultTimeout: 2 * time.Minute, HTTPClient: cfg.HTTPClient, Headers: cfg.Headers, Query: cfg.Query})
	return &OpenAIClient{client: openai.NewClient(opts...), model: cfg.Model, baseURL: base, retry: cfg.Retry, stream: cfg.Stream, limiter: cfg.RateLimit}
}

// DefaultOllamaBaseURL is Ollama's OpenAI-compatible endpoint on this
// machine.
const DefaultOllamaBaseURL = "http://localhost:11434/v1"

// Ollama returns a client of Ollama's OpenAI-compatible endpoint: cfg with
// BaseURL defaulting to $OLLAMA_HOST (host:port or URL) + "/v1", else
// DefaultOllamaBaseURL, and APIKey to "ollama" (Ollama ignores it).
func Ollama(cfg OpenAIConfig) *OpenAIClient {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultOllamaBaseURL
		if h := os.Getenv("OLLAMA_HOST"); h != "" {
			if !strings.Contains(h, "://") {
				h = "http://" + h
			}
			cfg.BaseURL = strings.TrimRight(h, "/") + "/v1"
		}
	}
	if cfg.APIKey == "" {
		cfg.APIKey = "ollama"
	}
	return OpenAI(cfg)
}

// DefaultAzureAPIVersion is the api-version AzureOpenAI sends to a
// deployment URL when none is given.
const DefaultAzureAPIVersion = "2024-10-21"

// AzureOpenAI returns a client of Azure OpenAI: cfg with BaseURL the
// resource's endpoint (https://<resource>.openai.azure.com; "" means
// $AZURE_OPENAI_ENDPOINT) and APIKey its key ("" means
// $AZURE_OPENAI_API_KEY), sent in the api-key header. With a deployment,
// requests go to {endpoint}/openai/deployments/{deployment}/chat/completions
// with ?api-version= apiVersion ("" means DefaultAzureAPIVersion) and the
// model name defaults to the deployment; without one, to Azure's v1 API,
// {endpoint}/openai/v1/chat/completions, with the model in cfg.Model and
// api-version only when given. (The SDK's own azure package does the same
// with Azure identity credentials, at the cost of the Azure SDK as a
// dependency; a key is all this needs.)
func AzureOpenAI(cfg OpenAIConfig, deployment, apiVersion string) *OpenAIClient {
	endpoint := cfg.BaseURL
	if endpoint == "" {
		endpoint = os.Getenv("AZURE_OPENAI_ENDPOINT")
	}
	endpoint = strings.TrimRight(endpoint, "/")
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("AZURE_OPENAI_API_KEY")
	}
	if cfg.APIKeyHeader == "" {
		cfg.APIKeyHeader = "api-key"
	}
	q := map[string]string{}
	for k, v := range cfg.Query {
		q[k] = v
	}
	if deployment != "" {
		cfg.BaseURL = endpoint + "/openai/deployments/" + url.PathEscape(deployment)
		if apiVersion == "" {
			apiVersion = DefaultAzureAPIVersion
		}
		if cfg.Model == "" {
			cfg.Model = deployment
		}
	} else {
		cfg.BaseURL = endpoint + "/openai/v1"
	}
	if apiVersion != "" {
		q["api-version"] = apiVersion
	}
	cfg.Query = q
	return OpenAI(cfg)
}

// String names the endpoint and model (never the key).
func (c *OpenAIClient) String() string {
	return fmt.Sprintf("openai-compatible model %q at %s", c.model, c.baseURL)
}

// Chat implements ChatModel. When ctx carries an idempotency key
// (WithIdempotencyKey: the agent operator sets one on every recorded call),
// every attempt of the call sends it as the Idempotency-Key header; servers
// that do not know the header ignore it.
func (c *OpenAIClient) Chat(ctx context.Context, req Request) (*Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, err
	}
	var opts []option.RequestOption
	if key, ok := IdempotencyKey(ctx); ok {
		// The same key on every attempt: a server that honours it runs the
		// call once however often the request is retried or replayed.
		opts = append(opts, option.WithHeader(IdempotencyHeader, key))
	}
	if c.stream {
		params.StreamOptions.IncludeUsage = param.NewOpt(true)
	}
	return c.retry.do(ctx, c.limiter, func(ctx context.Context) (*Response, error) {
		cc, err := c.call(ctx, params, opts)
		if err != nil {
			return nil, c.convertError(ctx, params.Model, err)
		}
		return c.response(cc)
	})
}

// call makes one attempt, streaming or not.
func (c *OpenAIClient) call(ctx context.Context, params openai.ChatCompletionNewParams, opts []option.RequestOption) (*openai.ChatCompletion, error) {
	if !c.stream {
		return c.client.Chat.Completions.New(ctx, params, opts...)
	}
	stream := c.client.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			return nil, &PermanentError{fmt.Errorf("model: %s: malformed stream (a chunk does not continue the ones before it)", c.baseURL)}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return &acc.ChatCompletion, nil
}

func (c *OpenAIClient) params(req Request) (openai.ChatCompletionNewParams, error) {
	var p openai.ChatCompletionNewParams
	name := req.Model
	if name == "" {
		name = c.model
	}
	if name == "" {
		return p, &PermanentError{fmt.Errorf("model: no model name for %s; set OpenAIConfig.Model or Request.Model", c.baseURL)}
	}
	p.Model = shared.ChatModel(name)
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			p.Messages = append(p.Messages, openai.SystemMessage(m.Content))
		case RoleUser:
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case RoleTool:
			p.Messages = append(p.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = param.NewOpt(m.Content)
			}
			for _, tc := range m.ToolCalls {
				args := string(tc.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args}}})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return p, &PermanentError{fmt.Errorf("model: message %d has unknown role %q (use system, user, assistant or tool)", i, m.Role)}
		}
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		if len(t.Parameters) > 0 {
			var ps map[string]any
			if err := json.Unmarshal(t.Parameters, &ps); err != nil {
				return p, &PermanentError{fmt.Errorf("model: parameters of tool %q are not a JSON object: %w", t.Name, err)}
			}
			fd.Parameters = ps
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		p.ToolChoice.OfAuto = param.NewOpt(req.ToolChoice)
	default:
		p.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice}}
	}
	if rf := req.ResponseFormat; rf != nil {
		var schema any
		if err := json.Unmarshal(rf.Schema, &schema); err != nil {
			return p, &PermanentError{fmt.Errorf("model: response format %q: schema is not JSON: %w", rf.Name, err)}
		}
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: rf.Name, Schema: schema}
		if rf.Strict {
			js.Strict = param.NewOpt(true)
		}
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.Seed != nil {
		p.Seed = param.NewOpt(*req.Seed)
	}
	return p, nil
}

func (c *OpenAIClient) response(cc *openai.ChatCompletion) (*Response, error) {
	if len(cc.Choices) == 0 {
		return nil, &PermanentError{fmt.Errorf("model: %s answered without choices", c.baseURL)}
	}
	ch := cc.Choices[0]
	r := &Response{FinishReason: ch.FinishReason, Model: cc.Model,
		Usage:   Usage{PromptTokens: int(cc.Usage.PromptTokens), CompletionTokens: int(cc.Usage.CompletionTokens)},
		Message: Message{Role: RoleAssistant, Content: ch.Message.Content}}
	if r.Message.Content == "" && ch.Message.Refusal != "" {
		r.Message.Content = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			// Keep the event serialisable: a model that wrote broken JSON
			// gets its text back as a string, which tool validation rejects
			// with a message the model can act on.
			args, _ = json.Marshal(tc.Function.Arguments)
		}
		r.Message.ToolCalls = append(r.Message.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return r, nil
}

func (c *OpenAIClient) convertError(ctx context.Context, modelName shared.ChatModel, err error) error {
	var pe *PermanentError
	if errors.As(err, &pe) {
		return err
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		e := &APIError{StatusCode: oe.StatusCode, Type: oe.Type, Code: oe.Code, Message: oe.Message,
			Model: string(modelName), Endpoint: c.baseURL}
		if oe.Response != nil {
			e.RetryAfter = retry.RetryAfter(oe.Response.Header)
		}
		return e
	}
	if ctx.Err() != nil {
		return fmt.Errorf("model: call to %s: %w", c.baseURL, ctx.Err())
	}
	return fmt.Errorf("model: request to %s failed: %w", c.baseURL, err)
}
