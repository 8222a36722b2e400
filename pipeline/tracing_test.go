package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/pipeline"
)

// TestJobTracing: a pipeline with job.tracing sends its agent step's
// traces to an OTLP/HTTP receiver: a span per input, with its action and
// model call under it.
func TestJobTracing(t *testing.T) {
	var mu sync.Mutex
	names := map[string]int{}
	parents := map[string]string{} // span id -> parent span id
	byName := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name]++
					id := fmt.Sprintf("%x", s.SpanId)
					parents[id] = fmt.Sprintf("%x", s.ParentSpanId)
					byName[s.Name] = append(byName[s.Name], id)
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	dir := t.TempDir()
	src := fmt.Sprintf(`
job:
  tracing: {endpoint: %s, sampleRatio: 1}
source:
  generate: {count: 5, fields: {amount: 'i * 10', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: amount
  - agent:
      prompt: 'Check order of {{.amount}}'
      output: answer
sink:
  file: {dir: %s}
`, srv.URL, filepath.Join(dir, "out"))
	spec, err := pipeline.Parse("w.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, io.Discard); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var input, action, chat string
	for n, c := range names {
		switch {
		case strings.HasPrefix(n, "invoke_agent "):
			input = n
		case strings.HasPrefix(n, "action "):
			action = n
		case strings.HasPrefix(n, "chat "):
			chat = n
		}
		if c != 5 {
			t.Errorf("%d spans %q, want 5 (one per input)", c, n)
		}
	}
	if input == "" || action == "" || chat == "" {
		t.Fatalf("spans received: %v", names)
	}
	inputs := map[string]bool{}
	for _, id := range byName[input] {
		inputs[id] = true
	}
	actions := map[string]bool{}
	for _, id := range byName[action] {
		actions[id] = true
		if !inputs[parents[id]] {
			t.Fatalf("an action span's parent %s is no input span", parents[id])
		}
	}
	for _, id := range byName[chat] {
		if !actions[parents[id]] {
			t.Fatalf("a chat span's parent %s is no action span", parents[id])
		}
	}
}

func TestJobTracingErrors(t *testing.T) {
	tail := "source:\n  generate: {count: 1, fields: {t: 'i'}}\n  timestamp: t\nsink:\n  stdout: {}\n"
	for _, c := range []struct{ name, job, want string }{
		{"no endpoint", "job:\n  tracing: {protocol: grpc}\n", `p.yaml:2:13: job.tracing: missing key "endpoint"`},
		{"bad endpoint", "job:\n  tracing: {endpoint: 'localhost:4318'}\n", `p.yaml:2:23: job.tracing.endpoint: "localhost:4318": want an http:// or https:// URL`},
		{"bad protocol", "job:\n  tracing: {endpoint: 'http://c:4318', protocol: thrift}\n", "job.tracing.protocol"},
		{"ratio", "job:\n  tracing: {endpoint: 'http://c:4318', sampleRatio: 0}\n", "job.tracing.sampleRatio: 0: want a number above 0 and at most 1"},
		{"ratio type", "job:\n  tracing: {endpoint: 'http://c:4318', sampleRatio: all}\n", "job.tracing.sampleRatio: got"},
		{"content", "job:\n  tracing: {endpoint: 'http://c:4318', content: yes please}\n", "job.tracing.content"},
		{"unknown", "job:\n  tracing: {endpoint: 'http://c:4318', insecure: true}\n", "insecure"},
	} {
		_, err := pipeline.Parse("p.yaml", []byte(c.job+tail))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v\nwant one line containing %q", c.name, err, c.want)
		}
	}
}
