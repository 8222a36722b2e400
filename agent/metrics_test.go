package agent

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// TestActionAndCallMetrics: the latency histograms count every action run
// and model call (per action, per model), and the retries a client makes
// are counted per model, those that waited out a 429 apart. In virtual
// time: the model's 429 asks for a 2 s wait.
func TestActionAndCallMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const inputs = 10
		calls := 0
		raw := model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
			calls++ // one key: calls do not overlap
			time.Sleep(30 * time.Millisecond)
			if calls == 3 {
				return nil, &model.APIError{StatusCode: 429, RetryAfter: 2 * time.Second}
			}
			return &model.Response{Message: model.Assistant("ok"), Usage: model.Usage{PromptTokens: 3, CompletionTokens: 2}}, nil
		})
		m := model.WithRateLimit(raw, model.MustLimiter(model.RateLimit{}))
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.Generate(env, "inputs", inputs, func(i int64) weir.Record[msg] {
			return weir.Record[msg]{Value: msg{Key: "k", Text: strconv.Itoa(int(i))}, Timestamp: i}
		}, watermark.ForMonotonous[msg]())
		record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", chatAgent(m), Options{}))
		if err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		get := func(name string) runtime.Metric {
			for _, x := range env.Metrics().Snapshot() {
				if x.Operator == "agent" && x.Name == name {
					return x
				}
			}
			t.Fatalf("no metric %s", name)
			return runtime.Metric{}
		}
		act := get(MetricActionLatency)
		if act.Labels[0].Value != "chat" || act.Histogram.Count != inputs {
			t.Fatalf("action latency %+v %+v", act, act.Histogram)
		}
		// Every run took at least the model's 30 ms (virtual): none in the
		// buckets below 25 ms; the one with the 429 waited 2 s more.
		h := act.Histogram
		for i, b := range h.Bounds {
			if b < 0.025 && h.Cumulative[i] != 0 {
				t.Fatalf("%d runs at or below %vs", h.Cumulative[i], b)
			}
			if b == 1 && h.Cumulative[i] != inputs-1 {
				t.Fatalf("%d runs at or below 1s, want %d", h.Cumulative[i], inputs-1)
			}
		}
		if mc := get(MetricModelLatency); mc.Labels[0].Value != "m" || mc.Histogram.Count != inputs {
			t.Fatalf("model latency %+v", mc.Histogram)
		}
		if r, rl := get(MetricModelRetries).Value, get(MetricModelRateLimited).Value; r != 1 || rl != 1 {
			t.Fatalf("retries %d, rate-limited retries %d; want 1 and 1", r, rl)
		}
		if in := get(MetricModelInputTokens).Value; in != 3*inputs {
			t.Fatalf("input tokens %d", in)
		}
	})
}

// TestModelSpendMetric: with a price table the spend of the model calls
// is counted in micros of the currency, priced by the model that answered
// (else by the agent's name for it); without a table there is no metric.
func TestModelSpendMetric(t *testing.T) {
	const inputs = 4
	for _, c := range []struct {
		name    string
		answers string // Response.Model
		pricing model.Pricing
		want    int64 // micros; -1: no metric
	}{
		{"by answering model", "gpt-x", model.Pricing{"gpt-x": {Input: 2, Output: 10}, "m": {Input: 1000, Output: 1000}}, inputs * (3*2 + 2*10)},
		{"by agent name", "unpriced", model.Pricing{"m": {Input: 1, Output: 1}}, inputs * 5},
		{"no price", "unpriced", model.Pricing{"other": {Input: 1, Output: 1}}, 0},
		{"no table", "gpt-x", nil, -1},
	} {
		raw := model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
			return &model.Response{Model: c.answers, Message: model.Assistant("ok"), Usage: model.Usage{PromptTokens: 3, CompletionTokens: 2}}, nil
		})
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.Generate(env, "inputs", inputs, func(i int64) weir.Record[msg] {
			return weir.Record[msg]{Value: msg{Key: strconv.Itoa(int(i)), Text: "x"}, Timestamp: i}
		}, watermark.ForMonotonous[msg]())
		record(Apply[string, msg, string](weir.KeyBy(src, keyOfMsg), "agent", chatAgent(raw), Options{Pricing: c.pricing}))
		if err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := int64(-1)
		for _, x := range env.Metrics().Snapshot() {
			if x.Operator == "agent" && x.Name == MetricModelSpendMicros {
				if x.Labels[0].Value != "m" {
					t.Errorf("%s: label %v, want model m", c.name, x.Labels)
				}
				got = x.Value
			}
		}
		if got != c.want {
			t.Errorf("%s: spend %d micros, want %d", c.name, got, c.want)
		}
	}
	if err := (Options{Pricing: model.Pricing{"m": {Input: -1}}}).Validate(); err == nil {
		t.Error("a negative price is accepted")
	}
}
