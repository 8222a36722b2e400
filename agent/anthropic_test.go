package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
)

// TestReActWithAnthropic: ReAct runs unchanged on Anthropic's Messages
// API (a fake one on 127.0.0.1 speaking its wire format): the model's
// tool_use block runs the tool, its result goes back as a tool_result
// block, and the structured answer comes back through the output tool.
func TestReActWithAnthropic(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "sk-ant" {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no"}}`, 404)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s", b)
		}
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		content := `[{"type":"tool_use","id":"toolu_1","name":"sum","input":{"a":2,"b":3}}]`
		if n > 1 {
			content = `[{"type":"tool_use","id":"toolu_2","name":"triage","input":{"queue":"billing","priority":1,"summary":"five"}}]`
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg","type":"message","role":"assistant","model":"claude-test","content":`+content+
			`,"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":6}}`)
	}))
	defer srv.Close()

	m := model.Anthropic(model.AnthropicConfig{BaseURL: srv.URL, APIKey: "sk-ant", Model: "claude-test"})
	a := ReAct(m, []tool.Tool{sumTool}, ReActOptions{System: "triage", Prompt: textPrompt, Output: triageFormat})
	rc, metrics, err := runAgent[ReActAnswer](t, a, Options{}, rec(msg{Key: "A", Text: "add 2 and 3"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := rc.snapshot()
	out := values(evs)
	var tr triage
	if len(out) != 1 || !out[0].Complete || out[0].ToolCalls != 1 || out[0].Decode(&tr) != nil || tr.Summary != "five" {
		t.Fatalf("answers %+v", out)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d requests, want 2", len(bodies))
	}
	msgs := bodies[1]["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	res := last["content"].([]any)[0].(map[string]any)
	if last["role"] != "user" || res["type"] != "tool_result" || res["tool_use_id"] != "toolu_1" ||
		res["content"].([]any)[0].(map[string]any)["text"] != "5" {
		t.Fatalf("the tool result went back as %v", last)
	}
	if modelMetric(metrics, "modelInputTokens", "react") != 40 || modelMetric(metrics, "modelCalls", "react") != 2 {
		t.Fatalf("counters %+v", metrics.Snapshot())
	}
}
