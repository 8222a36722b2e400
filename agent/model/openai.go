package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultOpenAIBaseURL is the base URL when neither the config nor
// OPENAI_BASE_URL sets one.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

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
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Timeout bounds each attempt; 0 means 2 minutes.
	Timeout time.Duration
	// Retry is how failed calls are retried (429, 408, 409, 5xx and network
	// errors); see RetryPolicy for the defaults.
	Retry RetryPolicy
	// Headers are added to every request.
	Headers map[string]string
}

// OpenAIClient is a ChatModel speaking the chat-completions API
// (POST {BaseURL}/chat/completions), streaming or not, with tool calling
// and structured output. It writes and reads the JSON of the API itself with
// encoding/json rather than through the official SDK: the part of the API
// it uses is small and stable, and the SDK (generated code for the whole
// API) was a third of the source `go build ./cmd/weir` compiled and a
// tenth of the binary (see BENCHMARKS.md, "First build"). Retries are the
// client's own, so every model in weir retries the same way.
type OpenAIClient struct {
	http      *http.Client
	key       string
	keyHeader string // "" for Authorization: Bearer
	url       string // the endpoint with the query
	stream    bool
	headers   map[string]string
	timeout   time.Duration
	model     string
	baseURL   string
	retry     RetryPolicy
}

// OpenAI returns a client for cfg (see OpenAIConfig for defaults).
func OpenAI(cfg OpenAIConfig) *OpenAIClient {
	base := cfg.BaseURL
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	headers := make(map[string]string, len(cfg.Headers))
	for k, v := range cfg.Headers {
		headers[k] = v
	}
	base = strings.TrimRight(base, "/")
	endpoint := base + "/chat/completions"
	if len(cfg.Query) > 0 {
		q := url.Values{}
		for k, v := range cfg.Query {
			q.Set(k, v)
		}
		endpoint += "?" + q.Encode()
	}
	return &OpenAIClient{http: hc, key: key, keyHeader: cfg.APIKeyHeader, url: endpoint, stream: cfg.Stream, headers: headers,
		timeout: timeout, model: cfg.Model, baseURL: base, retry: cfg.Retry}
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
// api-version only when given. Keys only: Azure identity (Entra ID)
// tokens go in Headers as "Authorization: Bearer ...".
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
	body, err := c.params(req)
	if err != nil {
		return nil, err
	}
	if c.stream {
		body.Stream = true
		body.StreamOptions = &wireStreamOptions{IncludeUsage: true}
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, &PermanentError{fmt.Errorf("model: request for %s cannot be encoded: %w", c.baseURL, err)}
	}
	// The same key on every attempt: a server that honours it runs the call
	// once however often the request is retried or replayed.
	idem, _ := IdempotencyKey(ctx)
	return c.retry.Do(ctx, func(ctx context.Context) (*Response, error) {
		return c.attempt(ctx, body.Model, payload, idem)
	})
}

// attempt makes one request.
func (c *OpenAIClient) attempt(ctx context.Context, modelName string, payload []byte, idem string) (*Response, error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return nil, &PermanentError{fmt.Errorf("model: base URL %q: %w", c.baseURL, err)}
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if c.stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	switch {
	case c.key == "":
	case c.keyHeader != "":
		hr.Header.Set(c.keyHeader, c.key)
	default:
		hr.Header.Set("Authorization", "Bearer "+c.key)
	}
	for k, v := range c.headers {
		hr.Header.Set(k, v)
	}
	if idem != "" {
		hr.Header.Set(IdempotencyHeader, idem)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("model: call to %s: %w", c.baseURL, ctx.Err())
		}
		return nil, fmt.Errorf("model: request to %s failed: %w", c.baseURL, err)
	}
	defer resp.Body.Close()
	if c.stream && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return c.readStream(ctx, resp.Body)
	}
	// A chat completion is small; the bound keeps a broken server from
	// filling memory.
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("model: call to %s: %w", c.baseURL, ctx.Err())
		}
		return nil, fmt.Errorf("model: reading the answer of %s: %w", c.baseURL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.apiError(resp, b, modelName)
	}
	var cc chatResponse
	if err := json.Unmarshal(b, &cc); err != nil {
		return nil, &PermanentError{fmt.Errorf("model: %s answered with JSON that is not a chat completion: %w", c.baseURL, err)}
	}
	return c.response(&cc)
}

