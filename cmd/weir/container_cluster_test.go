package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestContainerCluster runs a clustered exactly-once pipeline (groupYAML,
// unbounded) as three `weir run --group` containers of the image against
// a `weir broker --data` container, kills one member with `podman kill -s
// KILL` while input is still arriving, starts it again with the same
// member id (as a StatefulSet recreates a pod under its name), and checks
// that the committed (read_committed) output equals that of a local `weir
// run` of the same file: nothing lost, nothing twice. The members are
// static (--member): the one started again gets its tasks back, and no
// other member's tasks move (the session time-out, 2m, outlasts the
// restart, so this does not depend on how fast the machine is).
//
// Every container runs with a read-only root filesystem as user 65532; the
// pipeline file is mounted at /etc/weir/pipeline.yaml, and one host
// directory at /var/lib/weir of every member holds the checkpoints (the
// stand-in for the object store a real group checkpoints to). Set
// WEIR_CONTAINER_TESTS=1 (podman with runc; see docs/deploy.md).
func TestContainerCluster(t *testing.T) {
	containerImage(t)
	t0 := time.Now()
	dir := t.TempDir()
	shared, kafkaData := filepath.Join(dir, "members"), filepath.Join(dir, "broker")
	for _, d := range []string{shared, kafkaData} {
		// Written by the image's user, 65532.
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	prefix := fmt.Sprintf("weir-test-%d-", os.Getpid())
	// Generous: on a quiet machine the whole run takes under ten seconds,
	// but CI runs it on two loaded cores beside the other container.
	deadline := time.After(10 * time.Minute)

	// The broker: port 0 picks a free one, read back from its first line;
	// no Schema Registry (its default port may be taken).
	br := startContainer(t, prefix+"broker", []string{"-v", kafkaData + ":/var/lib/weir"},
		"broker", "--data", "/var/lib/weir/kafka", "--addr", "127.0.0.1:0", "--topic", "events:4",
		"--topic", "out-local:2", "--topic", "out-group:2", "--config", "group.min.session.timeout.ms=500",
		"--schema-registry", "off")
	select {
	case <-br.lines.seen("broker listening on"):
	case <-br.done:
		t.Fatalf("the broker container ended: %v\n%s", br.err, br.lines.text())
	case <-deadline:
		t.Fatalf("the broker container did not start:\n%s", br.stderr())
	}
	m := regexp.MustCompile(`broker listening on (\S+) `).FindStringSubmatch(br.stderr())
	if m == nil {
		t.Fatalf("no address in the broker's first line:\n%s", br.stderr())
	}
	brokers := []string{m[1]}
	t.Logf("broker container on %s after %v", m[1], time.Since(t0).Round(time.Millisecond))

	// The input: half before the members start, the rest while they run.
	recs := groupEvents(6000)
	half := 3000
	produceGroupEvents(t, brokers, recs[:half])

	unbounded := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(unbounded, []byte(strings.Replace(groupYAML, "bounded: true", "bounded: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	const group = "per-user-ctr"
	member := func(id, name string) *groupChild {
		return startContainer(t, name, []string{"-v", unbounded + ":/etc/weir/pipeline.yaml:ro", "-v", shared + ":/var/lib/weir",
			"-e", "BROKERS=" + brokers[0], "-e", "OUT=out-group", "-e", "CKPT=/var/lib/weir/unused"},
			"run", "/etc/weir/pipeline.yaml", "--group", group, "--member", id, "--keyed-tasks", "2",
			"--checkpoint-dir", "/var/lib/weir/checkpoints", "--session-timeout", "2m")
	}
	members := map[string]*groupChild{}
	for _, id := range []string{"m-0", "m-1", "m-2"} {
		members[id] = member(id, prefix+id)
	}
	defer func() {
		if t.Failed() {
			for id, c := range members {
				t.Logf("member %s (%s):\n%s", id, c.name, c.stderr())
			}
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			for id, c := range members {
				select {
				case <-c.done:
					t.Fatalf("member %s ended waiting for %s: %v\n%s", id, what, c.err, c.lines.text())
				default:
				}
			}
			select {
			case <-deadline:
				var all strings.Builder
				for id, c := range members {
					fmt.Fprintf(&all, "%s:\n%s\n", id, c.stderr())
				}
				t.Fatalf("timed out waiting for %s\n%s", what, all.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	exchanged := exchangedRecords(t, brokers, group)
	// Two tasks each is where the cooperative rebalances end; before that
	// a member may still run a task it is about to hand over.
	waitFor("the three members to run two of the six tasks each", func() bool {
		for _, c := range members {
			if len(c.running()) != 2 {
				return false
			}
		}
		return true
	})
	// A quarter of the input (before the filter) is through the exchange
	// topic: the keyed tasks hold state and open transactions.
	waitFor("the members to process input", func() bool { return exchanged() >= int64(half/2) })
	t.Logf("three members running after %v", time.Since(t0).Round(time.Millisecond))

	// The rest of the input in batches; the kill after the first few.
	const victimID = "m-1"
	victim := members[victimID]
	victimTasks := victim.running()
	slices.Sort(victimTasks)
	marks := map[string]int{}
	rest := recs[half:]
	for i := 0; len(rest) > 0; i++ {
		n := min(len(rest), 250)
		produceGroupEvents(t, brokers, rest[:n])
		rest = rest[n:]
		if i != 2 {
			continue
		}
		if out, err := exec.Command("podman", "kill", "-s", "KILL", victim.name).CombinedOutput(); err != nil {
			t.Fatalf("podman kill -s KILL %s: %v\n%s", victim.name, err, out)
		}
		<-victim.done
		t.Logf("killed %s (member %s, tasks %v) after %v, %d records exchanged", victim.name, victimID, victimTasks, time.Since(t0).Round(time.Millisecond), exchanged())
		for id, c := range members {
			marks[id] = len(c.stderr())
		}
		members[victimID] = member(victimID, victim.name+"-again")
	}

	// The local run, in this process, of the same file (bounded) over the
	// whole input, to another topic of the same broker.
	local := filepath.Join(dir, "local.yaml")
	if err := os.WriteFile(local, []byte(groupYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROKERS", brokers[0])
	want := localRun(t, local, filepath.Join(dir, "local-ckpt"), brokers)

	// The group's output is complete once it has as many window totals as
	// the local run's (the last input fires every window). One that stops
	// short of it for two minutes has lost some: compared below, rather
	// than waited for until the deadline.
	var got map[string]int
	seen, changed := -1, time.Now()
	waitFor("the group's committed output to be complete", func() bool {
		got = committedOutput(t, brokers, "out-group")
		if len(got) != seen {
			seen, changed = len(got), time.Now()
		}
		return len(got) >= len(want) || time.Since(changed) > 2*time.Minute
	})
	if len(got) < len(want) {
		lost, dup := compareCounts(t, want, got)
		t.Fatalf("the group's committed output stopped at %d of the local run's %d window totals for 2m: %d lost, %d duplicated",
			len(got), len(want), lost, dup)
	}
	again := members[victimID].running()
	slices.Sort(again)
	var moved []string
	for id, c := range members {
		if id != victimID {
			moved = append(moved, taskLine.FindAllString(c.stderr()[marks[id]:], -1)...)
		}
	}
	t.Logf("member %s started again runs %v (had %v); the others' task changes meanwhile: %v", victimID, again, victimTasks, moved)
	if !slices.Equal(again, victimTasks) || len(moved) != 0 {
		t.Errorf("static membership: member %s, started again within the session time-out, runs %v (want its tasks %v back), and the others' tasks changed: %v", victimID, again, victimTasks, moved)
	}

	lost, dup := compareCounts(t, want, got)
	t.Logf("%d window totals; the containers' run: %d lost, %d duplicated; %v in all", len(want), lost, dup, time.Since(t0).Round(time.Millisecond))
	if !maps.Equal(want, got) {
		t.Fatalf("the containers' committed output differs from the local run's: %d lost, %d duplicated (of %d)", lost, dup, len(want))
	}
}

// startContainer runs the test image (containerImage) as container name,
// with podman flags opts before the image and weir's args after it: host
// network, read-only root filesystem, a tmpfs at /tmp. Its stdout and
// stderr are watched together. The container is removed (podman rm -f) at
// the end of the test, however it ends.
func startContainer(t *testing.T, name string, opts []string, args ...string) *groupChild {
	t.Helper()
	all := append([]string{"--runtime", "runc", "run", "--rm", "--name", name, "--network", "host", "--read-only", "--tmpfs", "/tmp"}, opts...)
	all = append(append(all, containerTag), args...)
	c := &groupChild{name: name, done: make(chan struct{})}
	c.cmd = exec.Command("podman", all...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout, c.cmd.Stderr = pw, pw
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	c.lines = watchLines(pr, "broker listening on")
	go func() {
		c.lines.text()
		c.err = c.cmd.Wait()
		pr.Close()
		close(c.done)
	}()
	// Cleanups run last first: the container is removed, then its podman
	// client (which ends with it) is waited for.
	t.Cleanup(func() {
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	t.Cleanup(func() {
		if out, err := exec.Command("podman", "rm", "-f", "-t", "0", name).CombinedOutput(); err != nil && !strings.Contains(string(out), "no such container") {
			t.Logf("podman rm -f %s: %v\n%s", name, err, out)
		}
	})
	return c
}
