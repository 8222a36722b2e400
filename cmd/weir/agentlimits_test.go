package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateAgentLimits: `weir validate` reports bad agent budgets, rate
// limits and event logs at their file:line:column with exit status 2.
func TestValidateAgentLimits(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "limits.yaml")
	src := `source:
  file: {paths: [in.jsonl]}
  timestamp: time
steps:
  - keyBy: user
  - agent:
      prompt: 'Review {{.id}}'
      continueOnError: true
      model: {offline: {}, rateLimit: {requests: 0}}
      budgets:
        - {name: per-user, tokens: 100000, window: 24h, onLimit: later}
      eventLog: {}
sink:
  stdout: {}
`
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"validate", bad}, &out, &errb)
	if code != 2 || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and nothing on stdout", code, out.String(), errb.String())
	}
	for _, want := range []string{
		bad + ":9:", "steps[1].agent.model.rateLimit.requests: 0 is out of range",
		bad + ":11:", `steps[1].agent.budgets[0].onLimit: "later": want one of fail, wait, fallback`,
		bad + ":12:", "steps[1].agent.eventLog: want exactly one of file (a path) or kafka ({topic})",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
}