// apiError reads the error body ({"error": {"message", "type", "code"}});
// a body of another shape keeps its text as the message.
func (c *OpenAIClient) apiError(resp *http.Response, body []byte, modelName string) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, Model: modelName, Endpoint: c.baseURL,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var w struct {
		Error *struct {
			Message string          `json:"message"`
			Type    json.RawMessage `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &w) == nil && w.Error != nil {
		e.Message, e.Type, e.Code = w.Error.Message, scalar(w.Error.Type), scalar(w.Error.Code)
		return e
	}
	if s := strings.TrimSpace(string(body)); s != "" {
		e.Message = s[:min(len(s), 500)]
	}
	return e
}

// scalar returns a JSON string's text or a number's digits; "" for null,
// absent or anything else.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// The chat-completions request, as much of it as Request covers.
type chatRequest struct {
	Model          string              `json:"model"`
	Messages       []wireMessage       `json:"messages"`
	Tools          []wireTool          `json:"tools,omitempty"`
	ToolChoice     any                 `json:"tool_choice,omitempty"`
	ResponseFormat *wireResponseFormat `json:"response_format,omitempty"`
	Temperature    *float64            `json:"temperature,omitempty"`
	MaxTokens      int                 `json:"max_tokens,omitempty"`
	Seed           *int64              `json:"seed,omitempty"`
	Stream         bool                `json:"stream,omitempty"`
	StreamOptions  *wireStreamOptions  `json:"stream_options,omitempty"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role string `json:"role"`
	// Content is absent only on an assistant message without text.
	Content    *string        `json:"content,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string          `json:"type"`
	Function wireFunctionDef `json:"function"`
}

type wireFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type wireNamedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type wireResponseFormat struct {
	Type       string         `json:"type"`
	JSONSchema wireJSONSchema `json:"json_schema"`
}

type wireJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

// The chat-completions answer, as much of it as Response covers.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   string         `json:"content"`
			Refusal   string         `json:"refusal"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func (c *OpenAIClient) params(req Request) (*chatRequest, error) {
	p := &chatRequest{}
	name := req.Model
	if name == "" {
		name = c.model
	}
	if name == "" {
		return p, &PermanentError{fmt.Errorf("model: no model name for %s; set OpenAIConfig.Model or Request.Model", c.baseURL)}
	}
	p.Model = name
	for i, m := range req.Messages {
		content := m.Content
		switch m.Role {
		case RoleSystem, RoleUser:
			p.Messages = append(p.Messages, wireMessage{Role: string(m.Role), Content: &content})
		case RoleTool:
			p.Messages = append(p.Messages, wireMessage{Role: string(m.Role), Content: &content, ToolCallID: m.ToolCallID})
		case RoleAssistant:
			a := wireMessage{Role: string(m.Role)}
			if m.Content != "" {
				a.Content = &content
			}
			for _, tc := range m.ToolCalls {
				args := string(tc.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args}})
			}
			p.Messages = append(p.Messages, a)
		default:
			return p, &PermanentError{fmt.Errorf("model: message %d has unknown role %q (use system, user, assistant or tool)", i, m.Role)}
		}
	}
	for _, t := range req.Tools {
		fd := wireFunctionDef{Name: t.Name, Description: t.Description}
		if len(t.Parameters) > 0 {
			var ps map[string]any
			if err := json.Unmarshal(t.Parameters, &ps); err != nil {
				return p, &PermanentError{fmt.Errorf("model: parameters of tool %q are not a JSON object: %w", t.Name, err)}
			}
			fd.Parameters = t.Parameters
		}
		p.Tools = append(p.Tools, wireTool{Type: "function", Function: fd})
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		p.ToolChoice = req.ToolChoice
	default:
		nc := wireNamedToolChoice{Type: "function"}
		nc.Function.Name = req.ToolChoice
		p.ToolChoice = nc
	}
	if rf := req.ResponseFormat; rf != nil {
		if !json.Valid(rf.Schema) {
			return p, &PermanentError{fmt.Errorf("model: response format %q: schema is not JSON", rf.Name)}
		}
		p.ResponseFormat = &wireResponseFormat{Type: "json_schema", JSONSchema: wireJSONSchema{Name: rf.Name, Schema: rf.Schema, Strict: rf.Strict}}
	}
	p.Temperature = req.Temperature
	if req.MaxTokens > 0 {
		p.MaxTokens = req.MaxTokens
	}
	p.Seed = req.Seed
	return p, nil
}

func (c *OpenAIClient) response(cc *chatResponse) (*Response, error) {
	if len(cc.Choices) == 0 {
		return nil, &PermanentError{fmt.Errorf("model: %s answered without choices", c.baseURL)}
	}
	ch := cc.Choices[0]
	r := &Response{FinishReason: ch.FinishReason, Model: cc.Model,
		Usage:   Usage{PromptTokens: cc.Usage.PromptTokens, CompletionTokens: cc.Usage.CompletionTokens},
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

func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(0, time.Until(t))
	}
	return 0
}
