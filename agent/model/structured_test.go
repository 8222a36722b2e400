package model

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
)

// verdict is a structured answer: its schema requires every field, allows
// no others, and has an enum and bounds.
type verdict struct {
	Label   string   `json:"label" jsonschema:"spam or ham"`
	Score   float64  `json:"score"`
	Reasons []string `json:"reasons"`
	Note    string   `json:"note,omitempty"`
}

func verdictFormat(t testing.TB) *ResponseFormat {
	rf, err := SchemaFor[verdict]("verdict")
	if err != nil {
		t.Fatal(err)
	}
	return rf
}

func TestSchemaForAndValidate(t *testing.T) {
	rf := verdictFormat(t)
	var s map[string]any
	if err := json.Unmarshal(rf.Schema, &s); err != nil {
		t.Fatal(err)
	}
	if s["type"] != "object" || len(s["required"].([]any)) != 3 || s["additionalProperties"] != false {
		t.Fatalf("schema %s", rf.Schema)
	}
	for _, c := range []struct {
		content string
		ok      bool
		says    string
	}{
		{`{"label":"spam","score":0.5,"reasons":["money"]}`, true, ""},
		{`{"label":"spam","score":0.5,"reasons":[],"note":"x"}`, true, ""},
		{`{"label":"spam","score":0.5}`, false, "reasons"},
		{`{"label":"spam","score":"high","reasons":[]}`, false, "score"},
		{`{"label":"spam","score":1,"reasons":[],"extra":1}`, false, "extra"},
		{`label: spam`, false, "not a JSON value"},
	} {
		err := rf.Validate(c.content)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.says)) {
			t.Errorf("Validate(%s) = %v, want ok %v mentioning %q", c.content, err, c.ok, c.says)
		}
	}
	if _, err := SchemaFor[verdict](""); err == nil {
		t.Error("a nameless format accepted")
	}
	if _, err := SchemaFor[chan int]("c"); err == nil {
		t.Error("a channel's schema accepted")
	}
	bad := &ResponseFormat{Name: "bad", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}`)}
	if _, err := ChatStructured(context.Background(), &Offline{}, Request{Messages: []Message{User("x")}, ResponseFormat: bad}); err == nil {
		t.Error("a schema that does not resolve was sent")
	}
}

// recordingModel records the requests and idempotency keys m is called
// with.
type recordingModel struct {
	m    ChatModel
	mu   sync.Mutex
	reqs []Request
	keys []string
}

func (r *recordingModel) Chat(ctx context.Context, req Request) (*Response, error) {
	k, _ := IdempotencyKey(ctx)
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.keys = append(r.keys, k)
	r.mu.Unlock()
	return r.m.Chat(ctx, req)
}

// TestChatStructuredFeedsBackErrors: replies that do not conform are
// answered with the validation error and the model is asked again, up to
// the attempts; each attempt has its own idempotency key; usage is summed;
// when no reply conforms the error is a SchemaError.
func TestChatStructuredFeedsBackErrors(t *testing.T) {
	rf := verdictFormat(t)
	rec := &recordingModel{m: &Offline{SchemaMistakes: 2}}
	ctx := WithIdempotencyKey(context.Background(), "0123456789abcdef0123456789abcdef")
	req := Request{Messages: []Message{User("classify: win money now")}, ResponseFormat: rf}
	resp, err := ChatStructured(ctx, rec, req)
	if err != nil {
		t.Fatal(err)
	}
	var v verdict
	if err := resp.Decode(&v); err != nil || v.Label != "classify: win money now" || v.Reasons == nil {
		t.Fatalf("answer %q: %+v %v", resp.Message.Content, v, err)
	}
	if len(rec.reqs) != 3 {
		t.Fatalf("%d calls, want 3 (two mistakes, then a conforming answer)", len(rec.reqs))
	}
	if len(req.Messages) != 1 {
		t.Fatal("the caller's request was modified")
	}
	third := rec.reqs[2].Messages
	if len(third) != 5 || third[1].Role != RoleAssistant || third[2].Role != RoleUser ||
		!strings.Contains(third[2].Content, "rejected") || !strings.Contains(third[2].Content, `missing properties: ["label"]`) {
		t.Fatalf("the third request does not carry the feedback: %+v", third)
	}
	if rec.keys[0] != "0123456789abcdef0123456789abcdef" || rec.keys[1] == rec.keys[0] || rec.keys[2] == rec.keys[1] || len(rec.keys[2]) != 32 {
		t.Fatalf("idempotency keys %q", rec.keys)
	}
	one, _ := (&Offline{}).Reply(rec.reqs[0])
	if resp.Usage.CompletionTokens != 3*one.Usage.CompletionTokens {
		t.Fatalf("usage %+v is not the sum of three calls", resp.Usage)
	}

	rf2 := *rf
	rf2.Attempts = 2
	_, err = ChatStructured(context.Background(), &Offline{SchemaMistakes: 2}, Request{Messages: []Message{User("x")}, ResponseFormat: &rf2})
	var se *SchemaError
	if !errors.As(err, &se) || se.Attempts != 2 || !IsSchemaError(err) || !strings.Contains(err.Error(), "in 2 attempts") {
		t.Fatalf("err = %v, want a SchemaError after 2 attempts", err)
	}

	// Without a format, one plain call; a reply with tool calls is not
	// validated.
	rec = &recordingModel{m: &Offline{ToolCalls: true, SchemaMistakes: 5}}
	tools := []ToolSpec{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
	resp, err = ChatStructured(context.Background(), rec, Request{Messages: []Message{User("x")}, Tools: tools, ResponseFormat: rf})
	if err != nil || len(resp.Message.ToolCalls) != 1 || len(rec.reqs) != 1 {
		t.Fatalf("tool call: %+v %v after %d calls", resp, err, len(rec.reqs))
	}
}

// TestOfflineAnswersConform: the offline model's structured answers
// conform to schemas with bounds, lengths, enums and nested arrays.
func TestOfflineAnswersConform(t *testing.T) {
	schemas := []string{
		`{"type":"object","properties":{"n":{"type":"integer","minimum":3,"maximum":9},"m":{"type":"number","exclusiveMinimum":2.5}},"required":["n","m"]}`,
		`{"type":"object","properties":{"s":{"type":"string","minLength":40},"t":{"type":"string","maxLength":2}},"required":["s","t"],"additionalProperties":false}`,
		`{"type":"object","properties":{"xs":{"type":"array","minItems":2,"items":{"type":"object","properties":{"k":{"enum":["a","b"]}},"required":["k"]}}},"required":["xs"]}`,
		`{"type":"array","items":{"type":"integer","minimum":-4,"maximum":-2},"minItems":1}`,
		`{"type":"string","minLength":1}`,
	}
	for _, sc := range schemas {
		rf := &ResponseFormat{Name: "s", Schema: json.RawMessage(sc)}
		r, err := (&Offline{}).Reply(Request{Messages: []Message{User("some prompt")}, ResponseFormat: rf})
		if err != nil {
			t.Fatal(err)
		}
		if err := rf.Validate(r.Message.Content); err != nil {
			t.Errorf("schema %s: answer %s: %v", sc, r.Message.Content, err)
		}
		r, _ = (&Offline{SchemaMistakes: 1}).Reply(Request{Messages: []Message{User("some prompt")}, ResponseFormat: rf})
		if err := rf.Validate(r.Message.Content); err == nil {
			t.Errorf("schema %s: the mistaken answer %s conforms", sc, r.Message.Content)
		}
	}
}

// TestOpenAIStructuredRetry: against the chat-completions wire format,
// the schema goes out as response_format json_schema; a reply that does
// not conform is answered with the error and the second one is returned.
func TestOpenAIStructuredRetry(t *testing.T) {
	bad := `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"{\"label\":\"spam\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}`
	good := `{"id":"c2","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"{\"label\":\"spam\",\"score\":0.9,\"reasons\":[\"money\"]}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}`
	f := newFakeServer(t, ok(bad), ok(good))
	m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk", Model: "gpt-test"})
	resp, err := ChatStructured(context.Background(), m, Request{Messages: []Message{User("classify")}, ResponseFormat: verdictFormat(t)})
	if err != nil {
		t.Fatal(err)
	}
	var v verdict
	if err := resp.Decode(&v); err != nil || v.Score != 0.9 || resp.Usage != (Usage{PromptTokens: 40, CompletionTokens: 13}) {
		t.Fatalf("answer %+v usage %+v (%v)", v, resp.Usage, err)
	}
	rf := f.bodies[0]["response_format"].(map[string]any)
	if rf["type"] != "json_schema" || rf["json_schema"].(map[string]any)["name"] != "verdict" {
		t.Fatalf("response_format %v", rf)
	}
	msgs := f.bodies[1]["messages"].([]any)
	if len(msgs) != 3 || !strings.Contains(msgs[2].(map[string]any)["content"].(string), "reasons") {
		t.Fatalf("second request %v", msgs)
	}
}

