package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONOnlyOnStdout: every command that prints JSON (with --json, or
// always) writes nothing else on stdout: the narrative, logs and progress
// go to stderr. Each runs in a child process, small, so that a library
// writing to os.Stdout would be caught too.
func TestJSONOnlyOnStdout(t *testing.T) {
	sp := filepath.Join(t.TempDir(), "savepoint")
	cases := []struct {
		name string
		args []string
		// key that the first JSON value must have
		key string
	}{
		{"demo", []string{"demo", "--json", "--orders", "2000", "--live", "0"}, "produced"},
		{"demo savepoint", []string{"demo", "--json", "--orders", "2000", "--live", "30s", "--rate", "100",
			"--savepoint-after", "300ms", "--savepoint-dir", sp}, "savepoint"},
		// After "demo savepoint", which writes the savepoint.
		{"savepoint inspect", []string{"savepoint", "inspect", "--json", sp}, "operators"},
		{"keys", []string{"keys", "--parallelism", "2", "a", "b"}, "keyGroup"},
		{"version", []string{"version", "--json"}, "commit"},
		// The records of its stdout sinks (JSON lines), then the summary.
		{"run", []string{"run", "--json", filepath.Join("..", "..", "examples", "pipelines", "windowed-count.yaml")}, "windowStart"},
		{"bench", []string{"bench", "--json", "--records", "20000", "--keys", "100"}, "enginePerSec"},
		{"bench checkpoint", []string{"bench", "checkpoint", "--keys", "1000", "--backend", "memory"}, "checkpointMs"},
		{"experiment ordering", []string{"experiment", "ordering", "--json", "--topics", "1", "--partitions", "2",
			"--items", "10", "--history-records", "2000", "--live", "0s", "--policy", "end-offsets", "-v"}, "policy"},
		{"experiment agent", []string{"experiment", "agent", "--json", "--inputs", "200", "--keys", "10",
			"--latency-mean", "1ms", "--blocking-inputs", "-1", "--cpu-inputs", "-1", "--stores="}, "throughputPerSec"},
		{"experiment agent http", []string{"experiment", "agent", "--json", "--inputs", "100", "--keys", "10", "--model", "http", "--stream",
			"--tree-depth", "1", "--tree-fanout", "2", "--rate-limit-rate", "0.1", "--error-rate", "0.1", "--retry-after", "1ms",
			"--retry-initial", "1ms", "--latency-mean", "1ms", "--blocking-inputs", "-1", "--cpu-inputs", "-1", "--stores=wal"}, "modelRetries"},
		{"experiment durability", []string{"experiment", "durability", "--json", "--trials", "1", "--inputs", "4",
			"--keys", "2", "--max-kills", "1", "--parallelism", "1", "--stores", "wal", "--verbose"}, "lostInputs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name == "experiment durability" {
				t.Skip("several child processes: not with -short")
			}
			stdout, stderr, code := runWeir(t, c.args...)
			if code != 0 {
				t.Fatalf("weir %s: exit status %d\nstderr:\n%s", strings.Join(c.args, " "), code, stderr)
			}
			vals := decodeJSONOnly(t, "weir "+strings.Join(c.args, " "), stdout)
			if _, ok := vals[0][c.key]; !ok {
				t.Fatalf("first JSON value has no %q: %v", c.key, vals[0])
			}
		})
	}
}
