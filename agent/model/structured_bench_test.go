package model

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkStructuredValidation measures what validating a structured
// reply costs per call: the same request with a response format, called
// plainly (no validation) and through ChatStructured (the schema resolved
// from the cache, the reply decoded and validated), alternating one of
// each per iteration so that both see the same machine load; it reports
// the mean of each (plain-ns/call, validated-ns/call) and their ratio.
// Against the offline model the call itself is nearly free, so the ratio
// is the worst case; against the OpenAI client talking HTTP to a server
// on 127.0.0.1 it is the cheapest real call.
//
//	go test ./agent/model -run '^$' -bench StructuredValidation -count 5
func BenchmarkStructuredValidation(b *testing.B) {
	rf := verdictFormat(b)
	req := Request{Messages: []Message{User("classify: win money now")}, ResponseFormat: rf}
	good := `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"{\"label\":\"spam\",\"score\":0.9,\"reasons\":[\"money\",\"urgency\"]}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}`
	f := newFakeServer(b, ok(good))
	models := []struct {
		name string
		m    ChatModel
	}{
		{"offline", &Offline{}},
		{"openai-http", OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "sk", Model: "gpt-test"})},
	}
	for _, mc := range models {
		b.Run(mc.name, func(b *testing.B) {
			var plain, validated time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				resp, err := mc.m.Chat(context.Background(), req)
				if err != nil || !json.Valid([]byte(resp.Message.Content)) {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := ChatStructured(context.Background(), mc.m, req); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				plain += t1.Sub(t0)
				validated += t2.Sub(t1)
				n++
			}
			b.ReportMetric(float64(plain.Nanoseconds())/float64(n), "plain-ns/call")
			b.ReportMetric(float64(validated.Nanoseconds())/float64(n), "validated-ns/call")
			b.ReportMetric(float64(validated)/float64(plain), "validated/plain")
		})
	}
	b.Run("validate-only", func(b *testing.B) {
		content := `{"label":"spam","score":0.9,"reasons":["money","urgency"]}`
		for b.Loop() {
			if err := rf.Validate(content); err != nil {
				b.Fatal(err)
			}
		}
	})
}
