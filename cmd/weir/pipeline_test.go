package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/pipeline"
)

// TestValidateExamples: `weir validate` accepts every example pipeline.
func TestValidateExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/pipelines/*.yaml")
	if len(files) < 4 {
		t.Fatalf("examples: %v", files)
	}
	var out, errb bytes.Buffer
	if code := run(append([]string{"validate"}, files...), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), ": ok ("); n != len(files) {
		t.Errorf("%d ok lines for %d files:\n%s", n, len(files), out.String())
	}
}

// TestBadPipelineExits2: `weir validate` and `weir run` report a bad file
// with exit status 2, one line per problem naming file:line:column, and do
// no work (nothing on stdout).
func TestBadPipelineExits2(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	src := "source:\n  file: {paths: [in.jsonl]}\n  timestamp: time\nsteps:\n  - filter: amount >\n  - keyBy: user\nsink:\n  stdout: {}\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"validate", "run"} {
		var out, errb bytes.Buffer
		code := run([]string{cmd, bad}, &out, &errb)
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want 2, nothing, two lines", cmd, code, out.String(), errb.String())
		}
		if !strings.HasPrefix(lines[0], "weir "+cmd+": "+bad+":5:") || !strings.Contains(lines[1], bad+":6:5: steps[1].keyBy: must be followed by") {
			t.Errorf("%s: stderr %q", cmd, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"run", filepath.Join(dir, "missing.yaml")}, &out, &errb); code != 2 {
		t.Errorf("missing file: exit %d, stderr %q", code, errb.String())
	}
	if code := run([]string{"run", bad, "--parallelism", "-1"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--parallelism -1") {
		t.Errorf("bad flag: exit %d, stderr %q", code, errb.String())
	}
	// The stop's savepoint, the dashboard address and a restore location
	// are checked before any work, each in one line naming the flag.
	good := "../../examples/pipelines/windowed-count.yaml"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--savepoint-dir", dir}, "--savepoint-dir"}, // holds bad.yaml
		{[]string{"--savepoint-dir", "ftp://x/y"}, "--savepoint-dir"},
		{[]string{"--restore", "ftp://x/y"}, "--restore"},
		{[]string{"--ui-addr", "nonsense"}, "--ui-addr"},
	} {
		out.Reset()
		errb.Reset()
		code := run(append([]string{"run", good}, c.args...), &out, &errb)
		if code != 2 || out.Len() != 0 || strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("weir run %v: exit %d, stdout %q, stderr %q; want 2 and one line naming %s", c.args, code, out.String(), errb.String(), c.want)
		}
	}
}

// TestRunWindowedCount runs an example through `weir run` itself.
func TestRunWindowedCount(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"run", "../../examples/pipelines/windowed-count.yaml", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `"outputs":{"bad-lines":2,"late-clicks":1,"sink":32}`) {
		t.Errorf("summary not found in stdout:\n%s", out.String())
	}
}

// TestRunAgentUnreachableModel: agent-offline.yaml with its model at an
// address nobody listens on and continueOnError loses none of its 40
// tickets through `weir run`: with a dead-letter output each is a dead
// letter naming the cause (exit 0, the summary counts them); without one
// the summary says they were dropped and the exit status is 3.
func TestRunAgentUnreachableModel(t *testing.T) {
	example, err := os.ReadFile("../../examples/pipelines/agent-offline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tickets, _ := filepath.Abs("../../examples/pipelines/tickets.jsonl")
	for _, routed := range []bool{true, false} {
		t.Run(fmt.Sprintf("routed=%v", routed), func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("WEIR_OUT", dir)
			y := string(example)
			for _, r := range [][2]string{
				{"paths: [tickets.jsonl]", "paths: [" + tickets + "]"},
				{"offline: {seed: 7, latency: 1ms}", `{url: "http://127.0.0.1:1/v1", name: none}` + "\n      continueOnError: true"},
				// One key per ticket, so that the 40 failing calls (4
				// attempts each) run at once.
				{"  - keyBy: item\n  - agent:", "  - keyBy: ticket\n  - agent:"},
			} {
				if !strings.Contains(y, r[0]) {
					t.Fatalf("agent-offline.yaml lacks %q", r[0])
				}
				y = strings.Replace(y, r[0], r[1], 1)
			}
			if routed {
				y = strings.Replace(y, "  timestamp: time\n", "  timestamp: time\n  deadLetters: failed\n", 1)
				y += "outputs:\n  failed:\n    file: {dir: " + filepath.Join(dir, "failed") + "}\n"
			}
			file := filepath.Join(dir, "agent.yaml")
			if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := run([]string{"run", file, "--json"}, &out, &errb)
			var s pipeline.Summary
			if err := json.Unmarshal(out.Bytes(), &s); err != nil {
				t.Fatalf("exit %d, stdout %q: %v\n%s", code, out.String(), err, errb.String())
			}
			if s.SourceRecords != 40 || s.Outputs["sink"] != 0 || s.DeadLetters != 40 {
				t.Fatalf("summary %+v; want 40 in, 0 to the sink, 40 dead letters", s)
			}
			if !routed {
				if code != 3 || s.Dropped != 40 || !strings.Contains(errb.String(), "40 records were dropped") {
					t.Fatalf("exit %d, summary %+v, stderr\n%s\nwant 3 and 40 dropped, said so", code, s, errb.String())
				}
				return
			}
			if code != 0 || s.Dropped != 0 || s.Outputs["failed"] != 40 || !strings.Contains(errb.String(), "40 records a step failed on, sent to dead-letter outputs") {
				t.Fatalf("exit %d, summary %+v, stderr\n%s", code, s, errb.String())
			}
			parts, err := committedLines(filepath.Join(dir, "failed"))
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != 40 {
				t.Fatalf("%d dead letters committed, want 40", len(parts))
			}
			for _, d := range parts {
				if !strings.Contains(d, "connection refused") || !strings.Contains(d, `"action":"respond"`) || !strings.Contains(d, `"runId"`) {
					t.Fatalf("dead letter without its cause, action or run id: %s", d)
				}
			}
		})
	}
}

// committedLines returns the committed lines of an exactly-once file
// sink's directory.
func committedLines(dir string) ([]string, error) {
	parts, err := file.Committed(dir)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, b := range parts {
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	return lines, nil
}

// TestValidateNeverPrintsSecrets: `weir validate` of a file with SASL over
// TLS names the security and not the password (from the environment); a
// literal password is refused without being repeated.
func TestValidateNeverPrintsSecrets(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WEIR_TEST_SASL_PASSWORD", "Env-s3cret-value")
	good := filepath.Join(dir, "good.yaml")
	src := "kafka:\n  brokers: [\"h:9092\"]\n  tls: true\n  sasl:\n    mechanism: SCRAM-SHA-512\n    username: weir\n    password: \"${WEIR_TEST_SASL_PASSWORD}\"\nsource: {kafka: {topics: [in]}}\nsink: {stdout: {}}\n"
	if err := os.WriteFile(good, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(src, `"${WEIR_TEST_SASL_PASSWORD}"`, "Literal-s3cret-value", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"validate", good}, &out, &errb); code != 0 || !strings.Contains(out.String(), "SASL_SSL SCRAM-SHA-512 user weir") {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"validate", bad}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "bad.yaml:7:15: kafka.sasl.password: a literal secret is refused") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if all := out.String() + errb.String(); strings.Contains(all, "s3cret-value") {
		t.Fatalf("a secret is printed:\n%s", all)
	}
}
