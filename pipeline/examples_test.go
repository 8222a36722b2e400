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
// examples/pipelines/demo.yaml on the same data, and compares them. The
// demo runs without held-back records: in a replay those are read in order
// with the rest (the watermark is still held by partitions replaying
// history), so they are neither order violations nor late, while the live
// demo cannot sort them (docs/pipelines.md says so).
//
// The demo reads its live phase as it is produced: on a loaded machine a
// live record can reach its sort behind the watermark (an order violation,
// emitted in place) and its window after the window fired (late). The
// pipeline reads the same records as a replay, every partition in
// timestamp order, so it has neither. What does not depend on that timing
// is compared on every run: the records, the dead letters and the agent's
// orders, no history record a violation or late in either, no record late
// or a violation in the pipeline, and window by window the demo's total
// plus the demo's late records of that window equal the pipeline's total
// (so every window without a late record, every history window among
// them, is equal). The demo's own totals, late records and violations are
// compared as they are only when its live phase had none.
func TestDemoPipelineMatchesDemo(t *testing.T) {
	data, out := t.TempDir(), t.TempDir()
	ds, err := demo.Run(context.Background(), io.Discard, demo.Options{Orders: 20_000, Seed: 3, KafkaData: data,
		Live: 300 * time.Millisecond, Rate: 1000, HeldBack: -1})
	if err != nil {
		t.Fatal(err)
	}
	if ds.History != 20_000 || ds.Live == 0 || ds.AgentInputs == 0 || ds.Malformed == 0 || ds.Totals == 0 {
		t.Fatalf("the demo produced too little to compare: %+v", ds)
	}
	t.Setenv("WEIR_KAFKA_DATA", data)
	t.Setenv("WEIR_OUT", out)
	ps, err := pipeline.Run(context.Background(), parse(t, "demo.yaml"), pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("demo: %d history + %d live records, %d late, %d order violations (%d history); pipeline outputs %v",
		ds.History, ds.Live, ds.Late, ds.OrderViolations, ds.HistoryViolations, ps.Outputs)

	// Records in, dead letters, and what neither run may have.
	records := ds.History + ds.Live + ds.HeldBack
	if ds.Sorted != records || ps.SourceRecords != records {
		t.Errorf("records sorted: demo %d, pipeline %d; want the %d produced", ds.Sorted, ps.SourceRecords, records)
	}
	if ps.Outputs["dead-letters"] != ds.Malformed || ds.DeadLetters != ds.Malformed {
		t.Errorf("dead letters: pipeline %d, demo %d; want the %d malformed records", ps.Outputs["dead-letters"], ds.DeadLetters, ds.Malformed)
	}
	if ds.HistoryViolations != 0 {
		t.Errorf("demo: %d history records behind the sort's watermark, want 0 (every partition is in timestamp order)", ds.HistoryViolations)
	}
	violations := committed(t, filepath.Join(out, "demo", "violations"))
	lateRecs := committed(t, filepath.Join(out, "demo", "late"))
	if len(violations) != 0 || len(lateRecs) != 0 {
		t.Errorf("pipeline: %d order violations and %d late records, want 0: it replays every partition in timestamp order (first: %v %v)",
			len(violations), len(lateRecs), first(violations), first(lateRecs))
	}

	// Window by window: the demo's total plus its late records of that
	// window is the pipeline's total.
	type win struct {
		customer string
		start    int64
	}
	type sum struct{ events, amount int64 }
	pipe, dem, late := map[win]sum{}, map[win]sum{}, map[win]sum{}
	var windowed, amount int64
	for _, r := range committed(t, filepath.Join(out, "demo", "totals")) {
		w := win{r["customer"].(string), int64(r["windowStart"].(float64))}
		if _, dup := pipe[w]; dup {
			t.Errorf("pipeline: window %v emitted twice", w)
		}
		pipe[w] = sum{int64(r["events"].(float64)), int64(r["amount"].(float64))}
		windowed += pipe[w].events
		amount += pipe[w].amount
	}
	if windowed != records || amount != ds.ProducedAmount {
		t.Errorf("pipeline windows: %d records, amount %d; want all %d, amount %d", windowed, amount, records, ds.ProducedAmount)
	}
	for _, tot := range ds.Windows {
		w := win{tot.Customer, tot.WindowStart}
		if _, dup := dem[w]; dup {
			t.Errorf("demo: window %v emitted twice", w)
		}
		dem[w] = sum{tot.Events, tot.Amount}
	}
	const hour = int64(time.Hour / time.Millisecond) // demo.yaml's and the demo's window
	for _, e := range ds.LateRecords {
		if !e.Live {
			t.Errorf("demo: history record late: %+v", e)
		}
		w := win{e.Customer, e.Time - e.Time%hour}
		late[w] = sum{late[w].events + 1, late[w].amount + e.Amount}
	}
	all := map[win]bool{}
	for _, m := range []map[win]sum{pipe, dem, late} {
		for w := range m {
			all[w] = true
		}
	}
	bad := 0
	for w := range all {
		d, l, p := dem[w], late[w], pipe[w]
		if d.events+l.events != p.events || d.amount+l.amount != p.amount {
			if bad++; bad <= 5 {
				t.Errorf("window %s %s: demo %+v + late %+v, pipeline %+v", w.customer,
					time.UnixMilli(w.start).UTC().Format("2006-01-02 15:04"), d, l, p)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d windows differ in all (of %d)", bad, len(all))
	}

	// The agent: one decision for every live order, the same orders.
	demoOrders, pipeOrders := map[string]bool{}, map[string]bool{}
	for _, d := range ds.Decisions {
		demoOrders[d.Order] = true
	}
	decisions := committed(t, filepath.Join(out, "demo", "decisions"))
	for _, d := range decisions {
		pipeOrders[d["id"].(string)] = true
	}
	if int64(len(demoOrders)) != ds.AgentInputs || ds.AgentDecisions != ds.AgentInputs ||
		int64(len(decisions)) != ds.AgentInputs || int64(len(pipeOrders)) != ds.AgentInputs {
		t.Errorf("agent: %d live orders; demo %d decisions of %d orders, pipeline %d of %d", ds.AgentInputs,
			ds.AgentDecisions, len(demoOrders), len(decisions), len(pipeOrders))
	}
	for id := range demoOrders {
		if !pipeOrders[id] {
			t.Errorf("order %s decided by the demo, not by the pipeline", id)
			break
		}
	}

	// The demo's figures as they are, when its live phase read every
	// record in time.
	if ds.Late == 0 {
		got := map[string]int64{"totals": ps.Outputs["sink"], "windowed": windowed, "amount": amount, "late": int64(len(lateRecs))}
		want := map[string]int64{"totals": ds.Totals, "windowed": ds.Windowed, "amount": ds.Amount, "late": ds.Late}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: pipeline %d, demo %d", k, got[k], w)
			}
		}
	}
}

// first returns the first of rs, or nil.
func first(rs []map[string]any) map[string]any {
	if len(rs) == 0 {
		return nil
	}
	return rs[0]
}

// TestAvroOrdersExample: orders.jsonl produced as Avro through the
// embedded registry, counted per customer and minute, written as Avro;
// the line that is not JSON is the one dead letter (not the wire format).
func TestAvroOrdersExample(t *testing.T) {
	var out bytes.Buffer
	s, err := pipeline.Run(context.Background(), parse(t, "avro-orders.yaml"), pipeline.Options{Stdout: &out}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.SourceRecords != 200 || s.SourceDeadLetters != 1 || s.Outputs["sink"] != 58 {
		t.Fatalf("summary %+v; want 200 records, 1 dead letter, 58 counts", s)
	}
	if !strings.Contains(out.String(), "not the magic byte") {
		t.Fatalf("dead letter %q; want it to say the magic byte is wrong", out.String())
	}
}
