package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/killpoint"
)

// processStopped reports whether process pid is stopped (state T in
// /proc/PID/stat: SIGSTOP).
func processStopped(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, the state follows its ")".
	i := bytes.LastIndexByte(data, ')')
	return i > 0 && i+2 < len(data) && data[i+2] == 'T'
}

// TestRunGroupZombieIsFenced: `weir run --group` in two processes; the
// first, alone with every task, is paused with SIGSTOP at its first
// checkpoint's manifest and stays paused past its session (a zombie); the
// second, started then, takes its tasks over (claiming their checkpoints, checkpoint.ClaimLatest, and
// opening their transactional ids) and is killed with SIGKILL as soon as
// it has started them, before its own checkpoints supersede the ones it
// restored. The zombie is then continued with SIGCONT: its next
// checkpoints of the tasks it lost must not complete (were one to, its
// transaction being aborted at Kafka by the new owner, the next restore
// would pick it and fail to commit it, for ever). Being the only process
// left, it is then given every task, restores each from the newest valid
// checkpoint, and the committed output (read committed) equals that of a
// local run: every window total once.
//
// WEIR_ZOMBIE_TRIALS=N runs it N times (a soak; once by default).
func TestRunGroupZombieIsFenced(t *testing.T) {
	trials := 1
	if n, err := strconv.Atoi(os.Getenv("WEIR_ZOMBIE_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	for i := range trials {
		t.Run(fmt.Sprint("trial-", i+1), zombieTrial)
	}
}

func zombieTrial(t *testing.T) {
	brokers := groupBroker(t, 20000, "out-local", "out-group")
	dir := t.TempDir()
	file := writeGroupFile(t, dir, brokers)

	t.Setenv("OUT", "out-local")
	t.Setenv("CKPT", filepath.Join(dir, "local"))
	var lout, lerr bytes.Buffer
	if code := run([]string{"run", file}, &lout, &lerr); code != 0 {
		t.Fatalf("local run: exit %d\n%s", code, lerr.String())
	}
	want := committedOutput(t, brokers, "out-local")

	t.Setenv("OUT", "out-group")
	t.Setenv("CKPT", filepath.Join(dir, "unused"))
	unbounded := filepath.Join(dir, "unbounded.yaml")
	if err := os.WriteFile(unbounded, []byte(strings.Replace(groupYAML, "bounded: true", "bounded: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(member string) []string {
		return []string{"run", unbounded, "--group", "zombie", "--keyed-tasks", "2", "--member", member,
			"--checkpoint-dir", filepath.Join(dir, "group"), "--session-timeout", "1s"}
	}
	// a starts alone (so it runs every task), armed to stop itself
	// (SIGSTOP) the first time it is about to publish a checkpoint's
	// manifest (its data files written): no checkpoint of it has completed,
	// so none of the output is committed yet, however fast the machine.
	// b starts once a is paused.
	var a, b *groupChild
	deadline := time.After(time.Minute)
	// waitFor polls cond every 10ms; live are the processes that must not
	// end meanwhile.
	waitFor := func(what string, cond func() bool, live ...*groupChild) {
		t.Helper()
		for !cond() {
			for _, c := range live {
				select {
				case <-c.done:
					t.Fatalf("process %s ended %s: %v\n%s", c.name, what, c.err, c.lines.text())
				default:
				}
			}
			select {
			case <-deadline:
				var text string
				for _, c := range []*groupChild{a, b} {
					if c != nil {
						text += c.name + ":\n" + c.stderr() + "\n"
					}
				}
				t.Fatalf("timed out %s\n%s", what, text)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	t.Setenv(killpoint.Env, "checkpoint.before-manifest@1:stop")
	a = startGroupChild(t, "a", args("a")...)
	t.Setenv(killpoint.Env, "")
	defer a.cmd.Process.Signal(syscall.SIGCONT)
	waitFor("while a runs up to its pause", func() bool { return processStopped(a.cmd.Process.Pid) }, a)
	lost := a.running()
	if got := committedOutput(t, brokers, "out-group"); len(got) >= len(want) {
		t.Fatalf("the output was complete before the pause (%d window totals), with no checkpoint of a complete", len(got))
	}
	b = startGroupChild(t, "b", args("b")...)
	from := 0
	started := func(c *groupChild, from int, word string) func() bool {
		return func() bool {
			text := c.stderr()[from:]
			for _, task := range lost {
				if !strings.Contains(text, "weir run: task "+task+" "+word) {
					return false
				}
			}
			return true
		}
	}
	waitFor("while b takes "+strings.Join(lost, ", ")+" over", started(b, from, "started"), b)
	// The new owner has claimed the tasks' checkpoints, restored them and
	// opened their transactional ids (fencing a at Kafka), and dies
	// before its own checkpoints supersede the ones it restored.
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	zfrom := len(a.stderr())
	a.cmd.Process.Signal(syscall.SIGCONT)
	// a publishes the manifest it was about to: that checkpoint must fail,
	// fenced (checkpoint.ErrFenced), and not complete. a finds its session
	// lost and stops the tasks (or they fail, fenced); then it is given
	// every task, and restores each from the newest valid checkpoint.
	waitFor("while the zombie a wakes and its checkpoint is fenced", func() bool {
		text := a.stderr()[zfrom:]
		if !strings.Contains(text, "checkpoint: fenced: a newer owner claimed the checkpoint location") {
			return false
		}
		for _, task := range lost {
			if !strings.Contains(text, "weir run: task "+task+" stopped") && !strings.Contains(text, "weir run: task "+task+" failed") {
				return false
			}
		}
		return true
	}, a)
	t.Logf("zombie a woke after losing %v; fenced checkpoints: %d", lost, strings.Count(a.stderr()[zfrom:], "fenced"))
	zombie := a

	var got map[string]int
	waitFor("while "+zombie.name+" completes the output alone", func() bool {
		got = committedOutput(t, brokers, "out-group")
		return len(got) >= len(want)
	}, zombie)
	zombie.cmd.Process.Signal(syscall.SIGTERM)
	<-zombie.done
	if zombie.err != nil {
		t.Fatalf("%s: %v (want exit 0 after SIGTERM)\n%s", zombie.name, zombie.err, zombie.lines.text())
	}
	got = committedOutput(t, brokers, "out-group")
	lostN, dup := 0, 0
	for r, n := range want {
		if got[r] < n {
			lostN += n - got[r]
		}
	}
	for r, n := range got {
		if n > want[r] {
			dup += n - want[r]
			t.Errorf("extra: %s (%d times, want %d)", r, n, want[r])
		}
	}
	if !maps.Equal(want, got) {
		t.Fatalf("committed output differs from the local run's: %d lost, %d duplicated (of %d)\n%s:\n%s", lostN, dup, len(want), zombie.name, zombie.lines.text())
	}
}
