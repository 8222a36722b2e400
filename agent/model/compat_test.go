package model

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// openAIStream is a streamed chat completion: text in two deltas, a tool
// call whose arguments arrive in pieces, the finish reason, and the usage
// chunk that stream_options.include_usage asks for.
const openAIStream = `data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[{"index":0,"delta":{"role":"assistant","content":"Checking "},"finish_reason":null}]}

data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[{"index":0,"delta":{"content":"the weather."},"finish_reason":null}]}

data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"weather","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[],"usage":{"prompt_tokens":42,"completion_tokens":17,"total_tokens":59}}

data: [DONE]

`

// TestOpenAIStreaming: a streamed reply is assembled into the Response a
// non-streaming call gives, with the usage of the final chunk.
func TestOpenAIStreaming(t *testing.T) {
	f := newFakeServer(t, reply{status: 200, body: openAIStream, sse: true})
	m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-test", Stream: true})
	resp, err := m.Chat(context.Background(), Request{Messages: []Message{User("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{Model: "gpt-test-0613", FinishReason: "tool_calls", Usage: Usage{PromptTokens: 42, CompletionTokens: 17},
		Message: Message{Role: RoleAssistant, Content: "Checking the weather.",
			ToolCalls: []ToolCall{{ID: "call_s1", Name: "weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}}}
	if !reflect.DeepEqual(resp, want) {
		t.Fatalf("streamed response\n%+v, want\n%+v", resp, want)
	}
	body := f.bodies[0]
	if body["stream"] != true || body["stream_options"].(map[string]any)["include_usage"] != true {
		t.Fatalf("request %v", body)
	}
}

// TestAzureOpenAIDeployment: Azure OpenAI's deployment URL, api-version
// query and api-key header, and no Authorization header even when
// OPENAI_API_KEY is set.
func TestAzureOpenAIDeployment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-must-not-leak")
	f := newFakeServerAt(t, "/openai/deployments/gpt4o-prod/chat/completions", ok(textReply))
	m := AzureOpenAI(OpenAIConfig{BaseURL: f.srv.URL, APIKey: "azure-key-1"}, "gpt4o-prod", "2024-10-21")
	resp, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Paris is sunny." {
		t.Fatalf("response %+v", resp)
	}
	h, q := f.headers[0], f.queries[0]
	if h.Get("Api-Key") != "azure-key-1" || h.Get("Authorization") != "" {
		t.Fatalf("headers %v", h)
	}
	if q.Get("api-version") != "2024-10-21" || f.bodies[0]["model"] != "gpt4o-prod" {
		t.Fatalf("query %v, model %v", q, f.bodies[0]["model"])
	}

	// Azure's v1 API: no deployment in the path, the model in the body.
	t.Setenv("AZURE_OPENAI_ENDPOINT", "")
	t.Setenv("AZURE_OPENAI_API_KEY", "azure-key-env")
	g := newFakeServerAt(t, "/openai/v1/chat/completions", ok(textReply))
	m = AzureOpenAI(OpenAIConfig{BaseURL: g.srv.URL + "/", Model: "gpt-4o"}, "", "")
	if _, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}}); err != nil {
		t.Fatal(err)
	}
	if g.headers[0].Get("Api-Key") != "azure-key-env" || g.queries[0].Has("api-version") || g.bodies[0]["model"] != "gpt-4o" {
		t.Fatalf("v1: headers %v query %v body %v", g.headers[0], g.queries[0], g.bodies[0])
	}
}

// TestOpenAICompatibleServer: a vLLM-style server under a non-default base
// path, with a key in a custom header and extra query parameters, streaming.
func TestOpenAICompatibleServer(t *testing.T) {
	f := newFakeServerAt(t, "/serving/llm/v1/chat/completions", reply{status: 200, body: openAIStream, sse: true})
	m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/serving/llm/v1", APIKey: "gw-key", APIKeyHeader: "X-Gateway-Key",
		Query: map[string]string{"tenant": "weir"}, Model: "meta-llama/Llama-3.1-8B-Instruct", Stream: true})
	resp, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CompletionTokens != 17 || len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("response %+v", resp)
	}
	if f.headers[0].Get("X-Gateway-Key") != "gw-key" || f.headers[0].Get("Authorization") != "" || f.queries[0].Get("tenant") != "weir" ||
		f.bodies[0]["model"] != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Fatalf("request: headers %v query %v body %v", f.headers[0], f.queries[0], f.bodies[0])
	}
}

// TestOpenAIStreamErrorRetried: an error object in the middle of a stream
// fails the attempt, which is retried.
func TestOpenAIStreamErrorRetried(t *testing.T) {
	const broken = `data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test-0613","choices":[{"index":0,"delta":{"role":"assistant","content":"Check"},"finish_reason":null}]}

data: {"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}

`
	f := newFakeServer(t, reply{status: 200, body: broken, sse: true}, reply{status: 200, body: openAIStream, sse: true})
	var delays []time.Duration
	m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-test", Stream: true,
		Retry: RetryPolicy{Attempts: 3, Sleep: noSleep(&delays)}})
	resp, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if f.requests() != 2 || resp.Message.Content != "Checking the weather." {
		t.Fatalf("%d requests, response %+v", f.requests(), resp)
	}
}
