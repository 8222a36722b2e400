package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/eventlog"
)

// TestAgentLogFile: `weir agent log --file F --key K` prints K's entries,
// one line each, in file order; --json prints them as JSON lines.
func TestAgentLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	w, err := eventlog.CreateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []agent.LogEntry{
		{Key: "a", Action: "ask", Kind: agent.LogActionStart},
		{Key: "b", Action: "ask", Kind: agent.LogActionStart},
		{Key: "a", Action: "ask", Kind: agent.LogModelCall, Name: "llm"},
		{Key: "a", Action: "ask", Kind: agent.LogOutput, Data: "hello", Replayed: true},
	} {
		w.OnEntry(&e)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"agent", "log", "--file", path, "--key", "a"}, &out, &errb); code != 0 {
		t.Fatalf("exit status %d, stderr %q", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "key=a") || !strings.Contains(lines[1], "model_call llm") ||
		!strings.Contains(lines[2], `output (replayed) "hello"`) {
		t.Fatalf("output:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"agent", "log", "--file", path, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit status %d, stderr %q", code, errb.String())
	}
	if n := strings.Count(out.String(), `"kind":`); n != 4 {
		t.Fatalf("--json printed %d entries:\n%s", n, out.String())
	}
}
