package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/checkpoint"
)

// resumePipeline writes a pipeline named name reading 300 JSON lines into
// exactly-once files, checkpointing under dir/checkpoints, and returns its
// file.
func resumePipeline(t *testing.T, dir, name string) string {
	t.Helper()
	writeLines(t, filepath.Join(dir, "in.jsonl"), 0, 300)
	file := filepath.Join(dir, name+".yaml")
	writeFile(t, file, "name: "+name+`
job:
  checkpoint: {interval: 1s, dir: checkpoints}
source:
  file: {paths: [in.jsonl]}
  timestamp: time
sink:
  file: {dir: out-`+name+`}
`)
	return file
}

// weirRun runs weir in this process; it returns stdout, stderr and the
// exit status.
func weirRun(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

var startedRE = regexp.MustCompile(`(?m)^weir run: (resumed from \w+ \d+|restored from \w+ \d+|started fresh)[^\n]*$`)

// TestRunResumeRules: a second run resumes from the first's final
// checkpoint (reading nothing again); another pipeline on the same
// checkpoint directory is refused in one line by weir run and weir validate
// alike (exit 2), and --fresh starts it over, numbering its checkpoints
// after the old ones; --restore takes the directory holding chk-N; --fresh
// with --restore is refused.
func TestRunResumeRules(t *testing.T) {
	dir := t.TempDir()
	a := resumePipeline(t, dir, "a")
	chk := filepath.Join(dir, "checkpoints")

	_, errOut, code := weirRun("run", a)
	if code != 0 || startedRE.FindString(errOut) != "weir run: started fresh: no complete checkpoint in "+chk {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	_, errOut, code = weirRun("run", a)
	if code != 0 || !strings.Contains(errOut, "weir run: resumed from checkpoint 1 ("+checkpoint.Dir(chk, 1)+")") ||
		!strings.Contains(errOut, ": 0 records from the source") {
		t.Fatalf("second run: exit %d, want a resume reading nothing again\n%s", code, errOut)
	}
	if n := len(fileIDs(t, filepath.Join(dir, "out-a"), "id")); n != 300 {
		t.Fatalf("%d records in out-a after two runs, want 300", n)
	}

	// Pipeline b on a's checkpoints.
	b := resumePipeline(t, dir, "b")
	for _, cmd := range []string{"validate", "run"} {
		out, errOut, code := weirRun(cmd, b)
		want := "weir " + cmd + ": " + b + `:3:35: job.checkpoint.dir: the newest checkpoint (` + checkpoint.Dir(chk, 2) + `) is of pipeline "a", not "b"`
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "--fresh") {
			t.Errorf("weir %s b: exit %d, stdout %q, stderr %q; want 2 and one line starting %q", cmd, code, out, errOut, want)
		}
	}
	_, errOut, code = weirRun("run", b, "--fresh")
	if code != 0 || !strings.Contains(errOut, "weir run: started fresh (--fresh): the checkpoints in "+chk+" are ignored") ||
		!strings.Contains(errOut, ": 300 records from the source") {
		t.Fatalf("b --fresh: exit %d\n%s", code, errOut)
	}
	if ids, _ := checkpoint.List(chk); len(ids) == 0 || ids[len(ids)-1] != 3 {
		t.Fatalf("checkpoints after b --fresh: %v, want b's numbered after a's (3)", ids)
	}
	// b's own now: b resumes, a is refused.
	if _, errOut, code = weirRun("run", b); code != 0 || !strings.Contains(errOut, "weir run: resumed from checkpoint 3") {
		t.Fatalf("b again: exit %d\n%s", code, errOut)
	}
	if _, errOut, code = weirRun("validate", a); code != 2 || !strings.Contains(errOut, `is of pipeline "b", not "a"`) {
		t.Fatalf("validate a: exit %d\n%s", code, errOut)
	}

	// --restore with the directory holding chk-N restores the newest.
	_, errOut, code = weirRun("run", b, "--restore", chk)
	if code != 0 || !strings.Contains(errOut, "weir run: restored from checkpoint 4 ("+checkpoint.Dir(chk, 4)+")") {
		t.Fatalf("--restore %s: exit %d\n%s", chk, code, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fresh", "--restore", chk}, "weir run: --fresh and --restore"},
		{[]string{"--restore", filepath.Join(dir, "out-a")}, "weir run: --restore " + `"` + filepath.Join(dir, "out-a") + `": checkpoint: no complete snapshot found in`},
		{[]string{"--allow-non-restored-state=maybe"}, "weir run: invalid argument"},
		{[]string{"--fresh=maybe"}, "weir run: invalid argument"},
	} {
		out, errOut, code := weirRun(append([]string{"run", b}, c.args...)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("weir run b %v: exit %d, stdout %q, stderr %q; want 2 and one line starting %q", c.args, code, out, errOut, c.want)
		}
	}
}

// TestValidateChecksWhatRunChecks: problems weir run finds before starting,
// without a broker, weir validate finds too, with the same line and exit
// status 2.
func TestValidateChecksWhatRunChecks(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "afile"), "x")
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"missing input", "source:\n  file: {paths: [none.jsonl]}\n  timestamp: time\nsink:\n  stdout: {}\n",
			":2:3: source.file.paths: stat " + filepath.Join(dir, "none.jsonl") + ": no such file or directory"},
		{"checkpoint dir is a file", "job:\n  checkpoint: {dir: afile}\nsource:\n  generate: {count: 1, fields: {a: i}}\n  timestamp: a\nsink:\n  stdout: {}\n",
			":2:21: job.checkpoint.dir: " + filepath.Join(dir, "afile") + " is a file"},
		{"state dir is a file", "job:\n  stateDir: afile\nsource:\n  generate: {count: 1, fields: {a: i}}\n  timestamp: a\nsink:\n  stdout: {}\n",
			":2:13: job.stateDir: " + filepath.Join(dir, "afile") + " is a file"},
		{"file sink dir is a file", "source:\n  generate: {count: 1, fields: {a: i}}\n  timestamp: a\nsink:\n  file: {dir: afile}\n",
			":4:1: sink.file.dir: " + filepath.Join(dir, "afile") + " is a file"},
		{"bad restore", "job:\n  restoreFrom: nothing-here\nsource:\n  generate: {count: 1, fields: {a: i}}\n  timestamp: a\nsink:\n  stdout: {}\n",
			":2:16: job.restoreFrom \"" + filepath.Join(dir, "nothing-here") + "\": checkpoint: no complete snapshot found"},
		{"bad allowNonRestoredState", "job:\n  allowNonRestoredState: sometimes\nsource:\n  generate: {count: 1, fields: {a: i}}\n  timestamp: a\nsink:\n  stdout: {}\n",
			":2:26: job.allowNonRestoredState:"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
		writeFile(t, file, c.yaml)
		for _, cmd := range []string{"validate", "run"} {
			out, errOut, code := weirRun(cmd, file)
			want := "weir " + cmd + ": " + file + c.want
			if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, want) {
				t.Errorf("%s: weir %s: exit %d, stdout %q, stderr %q; want 2 and one line starting %q", c.name, cmd, code, out, errOut, want)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nothing-here")); err == nil {
		t.Error("a check created the restore directory")
	}
}

