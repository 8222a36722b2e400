package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSimReplaysOneSeed(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "--seed", "3"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	if !strings.HasPrefix(out.String(), "seed 3: ok") || !strings.Contains(out.String(), "sim: 1 seeds, 0 failures") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestSimJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "--seeds", "3", "--seed", "10", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var sum struct {
		Seeds, Failures int
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Seeds != 3 || sum.Failures != 0 {
		t.Fatalf("last line %q: %+v %v", lines[len(lines)-1], sum, err)
	}
}

// A time-boxed random batch prints its first seed and stops long before
// its million seeds.
func TestSimRandomTimeBoxed(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "--random", "--seeds", "1000000", "--duration", "500ms", "--workers", "1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	got := out.String()
	if !strings.HasPrefix(got, "sim: random first seed ") || !strings.Contains(got, "--seeds 1000000)") {
		t.Fatalf("output does not start with the random first seed:\n%s", got)
	}
	if strings.Contains(got, "sim: 1000000 seeds") || !strings.Contains(got, " failures, ") {
		t.Fatalf("the batch was not stopped by --duration:\n%s", got)
	}
}
