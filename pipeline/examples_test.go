package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/internal/demo"
	"github.com/weirproject/weir/pipeline"
)

// The examples under examples/pipelines run here through pipeline.Run, the
// code path of `weir run`, with their outputs asserted.

const examples = "../examples/pipelines"

func parse(t *testing.T, name string) *pipeline.Spec {
	t.Helper()
	s, err := pipeline.ParseFile(filepath.Join(examples, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// TestExamplesValidate: every example is a valid pipeline (`weir validate`).
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examples, "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := pipeline.ParseFile(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func lines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func committed(t *testing.T, dir string) []map[string]any {
	t.Helper()
	parts, err := file.Committed(dir)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	var all []byte
	for _, b := range parts {
		all = append(all, b...)
	}
	return lines(t, all)
}

func TestWindowedCountExample(t *testing.T) {
	var out bytes.Buffer
	s, err := pipeline.Run(context.Background(), parse(t, "windowed-count.yaml"), pipeline.Options{Stdout: &out}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// 63 lines: 2 dead letters, 61 records; 18 on /help are filtered out,
	// one (ana at 00:00:01, line 51) arrives after its window fired.
	want := map[string]int64{"sink": 32, "bad-lines": 2, "late-clicks": 1}
	for k, v := range want {
		if s.Outputs[k] != v {
			t.Errorf("output %s: %d records, want %d (all: %v)", k, s.Outputs[k], v, s.Outputs)
		}
	}
	if s.SourceRecords != 61 {
		t.Errorf("source records %d, want 61", s.SourceRecords)
	}
	var clicks float64
	var late, dead int
	for _, r := range lines(t, out.Bytes()) {
		switch {
		case r["windowStart"] != nil:
			clicks += r["clicks"].(float64)
			if r["page"] != nil {
				t.Errorf("window result with a record's field: %v", r)
			}
		case r["reason"] != nil:
			dead++
		default:
			late++
			if r["user"] != "ana" || r["time"].(float64) != 1767225601000 {
				t.Errorf("late record %v, want ana's at 1767225601000", r)
			}
		}
	}
	if clicks != 61-18-1 || late != 1 || dead != 2 {
		t.Errorf("clicks %v late %d dead %d, want 42, 1, 2", clicks, late, dead)
	}
}

func TestKafkaFilterExample(t *testing.T) {
	t.Setenv("WEIR_OUT", t.TempDir())
	ctx := context.Background()
	j, err := pipeline.Build(ctx, parse(t, "kafka-filter.yaml"), pipeline.Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	job, err := j.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	// Read big-orders as a read_committed consumer: only committed
	// transactions, each order once.
	cl, err := kgo.NewClient(kgo.SeedBrokers(j.Brokers...), kgo.ConsumeTopics("big-orders"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < 69 && time.Now().Before(deadline) {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var m map[string]any
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatalf("%s", r.Value)
			}
			id := m["id"].(string)
			if seen[id] {
				t.Errorf("order %s twice", id)
			}
			seen[id] = true
			if m["amount"].(float64) < 250 || m["big"] != true || string(r.Key) != m["customer"] {
				t.Errorf("record %s key %s", r.Value, r.Key)
			}
		})
	}
	if len(seen) != 69 {
		t.Errorf("%d orders in big-orders, want the 69 of 250 or more", len(seen))
	}
	if n := job.Metrics().Sum("output-bad-records", "recordsIn"); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
}

func TestAgentOfflineExample(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WEIR_OUT", dir)
	s, err := pipeline.Run(context.Background(), parse(t, "agent-offline.yaml"), pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs["sink"] != 40 {
		t.Errorf("%d replies, want 40", s.Outputs["sink"])
	}
	replies := committed(t, filepath.Join(dir, "agent-offline", "replies"))
	tickets := map[string]bool{}
	last := map[string]float64{}
	for _, r := range replies {
		tickets[r["ticket"].(string)] = true
		if !strings.Contains(r["reply"].(string), r["ticket"].(string)) || r["text"] != nil {
			t.Errorf("reply %v", r)
		}
		// Per item, the agent saw tickets in event-time order (sorted) and
		// its outputs keep that order within a subtask's file.
		if ts := r["time"].(float64); ts < last[r["item"].(string)] {
			t.Errorf("item %s: %v after %v", r["item"], ts, last[r["item"].(string)])
		}
		last[r["item"].(string)] = r["time"].(float64)
	}
	if len(tickets) != 40 {
		t.Errorf("%d distinct tickets answered, want 40", len(tickets))
	}
	if _, err := os.Stat(filepath.Join(dir, "agent-offline", "wal")); err != nil {
		t.Errorf("no action-state WAL: %v", err)
	}
}

// TestDemoPipelineMatchesDemo runs `weir demo` on a persistent broker, then
// examples/pipelines/demo.yaml on the same data, and compares the figures.
// The demo runs without held-back records: in a replay those are read in
// order with the rest (the watermark is still held by partitions replaying
// history), so they are neither order violations nor late, while the live
// demo cannot sort them (docs/pipelines.md says so).
func TestDemoPipelineMatchesDemo(t *testing.T) {
	data, out := t.TempDir(), t.TempDir()
	ds, err := demo.Run(context.Background(), io.Discard, demo.Options{Orders: 20_000, Seed: 3, KafkaData: data,
		Live: 300 * time.Millisecond, Rate: 1000, HeldBack: -1})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Late != 0 {
		// The live phase is read as it is produced, in real time: on a
		// loaded machine some of its records can come behind the watermark
		// in the demo, never in the pipeline, which reads them as history.
		// The figures then depend on the load, not on the pipeline.
		t.Skipf("the demo's live phase had %d late records (a loaded machine); nothing to compare", ds.Late)
	}
	t.Setenv("WEIR_KAFKA_DATA", data)
	t.Setenv("WEIR_OUT", out)
	ps, err := pipeline.Run(context.Background(), parse(t, "demo.yaml"), pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var windowed, amount float64
	for _, r := range committed(t, filepath.Join(out, "demo", "totals")) {
		windowed += r["events"].(float64)
		amount += r["amount"].(float64)
	}
	var late, lateAmount float64
	for _, r := range committed(t, filepath.Join(out, "demo", "late")) {
		late++
		lateAmount += r["amount"].(float64)
	}
	violations := len(committed(t, filepath.Join(out, "demo", "violations")))
	decisions := committed(t, filepath.Join(out, "demo", "decisions"))
	orders := map[string]bool{}
	for _, d := range decisions {
		orders[d["id"].(string)] = true
	}
	got := map[string]int64{
		"sorted": ps.SourceRecords, "totals": ps.Outputs["sink"], "windowed": int64(windowed), "amount": int64(amount),
		"late": int64(late), "lateAmount": int64(lateAmount), "orderViolations": int64(violations),
		"deadLetters": ps.Outputs["dead-letters"], "agentDecisions": int64(len(decisions)), "agentDecided": int64(len(orders)),
	}
	want := map[string]int64{
		"sorted": ds.Sorted, "totals": ds.Totals, "windowed": ds.Windowed, "amount": ds.Amount,
		"late": ds.Late, "lateAmount": ds.LateAmount, "orderViolations": ds.OrderViolations,
		"deadLetters": ds.DeadLetters, "agentDecisions": ds.AgentDecisions, "agentDecided": ds.AgentDecided,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: pipeline %d, demo %d", k, got[k], w)
		}
	}
	if ds.AgentInputs == 0 || ds.Totals == 0 || ds.DeadLetters == 0 {
		t.Fatalf("the demo produced too little to compare: %+v", ds)
	}
}
