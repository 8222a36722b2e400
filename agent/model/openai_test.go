package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer speaks the chat-completions wire format: it records requests
// and answers with the queued replies (status, body, headers), the last
// one repeating.
type fakeServer struct {
	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	queries []url.Values
	replies []reply
}

type reply struct {
	status int
	body   string
	header map[string]string
	// sse sends body as server-sent events (text/event-stream).
	sse bool
}

func newFakeServer(t testing.TB, replies ...reply) *fakeServer {
	return newFakeServerAt(t, "/v1/chat/completions", replies...)
}

// newFakeServerAt is a fake server answering POST requests to path.
func newFakeServerAt(t testing.TB, path string, replies ...reply) *fakeServer {
	f := &fakeServer{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != path {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("request body is not JSON: %s", b)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, m)
		f.headers = append(f.headers, r.Header.Clone())
		f.queries = append(f.queries, r.URL.Query())
		rp := f.replies[0]
		if len(f.replies) > 1 {
			f.replies = f.replies[1:]
		}
		f.mu.Unlock()
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		if rp.sse {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.WriteHeader(rp.status)
		if !rp.sse {
			io.WriteString(w, rp.body)
			return
		}
		// One event at a time, flushed: the client reads a stream.
		for _, ev := range strings.SplitAfter(rp.body, "\n\n") {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func ok(body string) reply { return reply{status: 200, body: body} }

const textReply = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test-0613",
"choices":[{"index":0,"message":{"role":"assistant","content":"Paris is sunny.","refusal":null},"logprobs":null,"finish_reason":"stop"}],
"usage":{"prompt_tokens":42,"completion_tokens":5,"total_tokens":47}}`

const toolReply = `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"gpt-test-0613",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
 {"id":"call_abc","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\",\"unit\":\"c\"}"}},
 {"id":"call_def","type":"function","function":{"name":"time","arguments":"{broken"}}]},
 "logprobs":null,"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70}}`

func noSleep(delays *[]time.Duration) func(context.Context, time.Duration) error {
	var mu sync.Mutex
	return func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*delays = append(*delays, d)
		mu.Unlock()
		return ctx.Err()
	}
}

