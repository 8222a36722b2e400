package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/weirproject/weir/internal/demo"
	"github.com/weirproject/weir/internal/shutdown"
)

// TestSIGTERMStopsWithSavepoint: SIGTERM during the live phase stops
// `weir demo` with a savepoint and exit status 0; the narrative names the
// savepoint and the exact command that resumes from it; that command
// (run as printed, with a shorter live phase) restores it: it continues
// from the savepoint's Kafka offsets instead of reading the history again.
func TestSIGTERMStopsWithSavepoint(t *testing.T) {
	tmp := t.TempDir()
	sp := filepath.Join(tmp, "savepoint")
	kafkaData := filepath.Join(tmp, "kafka")
	cmd := weirCmd(t, "demo", "--orders", "20000", "--live", "2m", "--rate", "200",
		"--kafka-data", kafkaData, "--savepoint-dir", sp)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := watchLines(stdout, "every topic caught up")
	<-out.seen("every topic caught up")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	text := out.text()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v (want status 0)\nstdout:\n%s\nstderr:\n%s", err, text, stderr.String())
	}
	if !strings.Contains(stderr.String(), "SIGTERM: stopping with a savepoint") {
		t.Errorf("stderr does not say what the signal does:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(sp, "_metadata")); err != nil {
		t.Fatalf("no savepoint in %s: %v\nstdout:\n%s", sp, err, text)
	}
	m := regexp.MustCompile(`stopped with savepoint \d+ in (\S+); resume with:\n  (weir demo [^\n]+)\n`).FindStringSubmatch(text)
	if m == nil || m[1] != sp {
		t.Fatalf("stdout does not name the savepoint %s and the resume command:\n%s", sp, text)
	}
	resume := strings.Fields(m[2])[1:] // without "weir"; no argument here holds a space
	if !strings.Contains(m[2], "--restore "+sp) || !strings.Contains(m[2], "--kafka-data "+kafkaData) {
		t.Fatalf("resume command %q", m[2])
	}

	// The resume command, as printed, with a short live phase.
	args := append(resume, "--live", "1s", "--json")
	jsonOut, errOut, code := runWeir(t, args...)
	if code != 0 {
		t.Fatalf("weir %s: exit status %d\nstderr:\n%s", strings.Join(args, " "), code, errOut)
	}
	var s demo.Summary
	if err := json.Unmarshal([]byte(jsonOut), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, jsonOut)
	}
	if s.History != 0 {
		t.Errorf("the resumed run produced %d history records; the broker's data was kept", s.History)
	}
	if s.Sorted >= 20000 {
		t.Errorf("the resumed run sorted %d records: it read the 20,000 history records again instead of continuing from the savepoint", s.Sorted)
	}
	if s.Stopped {
		t.Errorf("the resumed run stopped early:\n%s", errOut)
	}
}

// TestSecondSignalAborts: a second signal ends weir at once with status
// 130, whatever the first one started.
func TestSecondSignalAborts(t *testing.T) {
	cmd := weirCmd(t, "demo", "--orders", "2000", "--live", "2m", "--rate", "100",
		"--savepoint-dir", filepath.Join(t.TempDir(), "savepoint"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := watchLines(stdout, "every topic caught up")
	errs := watchLines(stderrPipe, "stopping with a savepoint")
	<-out.seen("every topic caught up")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The second signal once the first was taken (else both could arrive
	// before the handler runs, which ends the same way but tests less).
	<-errs.seen("stopping with a savepoint")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	out.text()
	errText := errs.text()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		// The savepoint and the stop can finish before the second signal
		// arrives: then weir has exited 0, which is right too.
		if err == nil && strings.Contains(errText, "stopping with a savepoint") {
			t.Skip("the stop completed before the second signal")
		}
		t.Fatalf("exit: %v\nstderr:\n%s", err, errText)
	}
	if ee.ExitCode() != shutdown.ExitAborted {
		t.Fatalf("exit status %d, want %d\nstderr:\n%s", ee.ExitCode(), shutdown.ExitAborted, errText)
	}
	if !strings.Contains(errText, "again: aborting without a savepoint") {
		t.Fatalf("stderr:\n%s", errText)
	}
}
