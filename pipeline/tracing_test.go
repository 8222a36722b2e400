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

	"github.com/twmb/franz-go/pkg/kgo"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/broker"
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

// TestJobTracingContinuesTraceparent: a Kafka record's traceparent header
// (kept by source.kafka.metadata) makes the agent's span of that input a
// child of the remote span, in its trace; a record without one starts a
// trace of its own.
func TestJobTracingContinuesTraceparent(t *testing.T) {
	type span struct{ trace, parent string }
	var mu sync.Mutex
	var inputs []span
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
					if strings.HasPrefix(s.Name, "invoke_agent ") {
						inputs = append(inputs, span{fmt.Sprintf("%x", s.TraceId), fmt.Sprintf("%x", s.ParentSpanId)})
					}
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	b, err := broker.Start(broker.Options{Topics: map[string]int32{"q": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	traced := &kgo.Record{Topic: "q", Value: []byte(`{"u":"a","t":1000}`),
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-" + traceID + "-" + parentID + "-01")}}}
	plain := &kgo.Record{Topic: "q", Value: []byte(`{"u":"b","t":2000}`)}
	if err := cl.ProduceSync(context.Background(), traced, plain).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
kafka: {brokers: ['%s']}
job:
  tracing: {endpoint: %s, sampleRatio: 1}
source:
  kafka: {topics: [q], bounded: true, metadata: meta}
  timestamp: t
steps:
  - keyBy: u
  - agent: {prompt: 'Check {{.u}}'}
sink:
  stdout: {}
`, b.Addrs()[0], srv.URL)
	spec, err := pipeline.Parse("w.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(context.Background(), spec, pipeline.Options{Stdout: io.Discard}, io.Discard); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(inputs) != 2 {
		t.Fatalf("%d input spans, want 2", len(inputs))
	}
	var continued, own int
	for _, s := range inputs {
		switch {
		case s.trace == traceID && s.parent == parentID:
			continued++
		case s.trace != traceID && s.parent == "":
			own++
		}
	}
	if continued != 1 || own != 1 {
		t.Fatalf("input spans %+v: want one in trace %s under %s, one root of its own", inputs, traceID, parentID)
	}
}
