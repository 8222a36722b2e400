package model

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The replies of a fake Anthropic Messages API (POST /v1/messages), in
// its wire format.
const anthropicToolReply = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test-1",
"content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_01","name":"weather","input":{"city":"Paris","unit":"c"}}],
"stop_reason":"tool_use","stop_sequence":null,
"usage":{"input_tokens":30,"output_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":5}}`

const anthropicTextReply = `{"id":"msg_02","type":"message","role":"assistant","model":"claude-test-1",
"content":[{"type":"text","text":"Paris is sunny."}],
"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":60,"output_tokens":7}}`

const anthropicRateLimited = `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`

const anthropicOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

const anthropicUnauthorized = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`

// anthropicStream is a streamed reply: text, then a tool_use block whose
// input arrives in two pieces, then the stop reason and usage.
const anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-test-1","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

event: ping
data: {"type":"ping"}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_02","name":"weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}

event: message_stop
data: {"type":"message_stop"}

`

func newAnthropic(f *fakeServer, cfg AnthropicConfig) *AnthropicClient {
	cfg.BaseURL = f.srv.URL
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-ant-test-secret"
	}
	if cfg.Model == "" {
		cfg.Model = "claude-test"
	}
	return Anthropic(cfg)
}

// TestAnthropicToolRoundTrip: the Messages wire format both ways, over a
// tool-use round trip: system prompt, tools with their input schemas, the
// assistant's tool_use blocks and the tool_result blocks answering them in
// one user turn (an empty assistant message between them left out, as the
// API refuses empty text); the reply's text, tool calls, stop reason and
// usage.
func TestAnthropicToolRoundTrip(t *testing.T) {
	f := newFakeServerAt(t, "/v1/messages", ok(anthropicToolReply), ok(anthropicTextReply))
	c := newAnthropic(f, AnthropicConfig{MaxTokens: 300, Headers: map[string]string{"X-Team": "weir"}})
	temp := 0.3
	weather := ToolSpec{Name: "weather", Description: "Current weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}
	req := Request{
		Messages:    []Message{System("be brief"), User("Weather in Paris?")},
		Tools:       []ToolSpec{weather},
		ToolChoice:  "auto",
		Temperature: &temp,
	}
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{Model: "claude-test-1", FinishReason: "tool_calls", Usage: Usage{PromptTokens: 35, CompletionTokens: 12},
		Message: Message{Role: RoleAssistant, Content: "Let me look.",
			ToolCalls: []ToolCall{{ID: "toolu_01", Name: "weather", Arguments: json.RawMessage(`{"city":"Paris","unit":"c"}`)}}}}
	if !reflect.DeepEqual(resp, want) {
		t.Fatalf("response\n%+v, want\n%+v", resp, want)
	}

	req.Messages = append(req.Messages, resp.Message, ToolResult("toolu_01", "sunny, 21C"), Assistant(""), User("and tomorrow?"))
	req.ToolChoice = "weather"
	req.MaxTokens = 50
	resp, err = c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Paris is sunny." || resp.FinishReason != "stop" || resp.Usage != (Usage{PromptTokens: 60, CompletionTokens: 7}) {
		t.Fatalf("response %+v", resp)
	}

	first, second := f.bodies[0], f.bodies[1]
	if first["model"] != "claude-test" || first["max_tokens"] != 300.0 || first["temperature"] != 0.3 {
		t.Fatalf("first request %v", first)
	}
	if sys := first["system"].([]any); len(sys) != 1 || sys[0].(map[string]any)["text"] != "be brief" || sys[0].(map[string]any)["type"] != "text" {
		t.Fatalf("system %v", first["system"])
	}
	msgs := first["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("messages %v", msgs)
	}
	if m := msgs[0].(map[string]any); m["role"] != "user" || m["content"].([]any)[0].(map[string]any)["text"] != "Weather in Paris?" {
		t.Fatalf("user message %v", m)
	}
	tool := first["tools"].([]any)[0].(map[string]any)
	schema := tool["input_schema"].(map[string]any)
	if tool["name"] != "weather" || tool["description"] != "Current weather" || schema["type"] != "object" ||
		schema["required"].([]any)[0] != "city" || schema["additionalProperties"] != false ||
		schema["properties"].(map[string]any)["city"].(map[string]any)["type"] != "string" {
		t.Fatalf("tool %v", tool)
	}
	if tc := first["tool_choice"].(map[string]any); tc["type"] != "auto" {
		t.Fatalf("tool choice %v", tc)
	}

	// The second request: user, assistant (text + tool_use), user
	// (tool_result + text): roles alternate.
	msgs = second["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3: %v", len(msgs), msgs)
	}
	asst := msgs[1].(map[string]any)
	blocks := asst["content"].([]any)
	use := blocks[1].(map[string]any)
	if asst["role"] != "assistant" || blocks[0].(map[string]any)["text"] != "Let me look." || use["type"] != "tool_use" ||
		use["id"] != "toolu_01" || use["name"] != "weather" || use["input"].(map[string]any)["city"] != "Paris" {
		t.Fatalf("assistant turn %v", asst)
	}
	user := msgs[2].(map[string]any)
	blocks = user["content"].([]any)
	res := blocks[0].(map[string]any)
	if user["role"] != "user" || res["type"] != "tool_result" || res["tool_use_id"] != "toolu_01" ||
		res["content"].([]any)[0].(map[string]any)["text"] != "sunny, 21C" || blocks[1].(map[string]any)["text"] != "and tomorrow?" {
		t.Fatalf("user turn %v", user)
	}
	if tc := second["tool_choice"].(map[string]any); tc["type"] != "tool" || tc["name"] != "weather" || second["max_tokens"] != 50.0 {
		t.Fatalf("tool choice %v, max_tokens %v", tc, second["max_tokens"])
	}
	h := f.headers[0]
	if h.Get("X-Api-Key") != "sk-ant-test-secret" || h.Get("Anthropic-Version") == "" || h.Get("X-Team") != "weir" || h.Get("Authorization") != "" {
		t.Fatalf("headers %v", h)
	}
	if strings.Contains(c.String(), "sk-ant") {
		t.Fatalf("String() shows the key: %s", c)
	}
}

// TestAnthropicErrorsAndRetries: 429 with retry-after and 529 are retried
// (the wait honours retry-after), 401 is not and names the key's variable;
// the idempotency key goes out on every attempt.
func TestAnthropicErrorsAndRetries(t *testing.T) {
	f := newFakeServerAt(t, "/v1/messages",
		reply{status: 429, body: anthropicRateLimited, header: map[string]string{"Retry-After": "3"}},
		reply{status: 529, body: anthropicOverloaded},
		ok(anthropicTextReply))
	var delays []time.Duration
	c := newAnthropic(f, AnthropicConfig{Retry: RetryPolicy{Attempts: 4, Initial: 10 * time.Millisecond, Sleep: noSleep(&delays)}})
	const key = "00112233445566778899aabbccddeeff"
	resp, err := c.Chat(WithIdempotencyKey(context.Background(), key), Request{Messages: []Message{User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Paris is sunny." || f.requests() != 3 || len(delays) != 2 {
		t.Fatalf("resp %+v after %d requests and %d waits", resp, f.requests(), len(delays))
	}
	if delays[0] < 3*time.Second {
		t.Fatalf("retry-after 3 ignored: waited %v", delays[0])
	}
	for i, h := range f.headers {
		if h.Get(IdempotencyHeader) != key {
			t.Fatalf("attempt %d: %s = %q", i+1, IdempotencyHeader, h.Get(IdempotencyHeader))
		}
	}

	g := newFakeServerAt(t, "/v1/messages", reply{status: 401, body: anthropicUnauthorized})
	_, err = newAnthropic(g, AnthropicConfig{Retry: RetryPolicy{Sleep: noSleep(&delays)}}).Chat(context.Background(), Request{Messages: []Message{User("hi")}})
	var api *APIError
	if !errors.As(err, &api) || api.StatusCode != 401 || api.Type != "authentication_error" || g.requests() != 1 ||
		!strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || strings.Contains(err.Error(), "sk-ant") {
		t.Fatalf("401: %v after %d requests", err, g.requests())
	}
	if _, err := Anthropic(AnthropicConfig{BaseURL: g.srv.URL}).Chat(context.Background(), Request{}); err == nil || !strings.Contains(err.Error(), "no model name") {
		t.Fatalf("no model: %v", err)
	}
}

// TestAnthropicStreaming: a streamed reply (text and tool-input deltas)
// is assembled into the Response a non-streaming call gives.
func TestAnthropicStreaming(t *testing.T) {
	f := newFakeServerAt(t, "/v1/messages", reply{status: 200, body: anthropicStream, sse: true})
	c := newAnthropic(f, AnthropicConfig{Stream: true})
	resp, err := c.Chat(context.Background(), Request{Messages: []Message{User("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{Model: "claude-test-1", FinishReason: "tool_calls", Usage: Usage{PromptTokens: 25, CompletionTokens: 15},
		Message: Message{Role: RoleAssistant, Content: "Checking the weather.",
			ToolCalls: []ToolCall{{ID: "toolu_02", Name: "weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}}}}
	if !reflect.DeepEqual(resp, want) {
		t.Fatalf("streamed response\n%+v, want\n%+v", resp, want)
	}
	if f.bodies[0]["stream"] != true {
		t.Fatalf("request did not ask for a stream: %v", f.bodies[0])
	}
}

// TestAnthropicStructuredOutput: a response format goes out as a forced
// tool (the default) whose call comes back as the content, or as
// output_config.format (StructuredNative).
func TestAnthropicStructuredOutput(t *testing.T) {
	const structuredReply = `{"id":"msg_03","type":"message","role":"assistant","model":"claude-test-1",
"content":[{"type":"tool_use","id":"toolu_09","name":"verdict","input":{"label":"spam","score":0.9}}],
"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":9}}`
	const nativeReply = `{"id":"msg_04","type":"message","role":"assistant","model":"claude-test-1",
"content":[{"type":"text","text":"{\"label\":\"ham\",\"score\":0.1}"}],
"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":9}}`
	schema := json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","enum":["spam","ham"]},"score":{"type":"number"}},"required":["label","score"]}`)
	rf := &ResponseFormat{Name: "verdict", Schema: schema}

	f := newFakeServerAt(t, "/v1/messages", ok(structuredReply))
	resp, err := newAnthropic(f, AnthropicConfig{}).Chat(context.Background(), Request{Messages: []Message{User("classify: win money")}, ResponseFormat: rf})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Label string  `json:"label"`
		Score float64 `json:"score"`
	}
	if err := resp.Decode(&v); err != nil || v.Label != "spam" || len(resp.Message.ToolCalls) != 0 || resp.FinishReason != "stop" {
		t.Fatalf("structured reply %+v (%v)", resp, err)
	}
	body := f.bodies[0]
	tool := body["tools"].([]any)[0].(map[string]any)
	if tool["name"] != "verdict" || tool["input_schema"].(map[string]any)["required"].([]any)[1] != "score" {
		t.Fatalf("output tool %v", tool)
	}
	if tc := body["tool_choice"].(map[string]any); tc["type"] != "tool" || tc["name"] != "verdict" {
		t.Fatalf("tool choice %v", tc)
	}

	g := newFakeServerAt(t, "/v1/messages", ok(nativeReply))
	resp, err = newAnthropic(g, AnthropicConfig{StructuredOutput: StructuredNative}).Chat(context.Background(), Request{Messages: []Message{User("classify: hello")}, ResponseFormat: rf})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Decode(&v); err != nil || v.Label != "ham" {
		t.Fatalf("native reply %+v (%v)", resp, err)
	}
	format := g.bodies[0]["output_config"].(map[string]any)["format"].(map[string]any)
	if format["type"] != "json_schema" || format["schema"].(map[string]any)["type"] != "object" || g.bodies[0]["tools"] != nil {
		t.Fatalf("output_config %v", g.bodies[0])
	}
	_, err = newAnthropic(g, AnthropicConfig{StructuredOutput: "grammar"}).Chat(context.Background(), Request{Messages: []Message{User("x")}, ResponseFormat: rf})
	if err == nil || !strings.Contains(err.Error(), `"grammar" is unknown`) {
		t.Fatalf("unknown mode: %v", err)
	}
}

// TestAnthropicStreamErrorRetried: an error event in the middle of a
// stream (the API sends overloaded_error that way) fails the attempt,
// which is retried; the next stream is assembled as usual.
func TestAnthropicStreamErrorRetried(t *testing.T) {
	const broken = `event: message_start
data: {"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","model":"claude-test-1","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

event: error
data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}

`
	f := newFakeServerAt(t, "/v1/messages", reply{status: 200, body: broken, sse: true}, reply{status: 200, body: anthropicStream, sse: true})
	var delays []time.Duration
	c := newAnthropic(f, AnthropicConfig{Stream: true, Retry: RetryPolicy{Attempts: 3, Sleep: noSleep(&delays)}})
	resp, err := c.Chat(context.Background(), Request{Messages: []Message{User("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	if f.requests() != 2 || len(delays) != 1 || resp.Message.Content != "Checking the weather." || resp.Usage.CompletionTokens != 15 {
		t.Fatalf("%d requests, %d waits, response %+v", f.requests(), len(delays), resp)
	}
}
