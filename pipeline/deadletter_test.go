package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/pipeline"
)

// badInput writes a JSON-lines file of n good orders and, every fifth line,
// one that breaks a step: qty a string or missing (the filter), qty 0 (the
// map's division: +Inf), customer a string where the prompt wants an
// object's field. It returns the file and how many lines break each step.
func badInput(t *testing.T, dir string, n int) (path string, filterBad, mapBad, promptBad, filteredOut int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		ts := 1767225600000 + int64(i)*1000
		switch {
		case i%5 == 1 && i%2 == 1:
			fmt.Fprintf(&b, `{"id":%d,"time":%d,"item":"i%d","qty":"many","amount":10,"customer":{"name":"c"}}`+"\n", i, ts, i%3)
			filterBad++
		case i%5 == 1:
			fmt.Fprintf(&b, `{"id":%d,"time":%d,"item":"i%d","amount":10,"customer":{"name":"c"}}`+"\n", i, ts, i%3)
			filterBad++
		case i%5 == 2:
			fmt.Fprintf(&b, `{"id":%d,"time":%d,"item":"i%d","qty":0,"amount":10,"customer":{"name":"c"}}`+"\n", i, ts, i%3)
			// qty 0 passes a filter "qty >= 0" and breaks amount / qty.
			mapBad++
		case i%5 == 3:
			fmt.Fprintf(&b, `{"id":%d,"time":%d,"item":"i%d","qty":4,"amount":10,"customer":"plain"}`+"\n", i, ts, i%3)
			promptBad++
		case i%5 == 4:
			fmt.Fprintf(&b, `{"id":%d,"time":%d,"item":"i%d","qty":-1,"amount":10,"customer":{"name":"c"}}`+"\n", i, ts, i%3)
			filteredOut++
		default:
			fmt.Fprintf(&b, `{"id":%d,"time":%d,"item":"i%d","qty":2,"amount":10,"customer":{"name":"c"}}`+"\n", i, ts, i%3)
		}
	}
	path = filepath.Join(dir, "orders.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, filterBad, mapBad, promptBad, filteredOut
}

// TestStepDeadLetters (P7): records that break a filter, a map and an
// agent's prompt do not stop the job. It runs to its end; the good records
// are in the sink, each bad one is in its step's dead-letter output (the
// map's own, the others' the source's) with a reason naming the step's
// file:line:col and what went wrong, and the counts add up.
func TestStepDeadLetters(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism-%d", par), func(t *testing.T) {
			dir := t.TempDir()
			const n = 200
			in, filterBad, mapBad, promptBad, filteredOut := badInput(t, dir, n)
			file := filepath.Join(dir, "p.yaml")
			src := fmt.Sprintf(`name: bad-input
job: {parallelism: %d}
source:
  file: {paths: [%s]}
  timestamp: time
  deadLetters: bad
steps:
  - filter: qty >= 0
  - name: unit-price
    map:
      set: {unit: amount / qty}
    deadLetters: math
  - keyBy: item
  - agent:
      model: {offline: {seed: 1}}
      prompt: 'Order {{.id}} of {{.customer.name}}: {{.qty}} units'
      output: answer
sink:
  file: {dir: %s}
outputs:
  bad:
    file: {dir: %s}
  math:
    file: {dir: %s}
`, par, in, filepath.Join(dir, "out"), filepath.Join(dir, "bad"), filepath.Join(dir, "math"))
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, err := pipeline.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			s, err := pipeline.Run(context.Background(), spec, pipeline.Options{Logger: discardLogger()}, &log)
			if err != nil {
				t.Fatalf("the job failed on bad records: %v", err)
			}
			good := n - filterBad - mapBad - promptBad - filteredOut
			sink := committed(t, filepath.Join(dir, "out"))
			bad := committed(t, filepath.Join(dir, "bad"))
			math := committed(t, filepath.Join(dir, "math"))
			if len(sink) != good || len(bad) != filterBad+promptBad || len(math) != mapBad {
				t.Fatalf("sink %d, bad %d, math %d; want %d, %d, %d", len(sink), len(bad), len(math), good, filterBad+promptBad, mapBad)
			}
			if s.SourceRecords != n || s.Outputs["sink"] != int64(good) || s.DeadLetters != int64(filterBad+mapBad+promptBad) || s.DeadLettersDropped != 0 {
				t.Errorf("summary %+v", s)
			}
			if !strings.Contains(log.String(), fmt.Sprintf("%d records a step failed on", filterBad+mapBad+promptBad)) {
				t.Errorf("summary lines:\n%s", log.String())
			}
			for _, r := range sink {
				if r["qty"].(float64) <= 0 || r["answer"] == nil {
					t.Errorf("sink has %v", r)
				}
			}
			seen := map[float64]bool{}
			for _, d := range append(bad, math...) {
				v := d["value"].(map[string]any)
				id := v["id"].(float64)
				if seen[id] {
					t.Errorf("record %v twice in the dead letters", id)
				}
				seen[id] = true
				reason, _ := d["reason"].(string)
				var want []string
				switch int(id) % 5 {
				case 1:
					want = []string{"filter at " + file + ":8:5 (qty >= 0): ", "invalid operation"}
				case 2:
					want = []string{"map at " + file + ":10:5: field unit is +Inf, which JSON cannot hold"}
				case 3:
					want = []string{"agent at " + file + ":14:5: prompt: ", "customer.name"}
				default:
					t.Errorf("record %v is a dead letter: %v", id, d)
				}
				for _, w := range want {
					if !strings.Contains(reason, w) {
						t.Errorf("record %v: reason %q lacks %q", id, reason, w)
					}
				}
				if d["at"] == nil || d["step"] == nil {
					t.Errorf("dead letter without step and position: %v", d)
				}
			}
		})
	}
}

// TestStepDeadLettersDropped: without a deadLetters output anywhere the bad
// records are dropped, counted, and the job still runs to its end.
func TestStepDeadLettersDropped(t *testing.T) {
	dir := t.TempDir()
	const n = 100
	in, filterBad, _, _, filteredOut := badInput(t, dir, n)
	file := filepath.Join(dir, "p.yaml")
	src := fmt.Sprintf("source:\n  file: {paths: [%s]}\n  timestamp: time\nsteps:\n  - filter: qty >= 0\nsink:\n  stdout: {}\n", in)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := pipeline.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{Stdout: &out, Logger: discardLogger()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.DeadLetters != int64(filterBad) || s.DeadLettersDropped != int64(filterBad) || s.Outputs["sink"] != int64(n-filterBad-filteredOut) {
		t.Errorf("summary %+v; want %d dead letters, all dropped, %d in the sink", s, filterBad, n-filterBad-filteredOut)
	}
	if got := strings.Count(out.String(), "\n"); got != n-filterBad-filteredOut {
		t.Errorf("%d lines on stdout", got)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