// TestChatStructuredRetryOffersNoTools: after a rejected answer the model
// is asked again with tool choice "none", so it corrects the answer
// instead of calling tools again; Anthropic then forces its answer tool.
func TestChatStructuredRetryOffersNoTools(t *testing.T) {
	tools := []ToolSpec{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}
	msgs := []Message{User("classify"), {Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}}}, ToolResult("c1", "found")}
	rec := &recordingModel{m: &Offline{ToolCalls: true, SchemaMistakes: 1}}
	resp, err := ChatStructured(context.Background(), rec, Request{Messages: msgs, Tools: tools, ResponseFormat: verdictFormat(t)})
	if err != nil || len(rec.reqs) != 2 || rec.reqs[0].ToolChoice != "" || rec.reqs[1].ToolChoice != "none" || len(resp.Message.ToolCalls) != 0 {
		t.Fatalf("resp %+v err %v; tool choices %q, %q", resp, err, rec.reqs[0].ToolChoice, rec.reqs[len(rec.reqs)-1].ToolChoice)
	}

	const answer = `{"id":"m","type":"message","role":"assistant","model":"claude-test","content":[{"type":"tool_use","id":"t","name":"verdict","input":{"label":"ham","score":0.1,"reasons":[]}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
	f := newFakeServerAt(t, "/v1/messages", ok(answer))
	if _, err := newAnthropic(f, AnthropicConfig{}).Chat(context.Background(), Request{Messages: msgs, Tools: tools, ToolChoice: "none", ResponseFormat: verdictFormat(t)}); err != nil {
		t.Fatal(err)
	}
	if tc := f.bodies[0]["tool_choice"].(map[string]any); tc["type"] != "tool" || tc["name"] != "verdict" || len(f.bodies[0]["tools"].([]any)) != 2 {
		t.Fatalf("tool choice %v, tools %v", tc, f.bodies[0]["tools"])
	}
}