func TestOpenAIRequestAndToolCalls(t *testing.T) {
	f := newFakeServer(t, ok(toolReply), ok(textReply))
	c := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk-test-secret", Model: "gpt-test", Headers: map[string]string{"X-Team": "weir"}})
	temp := 0.2
	weather := ToolSpec{Name: "weather", Description: "Current weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
	req := Request{
		Messages:    []Message{System("be brief"), User("Weather in Paris?")},
		Tools:       []ToolSpec{weather},
		ToolChoice:  "auto",
		Temperature: &temp,
		MaxTokens:   100,
	}
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.Message.ToolCalls) != 2 || resp.Usage.PromptTokens != 50 {
		t.Fatalf("response %+v", resp)
	}
	tc := resp.Message.ToolCalls[0]
	if tc.ID != "call_abc" || tc.Name != "weather" || string(tc.Arguments) != `{"city":"Paris","unit":"c"}` {
		t.Fatalf("tool call %+v", tc)
	}
	if bad := resp.Message.ToolCalls[1]; string(bad.Arguments) != `"{broken"` {
		t.Fatalf("invalid arguments not kept as a JSON string: %s", bad.Arguments)
	}
	if _, err := json.Marshal(resp); err != nil {
		t.Fatalf("response not serialisable: %v", err)
	}

	// The second turn sends the assistant's tool calls and the results.
	req.Messages = append(req.Messages, resp.Message, ToolResult("call_abc", "sunny, 21C"), ToolResult("call_def", "bad arguments"))
	req.ToolChoice = "weather"
	req.ResponseFormat = &ResponseFormat{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`), Strict: true}
	resp, err = c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Paris is sunny." || resp.Model != "gpt-test-0613" || resp.FinishReason != "stop" {
		t.Fatalf("response %+v", resp)
	}

	first, second := f.bodies[0], f.bodies[1]
	if first["model"] != "gpt-test" || first["temperature"] != 0.2 || first["max_tokens"] != 100.0 || first["tool_choice"] != "auto" {
		t.Fatalf("first request %v", first)
	}
	msgs := first["messages"].([]any)
	if m := msgs[0].(map[string]any); m["role"] != "system" || m["content"] != "be brief" {
		t.Fatalf("system message %v", m)
	}
	tools := first["tools"].([]any)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if tools[0].(map[string]any)["type"] != "function" || fn["name"] != "weather" || fn["description"] != "Current weather" ||
		fn["parameters"].(map[string]any)["required"].([]any)[0] != "city" {
		t.Fatalf("tools %v", tools)
	}
	msgs = second["messages"].([]any)
	asst := msgs[2].(map[string]any)
	calls := asst["tool_calls"].([]any)
	call := calls[0].(map[string]any)
	if asst["role"] != "assistant" || call["id"] != "call_abc" || call["type"] != "function" ||
		call["function"].(map[string]any)["arguments"] != `{"city":"Paris","unit":"c"}` {
		t.Fatalf("assistant message %v", asst)
	}
	if tm := msgs[3].(map[string]any); tm["role"] != "tool" || tm["tool_call_id"] != "call_abc" || tm["content"] != "sunny, 21C" {
		t.Fatalf("tool message %v", tm)
	}
	choice := second["tool_choice"].(map[string]any)
	if choice["type"] != "function" || choice["function"].(map[string]any)["name"] != "weather" {
		t.Fatalf("tool choice %v", choice)
	}
	rf := second["response_format"].(map[string]any)
	js := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != "answer" || js["strict"] != true || js["schema"].(map[string]any)["type"] != "object" {
		t.Fatalf("response format %v", rf)
	}
	h := f.headers[0]
	if h.Get("Authorization") != "Bearer sk-test-secret" || h.Get("X-Team") != "weir" {
		t.Fatalf("headers %v", h)
	}
	if strings.Contains(c.String(), "sk-test") {
		t.Fatalf("String() shows the key: %s", c)
	}
}

func TestOpenAIErrorsAndRetries(t *testing.T) {
	const badRequest = `{"error":{"message":"Invalid 'messages': empty","type":"invalid_request_error","param":"messages","code":"invalid_value"}}`
	const rateLimited = `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	const serverError = `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`
	const unauthorized = `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	cases := []struct {
		name     string
		replies  []reply
		requests int
		status   int // 0: success
		contains []string
	}{
		{"400 is not retried", []reply{{status: 400, body: badRequest}}, 1, 400, []string{"HTTP 400", "Invalid 'messages'", "invalid_value"}},
		{"401 names the key", []reply{{status: 401, body: unauthorized}}, 1, 401, []string{"check the API key"}},
		{"429 then success", []reply{{status: 429, body: rateLimited, header: map[string]string{"Retry-After": "2"}}, ok(textReply)}, 2, 0, nil},
		{"500 then success", []reply{{status: 500, body: serverError}, {status: 503, body: serverError}, ok(textReply)}, 3, 0, nil},
		{"500 until giving up", []reply{{status: 500, body: serverError}}, 3, 500, []string{"giving up after 3 attempts", "HTTP 500"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t, c.replies...)
			var delays []time.Duration
			m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk-secret-123", Model: "gpt-test",
				Retry: RetryPolicy{Attempts: 3, Initial: 100 * time.Millisecond, Max: 5 * time.Second, Sleep: noSleep(&delays)}})
			resp, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}})
			if f.requests() != c.requests {
				t.Fatalf("%d requests, want %d", f.requests(), c.requests)
			}
			if c.status == 0 {
				if err != nil || resp.Message.Content != "Paris is sunny." {
					t.Fatalf("resp %+v err %v", resp, err)
				}
			} else {
				var api *APIError
				if !errors.As(err, &api) || api.StatusCode != c.status {
					t.Fatalf("err = %v, want an APIError %d", err, c.status)
				}
				for _, s := range c.contains {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("err %q does not contain %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "sk-secret") {
					t.Fatalf("error shows the key: %v", err)
				}
			}
			if len(delays) != c.requests-1 {
				t.Fatalf("%d back-off waits for %d requests", len(delays), c.requests)
			}
			if c.name == "429 then success" && delays[0] < 2*time.Second {
				t.Fatalf("Retry-After 2 ignored: waited %v", delays[0])
			}
		})
	}
}

func TestOpenAIConfigFromEnvironment(t *testing.T) {
	f := newFakeServer(t, ok(textReply))
	t.Setenv("OPENAI_BASE_URL", f.srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	m := OpenAI(OpenAIConfig{Model: "gpt-test"})
	if _, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}}); err != nil {
		t.Fatal(err)
	}
	if got := f.headers[0].Get("Authorization"); got != "Bearer sk-from-env" {
		t.Fatalf("authorization %q", got)
	}
	if _, err := OpenAI(OpenAIConfig{}).Chat(context.Background(), Request{Messages: []Message{User("x")}}); err == nil || !strings.Contains(err.Error(), "no model name") {
		t.Fatalf("missing model: %v", err)
	}
}

func TestOllamaPreset(t *testing.T) {
	t.Setenv("OLLAMA_HOST", "")
	if s := Ollama(OpenAIConfig{Model: "llama3.2"}).String(); !strings.Contains(s, DefaultOllamaBaseURL) {
		t.Fatalf("default: %s", s)
	}
	t.Setenv("OLLAMA_HOST", "gpu-box:11434")
	if s := Ollama(OpenAIConfig{Model: "llama3.2"}).String(); !strings.Contains(s, "http://gpu-box:11434/v1") {
		t.Fatalf("OLLAMA_HOST: %s", s)
	}
	f := newFakeServer(t, ok(textReply))
	m := Ollama(OpenAIConfig{BaseURL: f.srv.URL + "/v1", Model: "llama3.2"})
	if _, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}}); err != nil {
		t.Fatal(err)
	}
	if got := f.headers[0].Get("Authorization"); got != "Bearer ollama" || f.bodies[0]["model"] != "llama3.2" {
		t.Fatalf("authorization %q, body %v", got, f.bodies[0])
	}
}

func TestRetryStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	p := RetryPolicy{Attempts: 10, Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }}
	_, err := p.Do(ctx, func(context.Context) (*Response, error) {
		calls++
		return nil, &APIError{StatusCode: 503}
	})
	if calls != 1 || err == nil || !strings.Contains(err.Error(), "cancelled while waiting") {
		t.Fatalf("calls %d err %v", calls, err)
	}
	var api *APIError
	if !errors.As(err, &api) {
		t.Fatal("the APIError is lost")
	}
}

// TestOpenAIIdempotencyKey: a key in the context is sent as the
// Idempotency-Key header on every attempt of the call; without one no such
// header is sent.
func TestOpenAIIdempotencyKey(t *testing.T) {
	const serverError = `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`
	f := newFakeServer(t, reply{status: 500, body: serverError}, ok(textReply), ok(textReply))
	var delays []time.Duration
	m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-test",
		Retry: RetryPolicy{Attempts: 3, Sleep: noSleep(&delays)}})
	const key = "0123456789abcdef0123456789abcdef"
	ctx := WithIdempotencyKey(context.Background(), key)
	if got, ok := IdempotencyKey(ctx); !ok || got != key {
		t.Fatalf("IdempotencyKey = %q, %v", got, ok)
	}
	if _, err := m.Chat(ctx, Request{Messages: []Message{User("hi")}}); err != nil {
		t.Fatal(err)
	}
	if f.requests() != 2 {
		t.Fatalf("%d requests, want 2 (a 500, then the retry)", f.requests())
	}
	for i, h := range f.headers {
		if got := h.Values(IdempotencyHeader); len(got) != 1 || got[0] != key {
			t.Fatalf("attempt %d: %s = %q, want %q", i+1, IdempotencyHeader, got, key)
		}
	}
	if _, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}}); err != nil {
		t.Fatal(err)
	}
	if got := f.headers[2].Get(IdempotencyHeader); got != "" {
		t.Fatalf("a call without a key sent %s %q", IdempotencyHeader, got)
	}
	if _, ok := IdempotencyKey(WithIdempotencyKey(ctx, "")); ok {
		t.Fatal("an empty key is a key")
	}
}

// TestResponseJSONRoundTrip: a reply read from the wire survives the JSON
// round trip of the action-state store unchanged (text, tool calls, broken
// arguments kept as a string, finish reason, usage, model).
func TestResponseJSONRoundTrip(t *testing.T) {
	f := newFakeServer(t, ok(toolReply), ok(textReply))
	m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-test"})
	for range 2 {
		resp, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		var back Response
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*resp, back) {
			t.Fatalf("round trip changed the response:\n%+v\n%+v", *resp, back)
		}
		if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
			t.Fatalf("usage not read: %+v", resp.Usage)
		}
	}
}
