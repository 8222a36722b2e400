package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/pipeline"
)

// writeTickets writes n tickets, one per key, and returns the file.
func writeTickets(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"ticket":"t-%03d","item":"sku-%d","text":"wrong size","time":%d}`+"\n", i, i%4, 1767225600000+int64(i)*60000)
	}
	path := filepath.Join(dir, "tickets.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// unreachableAgent is a pipeline whose agent step calls a model at an
// address nobody listens on, with continueOnError; deadLetters, if set,
// names the step's dead-letter output (a file sink in dir).
func unreachableAgent(in, dir, deadLetters string) string {
	dl, outputs := "", ""
	if deadLetters != "" {
		dl = "    deadLetters: " + deadLetters + "\n"
		outputs = fmt.Sprintf("outputs:\n  %s:\n    file: {dir: %s}\n", deadLetters, filepath.Join(dir, deadLetters))
	}
	return fmt.Sprintf(`name: unreachable
job: {parallelism: 2}
source:
  file: {paths: [%s]}
  timestamp: time
steps:
  - keyBy: ticket
  - name: reply
    agent:
      model: {url: "http://127.0.0.1:1/v1", name: none}
      prompt: 'Ticket {{.ticket}}: {{.text}}'
      continueOnError: true
%ssink:
  file: {dir: %s}
%s`, in, dl, filepath.Join(dir, "out"), outputs)
}

// TestAgentFailedInputsAreDeadLetters: an agent step with continueOnError
// whose model is unreachable loses no input: each becomes a dead letter of
// the step with the cause, the action, the key, the input's sequence
// number and the run's id; the summary counts them; without a dead-letter
// output they are counted as dropped.
func TestAgentFailedInputsAreDeadLetters(t *testing.T) {
	const n = 12
	for _, routed := range []bool{true, false} {
		t.Run(fmt.Sprintf("routed=%v", routed), func(t *testing.T) {
			dir := t.TempDir()
			in := writeTickets(t, dir, n)
			out := ""
			if routed {
				out = "failed"
			}
			file := filepath.Join(dir, "p.yaml")
			if err := os.WriteFile(file, []byte(unreachableAgent(in, dir, out)), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, err := pipeline.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			s, err := pipeline.Run(context.Background(), spec, pipeline.Options{Logger: discardLogger()}, &log)
			if err != nil {
				t.Fatal(err)
			}
			if s.SourceRecords != n || s.Outputs["sink"] != 0 || s.DeadLetters != n {
				t.Fatalf("summary %+v; want %d records in, 0 to the sink, %d dead letters", s, n, n)
			}
			if !routed {
				if s.DeadLettersDropped != n || s.Dropped != n || !strings.Contains(log.String(), fmt.Sprintf("%d records a step failed on, LOST", n)) {
					t.Fatalf("summary %+v, lines\n%s\nwant %d dropped, said so", s, log.String(), n)
				}
				return
			}
			if s.DeadLettersDropped != 0 || s.Dropped != 0 || !strings.Contains(log.String(), fmt.Sprintf("%d records a step failed on, sent to dead-letter outputs", n)) {
				t.Fatalf("summary %+v, lines\n%s", s, log.String())
			}
			dead := committed(t, filepath.Join(dir, "failed"))
			seen := map[string]bool{}
			for _, d := range dead {
				v, _ := d["value"].(map[string]any)
				ticket, _ := v["ticket"].(string)
				reason, _ := d["reason"].(string)
				if d["step"] != "reply" || d["action"] != "respond" || d["key"] != ticket || d["input"] != 0.0 || len(fmt.Sprint(d["runId"])) != 32 ||
					!strings.Contains(reason, "connection refused") || !strings.Contains(reason, file+":9:5") {
					t.Errorf("dead letter %v", d)
				}
				seen[ticket] = true
			}
			if len(dead) != n || len(seen) != n {
				t.Fatalf("%d dead letters of %d tickets; want every one of the %d once", len(dead), len(seen), n)
			}
		})
	}
}

// TestBadInputEveryStepKind runs bad input through every kind of step and
// checks where each bad record goes; none is lost without a count:
//
//   - the source: a line that is not JSON and one without a timestamp are
//     source dead letters (counted; dropped, and said so, without
//     source.deadLetters);
//   - filter, map and an agent's prompt: TestStepDeadLetters;
//   - the agent's actions: TestAgentFailedInputsAreDeadLetters;
//   - keyBy on a missing field: the key "" (the record goes on);
//   - window aggregates: a value that is not a number is skipped by sum,
//     the record counted by count; a record too late for its window is
//     counted in LateDropped without a late output;
//   - sort: a tiebreak that fails counts as 0, the record goes on.
func TestBadInputEveryStepKind(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"id":1,"time":1000,"user":"a","amount":5}`,
		`not json`,
		`{"id":2,"user":"a","amount":5}`,               // no timestamp
		`{"id":3,"time":2000,"amount":7}`,              // no user: key ""
		`{"id":4,"time":3000,"user":"a","amount":"x"}`, // not a number
		`{"id":5,"time":70000,"user":"b","amount":1}`,  // closes the first minute
		`{"id":6,"time":4000,"user":"a","amount":100}`, // late
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "p.yaml")
	src := fmt.Sprintf(`source:
  file: {paths: [%s], ordered: true}
  timestamp: time
  watermark: {emit: every-record}
steps:
  - keyBy: user
  - sort: {tiebreak: ["id / 0 > 1"]}
  - keyBy: user
  - window:
      tumbling: 1m
      aggregate: {n: count, total: sum(amount)}
sink:
  stdout: {}
`, in)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := pipeline.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out, log bytes.Buffer
	s, err := pipeline.Run(context.Background(), spec, pipeline.Options{Stdout: &out, Logger: discardLogger()}, &log)
	if err != nil {
		t.Fatal(err)
	}
	if s.SourceRecords != 5 || s.SourceDeadLetters != 2 || s.Dropped != 2 || s.LateDropped != 1 {
		t.Fatalf("summary %+v; want 5 records, 2 source dead letters dropped, 1 late dropped", s)
	}
	for _, want := range []string{"DROPPED", "2 records the source could not decode", "1 records too late"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("summary lines lack %q:\n%s", want, log.String())
		}
	}
	got := out.String()
	for _, want := range []string{`"n":2,"total":5,"user":"a"`, `"n":1,"total":7,"user":""`, `"n":1,"total":1,"user":"b"`} {
		if !strings.Contains(got, want) {
			t.Errorf("windows lack %s:\n%s", want, got)
		}
	}
}
