package pipeline_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/weirproject/weir/pipeline"
	"github.com/weirproject/weir/runtime"
)

// TestAgentPricing: an agent step's pricing makes the spend of its model
// calls a metric (modelSpendMicros, the offline model priced by the name
// its replies carry), and every price is checked at the edge.
func TestAgentPricing(t *testing.T) {
	src := `
source:
  generate: {count: 5, fields: {u: 'i', t: 'i * 1000'}}
  timestamp: t
steps:
  - keyBy: u
  - agent:
      prompt: 'Check {{.u}}'
      pricing: {offline: {input: 1000, output: 2000}}
sink:
  stdout: {}
`
	spec, err := pipeline.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var job *runtime.Job
	_, err = pipeline.Run(context.Background(), spec, pipeline.Options{Stdout: io.Discard, OnStart: func(_ *pipeline.Job, j *runtime.Job) { job = j }}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := job.Metrics()
	in, out, spend := m.Sum("agent", "modelInputTokens"), m.Sum("agent", "modelOutputTokens"), m.Sum("agent", "modelSpendMicros")
	if in == 0 || spend != 1000*in+2000*out {
		t.Fatalf("spend %d micros for %d input and %d output tokens, want %d", spend, in, out, 1000*in+2000*out)
	}

	head := "source:\n  file: {paths: [in.jsonl]}\n  timestamp: t\nsink:\n  stdout: {}\nsteps:\n  - keyBy: u\n  - agent:\n      prompt: p\n"
	for _, c := range []struct{ src, want string }{
		{head + "      pricing: {gpt: {input: -1, output: 1}}\n", "p.yaml:10:30: steps[1].agent.pricing.gpt.input: -1: want a price per million tokens, 0 or more"},
		{head + "      pricing: {gpt: {input: '1', output: 1}}\n", "steps[1].agent.pricing.gpt.input: got"},
		{head + "      pricing: {gpt: {input: 1}}\n", `steps[1].agent.pricing.gpt: missing key "output"`},
		{head + "      pricing: {gpt: {input: 1, output: 1, cached: 1}}\n", `steps[1].agent.pricing.gpt: unknown key "cached"`},
		{head + "      pricing: {}\n", "steps[1].agent.pricing: want a price per model"},
	} {
		_, err := pipeline.Parse("p.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v\nwant it to contain %q", c.src, err, c.want)
		}
	}
}
