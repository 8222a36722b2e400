package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestRunSIGTERMStopsWithSavepoint: SIGTERM stops `weir run` on an
// unbounded pipeline with a savepoint and exit status 0, and names the
// savepoint and the command that restores it; the savepoint is complete
// (weir savepoint inspect reads it).
func TestRunSIGTERMStopsWithSavepoint(t *testing.T) {
	tmp := t.TempDir()
	src, err := os.ReadFile("../../examples/pipelines/kafka-filter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The example, unbounded, with its input beside it.
	y := strings.Replace(string(src), "bounded: true", "bounded: false", 1)
	if y == string(src) {
		t.Fatal("examples/pipelines/kafka-filter.yaml no longer says bounded: true")
	}
	file := filepath.Join(tmp, "filter.yaml")
	if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile("../../examples/pipelines/orders.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "orders.jsonl"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	sp := filepath.Join(tmp, "sp")
	cmd := weirCmd(t, "run", file, "--savepoint-dir", sp)
	cmd.Env = append(cmd.Env, "WEIR_OUT="+filepath.Join(tmp, "out"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errs := watchLines(stderr, "caught up with its end offsets")
	<-errs.seen("caught up with its end offsets")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	text := errs.text()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v (want status 0)\nstderr:\n%s", err, text)
	}
	m := regexp.MustCompile(`stopped with savepoint \d+ in (\S+); resume with:\n  (weir run [^\n]+)\n`).FindStringSubmatch(text)
	if m == nil || m[1] != sp {
		t.Fatalf("stderr does not name the savepoint %s and the resume command:\n%s", sp, text)
	}
	if !strings.Contains(m[2], "--restore "+sp) || !strings.HasSuffix(m[2], file) {
		t.Errorf("resume command %q: want --restore %s and the file", m[2], sp)
	}
	if out, errOut, code := runWeir(t, "savepoint", "inspect", sp); code != 0 || !strings.Contains(out, "sink") {
		t.Fatalf("weir savepoint inspect %s: exit %d\n%s%s", sp, code, out, errOut)
	}
}
