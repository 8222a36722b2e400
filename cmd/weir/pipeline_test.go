package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
