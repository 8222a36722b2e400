package model

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestOfflineDeterministic(t *testing.T) {
	req := Request{Messages: []Message{User("what is 2+2?")}}
	a := &Offline{Seed: 1, Latency: Latency{Dist: "exponential", Mean: time.Second}}
	b := &Offline{Seed: 1, Latency: Latency{Dist: "exponential", Mean: time.Second}}
	c := &Offline{Seed: 2, Latency: Latency{Dist: "exponential", Mean: time.Second}}
	ra, _ := a.Reply(req)
	rb, _ := b.Reply(req)
	rc, _ := c.Reply(req)
	if ra.Message.Content != rb.Message.Content || a.LatencyFor(req) != b.LatencyFor(req) {
		t.Fatal("same seed and request, different reply or latency")
	}
	if ra.Message.Content == rc.Message.Content {
		t.Fatal("the seed does not change the reply")
	}
	other := Request{Messages: []Message{User("what is 3+3?")}}
	if r, _ := a.Reply(other); r.Message.Content == ra.Message.Content {
		t.Fatal("different requests, same reply")
	}
	if !strings.Contains(ra.Message.Content, "what is 2+2?") {
		t.Fatalf("reply %q does not quote the prompt", ra.Message.Content)
	}
}

func TestOfflineSleepsTheLatency(t *testing.T) {
	var slept []time.Duration
	o := &Offline{Latency: Latency{Mean: 5 * time.Second}, Sleep: func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	}}
	if _, err := o.Chat(context.Background(), Request{Messages: []Message{User("x")}}); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 1 || slept[0] != 5*time.Second {
		t.Fatalf("slept %v", slept)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&Offline{Latency: Latency{Mean: time.Hour}}).Chat(ctx, Request{}); err == nil {
		t.Fatal("a cancelled call returned no error")
	}
}

func TestLatencyDistributions(t *testing.T) {
	const n = 20000
	for _, d := range []string{"fixed", "uniform", "exponential", "lognormal"} {
		l := Latency{Dist: d, Mean: 100 * time.Millisecond, Max: time.Hour}
		var sum float64
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for i := range n {
			x := l.Sample((float64(i) + 0.5) / n)
			sum += float64(x)
			lo, hi = min(lo, x), max(hi, x)
		}
		mean := time.Duration(sum / n)
		if mean < 97*time.Millisecond || mean > 103*time.Millisecond {
			t.Errorf("%s: mean %v, want about 100ms", d, mean)
		}
		if d != "fixed" && hi-lo < 50*time.Millisecond {
			t.Errorf("%s: range [%v, %v] too narrow", d, lo, hi)
		}
		if err := l.Validate(); err != nil {
			t.Error(err)
		}
	}
	if (Latency{Dist: "exponential", Mean: time.Second}).Sample(0.999999999) != 20*time.Second {
		t.Error("the default cap is not 20 × mean")
	}
	if err := (Latency{Dist: "pareto"}).Validate(); err == nil {
		t.Error("unknown distribution accepted")
	}
}

func TestOfflineToolCallsAndStructuredOutput(t *testing.T) {
	o := &Offline{ToolCalls: true}
	tools := []ToolSpec{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"},"mode":{"enum":["fast","slow"]}}}`)}}
	req := Request{Messages: []Message{User("find weir")}, Tools: tools}
	r, err := o.Reply(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Message.ToolCalls) != 1 || r.FinishReason != "tool_calls" {
		t.Fatalf("reply %+v", r)
	}
	var args map[string]any
	if err := json.Unmarshal(r.Message.ToolCalls[0].Arguments, &args); err != nil || args["query"] != "find weir" || args["limit"] != 0.0 || args["mode"] != "fast" {
		t.Fatalf("arguments %s (%v)", r.Message.ToolCalls[0].Arguments, err)
	}
	req.Messages = append(req.Messages, r.Message, ToolResult(r.Message.ToolCalls[0].ID, "weir is a river barrier"))
	r, _ = o.Reply(req)
	if len(r.Message.ToolCalls) != 0 || !strings.Contains(r.Message.Content, "weir is a river barrier") {
		t.Fatalf("final reply %+v", r)
	}
	sreq := Request{Messages: []Message{User("name it")}, ResponseFormat: &ResponseFormat{Name: "n",
		Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}}}}`)}}
	r, _ = o.Reply(sreq)
	var out struct {
		Name string   `json:"name"`
		OK   bool     `json:"ok"`
		Tags []string `json:"tags"`
	}
	if err := r.Decode(&out); err != nil || out.Name != "name it" {
		t.Fatalf("structured %q: %+v %v", r.Message.Content, out, err)
	}
	if err := (&Response{Message: Message{Content: "not json"}}).Decode(&out); err == nil || !strings.Contains(err.Error(), "not json") {
		t.Fatalf("Decode of text: %v", err)
	}
}
