package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/pipeline"
)

// TestAgentRetrievalTool: an agent step with a retrieval tool over a
// documents file; the offline model calls it with the prompt and its
// answer quotes the document nearest the question.
func TestAgentRetrievalTool(t *testing.T) {
	dir := t.TempDir()
	docs := filepath.Join(dir, "docs.jsonl")
	if err := os.WriteFile(docs, []byte(`{"id":"refunds","text":"Refunds are accepted within 14 days of delivery."}
{"id":"carriers","text":"Parcels travel with DPD inside the EU.","metadata":{"team":"shipping"}}

{"id":"invoices","text":"Invoices are emailed on the first day of each month."}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
source:
  generate: {count: 6, fields: {topic: 'i %% 2 == 0 ? "refunds" : "invoices"', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: topic
  - agent:
      prompt: 'When are {{.topic}} handled?'
      tools:
        - retrieval: {documents: %s, k: 1}
      output: answer
sink:
  file: {dir: %s}
`, docs, filepath.Join(dir, "out"))
	spec, err := pipeline.Parse("r.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 6 {
		t.Fatalf("%d outputs, want 6", s.Outputs["sink"])
	}
	for _, r := range committed(t, filepath.Join(dir, "out")) {
		a := r["answer"].(string)
		want := map[string]string{"refunds": "accepted within 14 days", "invoices": "Invoices are emailed"}[r["topic"].(string)]
		if !strings.Contains(a, want) {
			t.Errorf("answer %q for topic %v does not quote %q", a, r["topic"], want)
		}
	}

	// Errors: the file is missing; the tool has no documents key.
	for _, c := range []struct{ yaml, want string }{
		{`{retrieval: {documents: /nonexistent/docs.jsonl}}`, "retrieval.documents: open /nonexistent/docs.jsonl"},
		{`{retrieval: {k: 2}}`, "documents"},
		{`{retrieval: {documents: x, k: 0}}`, ".k"},
	} {
		bad := fmt.Sprintf(`
source:
  generate: {count: 1, fields: {t: 'i'}}
  timestamp: t
steps:
  - keyBy: t
  - agent:
      prompt: 'q'
      tools: [%s]
      output: answer
sink:
  stdout: {}
`, c.yaml)
		spec, err := pipeline.Parse("b.yaml", []byte(bad))
		if err == nil {
			_, err = pipeline.Build(context.Background(), spec, pipeline.Options{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.yaml, err, c.want)
		}
	}
}
