package main

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunGroupStaticMember: `weir run --group --member` makes a static
// member (cluster M6, M7), in real processes:
//
//   - a and b share the six tasks; b is stopped with SIGTERM (a rolling
//     restart) and started again as b: it runs the same tasks again, and
//     a's stderr shows no task stopped, started or moved meanwhile (a
//     dynamic member would have left the group, handing a its tasks, and
//     taken them back when it joined again);
//   - a third process started with --member b fences the running b,
//     which exits at once with status 1 and one line saying what to change,
//     while the newcomer runs b's tasks;
//   - that one, started with --leave-group, leaves the group on SIGTERM:
//     a takes its tasks over at once, long before the session times out.
func TestRunGroupStaticMember(t *testing.T) {
	brokers := groupBroker(t, 400, "out")
	dir := t.TempDir()
	file := writeGroupFile(t, dir, brokers)
	t.Setenv("OUT", "out")
	t.Setenv("CKPT", filepath.Join(dir, "ckpt"))
	if err := os.WriteFile(file, []byte(strings.Replace(groupYAML, "bounded: true", "bounded: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A session far longer than a restart takes: the group never gives
	// b's tasks away while it restarts.
	args := func(member string) []string {
		return []string{"run", file, "--group", "static", "--keyed-tasks", "2", "--member", member, "--session-timeout", "2m"}
	}
	deadline := time.After(2 * time.Minute)
	waitFor := func(what string, cond func() bool, cs ...*groupChild) {
		t.Helper()
		for !cond() {
			for _, c := range cs {
				select {
				case <-c.done:
					t.Fatalf("%s ended waiting for %s: %v\n%s", c.name, what, c.err, c.lines.text())
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	sorted := func(c *groupChild) []string {
		r := c.running()
		sort.Strings(r)
		return r
	}
	a := startGroupChild(t, "a", args("a")...)
	waitFor("a to run the six tasks", func() bool { return len(a.running()) == 6 }, a)
	if !strings.Contains(a.stderr(), "group static, member a (static)") {
		t.Errorf("a's first line does not say it is a static member:\n%s", a.stderr())
	}
	b := startGroupChild(t, "b", args("b")...)
	waitFor("a and b to run three tasks each", func() bool { return len(a.running()) == 3 && len(b.running()) == 3 }, a, b)
	bTasks := sorted(b)
	mark := len(a.stderr())

	b.cmd.Process.Signal(syscall.SIGTERM)
	<-b.done
	if b.err != nil {
		t.Fatalf("b after SIGTERM: %v (want status 0)\n%s", b.err, b.lines.text())
	}
	if text := b.lines.text(); !strings.Contains(text, "stopping member b of group static: its tasks are checkpointed and wait for its restart with --member b") {
		t.Errorf("b's stop does not say its tasks wait for it:\n%s", text)
	}
	b2 := startGroupChild(t, "b again", args("b")...)
	waitFor("b, started again, to run its tasks", func() bool { return slices.Equal(sorted(b2), bTasks) }, a, b2)
	if moved := taskLine.FindAllString(a.stderr()[mark:], -1); len(moved) != 0 {
		t.Fatalf("a's tasks changed while b restarted: %v\n%s", moved, a.stderr())
	}

	// The same member id twice: the running b is fenced and exits.
	b3 := startGroupChild(t, "a second b", append(args("b"), "--leave-group")...)
	waitFor("the running b to be fenced", func() bool {
		select {
		case <-b2.done:
			return true
		default:
			return false
		}
	}, a, b3)
	text := b2.lines.text()
	if code := b2.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(text, `cluster: member "b" of group "static" was fenced: another process joined the group as a static member with the same member id`) ||
		!strings.Contains(text, "give each process its own member id") {
		t.Fatalf("the fenced b: exit %d, want 1 and a line saying it was fenced and what to change:\n%s", code, text)
	}
	t.Logf("the fenced b:\n%s", text)
	waitFor("the second b to run b's tasks", func() bool { return slices.Equal(sorted(b3), bTasks) }, a, b3)

	// --leave-group: stopped, the second b leaves, and a takes its tasks
	// at once (the session, 2m, outlasts the test's deadline).
	b3.cmd.Process.Signal(syscall.SIGTERM)
	<-b3.done
	if text := b3.lines.text(); b3.err != nil || !strings.Contains(text, "SIGTERM: leaving group static") {
		t.Fatalf("the second b after SIGTERM: %v, want status 0 and a line saying it leaves:\n%s", b3.err, text)
	}
	waitFor("a to run every task", func() bool { return len(a.running()) == 6 }, a)
}
