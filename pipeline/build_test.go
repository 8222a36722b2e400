package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/pipeline"
)

// TestUnknownTopicAtBuild: with a persistent embedded broker the topics
// are known only once it runs; Build reports a missing one at its position
// (an Errors, which `weir run` turns into exit status 2) before the job
// starts.
func TestUnknownTopicAtBuild(t *testing.T) {
	src := fmt.Sprintf(`kafka:
  embedded: {dir: %s, topics: {orders: 1}}
source:
  kafka: {topics: [orders, ordres]}
sink:
  kafka: {topic: out}
`, t.TempDir())
	spec, err := pipeline.Parse("k.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Build(context.Background(), spec, pipeline.Options{})
	var es pipeline.Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("error %v; want two positioned errors", err)
	}
	if !strings.HasPrefix(es[0].Error(), `k.yaml:4:28: source.kafka.topics: unknown topic "ordres": the cluster has orders`) ||
		!strings.HasPrefix(es[1].Error(), `k.yaml:6:18: sink.kafka.topic: unknown topic "out"`) {
		t.Errorf("got %v", err)
	}
}

// TestAgentHTTPTool: the offline model, offered an HTTP tool, calls it
// for every record; the tool's reply reaches the model, whose answer is
// the output field.
func TestAgentHTTPTool(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args map[string]any
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || r.Method != "POST" {
			http.Error(w, "bad request", 400)
			return
		}
		calls.Add(1)
		fmt.Fprintf(w, "stock level 17 for %v", args["sku"])
	}))
	defer srv.Close()
	dir := t.TempDir()
	src := fmt.Sprintf(`
source:
  generate: {count: 20, fields: {sku: '"sku-" + string(i %% 4)', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: sku
  - agent:
      prompt: 'How many {{.sku}} are left?'
      tools:
        - http:
            name: stock
            description: Stock level of an item
            url: %s
            parameters: {type: object, properties: {sku: {type: string}}, required: [sku]}
      maxSteps: 3
      output: answer
sink:
  file: {dir: %s}
`, srv.URL, filepath.Join(dir, "out"))
	spec, err := pipeline.Parse("a.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 20 || calls.Load() != 20 {
		t.Fatalf("%d outputs, %d tool calls; want 20 and 20", s.Outputs["sink"], calls.Load())
	}
	for _, r := range committed(t, filepath.Join(dir, "out")) {
		if !strings.Contains(r["answer"].(string), "stock level 17") {
			t.Errorf("answer without the tool's result: %v", r)
		}
	}
}