// TestRunStopSavepointUnderCheckpointDir: SIGTERM's savepoint goes under
// job.checkpoint.dir/savepoints by default, and the same command started
// again resumes from it (the newest snapshot of the job): the records
// produced in between are read, none again.
func TestRunStopSavepointUnderCheckpointDir(t *testing.T) {
	dir := t.TempDir()
	br, err := broker.Start(broker.Options{Topics: map[string]int32{"in": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	writeLines(t, filepath.Join(dir, "first.jsonl"), 0, 100)
	writeLines(t, filepath.Join(dir, "second.jsonl"), 100, 50)
	produceLines(t, br.Addrs(), "in", filepath.Join(dir, "first.jsonl"))
	file := filepath.Join(dir, "p.yaml")
	writeFile(t, file, `name: stop-resume
job:
  checkpoint: {interval: 1h, dir: checkpoints}
kafka:
  brokers: [`+br.Addrs()[0]+`]
source:
  kafka: {topics: [in]}
  timestamp: time
sink:
  file: {dir: out}
`)
	stop := func() string {
		cmd := weirCmd(t, "run", file)
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
			t.Fatalf("exit: %v\n%s", err, text)
		}
		return text
	}
	first := stop()
	m := regexp.MustCompile(`stopped with savepoint (\d+) in (\S+);`).FindStringSubmatch(first)
	if m == nil || filepath.Dir(m[2]) != filepath.Join(dir, "checkpoints", "savepoints") {
		t.Fatalf("the savepoint is not under checkpoints/savepoints:\n%s", first)
	}
	produceLines(t, br.Addrs(), "in", filepath.Join(dir, "second.jsonl"))
	second := stop()
	if !strings.Contains(second, "weir run: resumed from savepoint "+m[1]+" ("+m[2]+")") {
		t.Fatalf("the second run did not resume from savepoint %s in %s:\n%s", m[1], m[2], second)
	}
	ids := fileIDs(t, filepath.Join(dir, "out"), "id")
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	if len(ids) != 150 || len(seen) != 150 {
		t.Fatalf("%d records, %d distinct in the output; want the 150 produced, each once\n%s\n%s", len(ids), len(seen), first, second)
	}
}

// TestRunRestartFlags: every bad value of a restart flag, and a flag
// without a strategy to configure, is refused in one line naming it (exit
// 2); group mode refuses the flags of a local run's recovery.
func TestRunRestartFlags(t *testing.T) {
	dir := t.TempDir()
	file := resumePipeline(t, dir, "r")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--restart", "sometimes"}, `weir run: --restart "sometimes": want one of none, fixed-delay, exponential-backoff`},
		{[]string{"--restart", "fixed-delay", "--restart-attempts", "-1"}, "weir run: --restart-attempts -1"},
		{[]string{"--restart", "fixed-delay", "--restart-delay", "-1s"}, "weir run: --restart-delay -1s: want a duration >= 0"},
		{[]string{"--restart", "exponential-backoff", "--restart-max-delay", "-1s"}, "weir run: --restart-max-delay -1s: want a duration >= 0"},
		{[]string{"--restart-attempts", "2"}, "weir run: --restart-attempts: no restart strategy to configure"},
		{[]string{"--restart", "none", "--restart-delay", "1s"}, "weir run: --restart-delay: no restart strategy to configure"},
		{[]string{"--restart", "fixed-delay", "--restart-max-delay", "1s"}, "weir run: --restart-max-delay: only with exponential-backoff"},
		{[]string{"--restart", "exponential-backoff", "--restart-delay", "2s", "--restart-max-delay", "1s"}, "weir run: --restart-max-delay and --restart-delay (with job.restart): runtime: RestartStrategy.MaxDelay 1s is shorter than Delay 2s"},
		{[]string{"--restart-delay", "soon"}, `weir run: invalid argument "soon" for "--restart-delay"`},
		{[]string{"--group", "g", "--restart", "fixed-delay"}, "weir run: --restart: not taken with --group"},
		{[]string{"--group", "g", "--fresh"}, "weir run: --fresh: not taken with --group"},
		{[]string{"--group", "g", "--allow-non-restored-state"}, "weir run: --allow-non-restored-state: not taken with --group"},
		{[]string{"--health-addr", "nohostport"}, `weir run: --health-addr "nohostport": want host:port`},
	} {
		out, errOut, code := weirRun(append([]string{"run", file}, c.args...)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("weir run %v: exit %d, stdout %q, stderr %q; want 2 and one line starting %q", c.args, code, out, errOut, c.want)
		}
	}
}
