package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

func TestHandlerServesJobMetrics(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "numbers", []int64{1, 2, 3, 4, 5, 6}, watermark.ForMonotonous[int64]().
		WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, v != 4 }))
	weir.Collect(weir.Map(src, "double", func(v int64) int64 { return 2 * v }))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(env.Metrics()))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`weir_records_read{operator="numbers",subtask="0"}`,
		`weir_dead_letters{operator="numbers",subtask="1"} 1`,
		`# TYPE weir_watermark gauge`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	if Name("lastCheckpointMillis") != "weir_last_checkpoint_millis" {
		t.Fatal(Name("lastCheckpointMillis"))
	}
}

// Labelled gauges and counters (runtime.Context.LabeledGauge,
// LabeledCounter) keep their labels after operator and subtask.
func TestLabeledGauges(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "numbers", []int64{1, 2, 3}, watermark.ForMonotonous[int64]().
		WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, true }))
	weir.Transform(src, "labels", func() runtime.OneInputOperator[int64, int64] { return &labelOp{} })
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(env.Metrics()))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`weir_last_value{operator="labels",subtask="0",topic="odd"} 3`,
		`weir_last_value{operator="labels",subtask="0",topic="even"} 2`,
		`# TYPE weir_values_seen counter`,
		`weir_values_seen{operator="labels",subtask="0",topic="odd"} 2`,
		`weir_values_seen{operator="labels",subtask="0",topic="even"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %q in:\n%s", want, body)
		}
	}
}

type labelOp struct{ runtime.Base[int64] }

func (o *labelOp) ProcessRecord(r runtime.Record[int64]) error {
	topic := "even"
	if r.Value%2 == 1 {
		topic = "odd"
	}
	o.Ctx.LabeledGauge("lastValue", runtime.Label{Name: "topic", Value: topic}).Set(r.Value)
	o.Ctx.LabeledCounter("valuesSeen", runtime.Label{Name: "topic", Value: topic}).Inc()
	return nil
}

func (o *labelOp) EndInput() error { return nil }
