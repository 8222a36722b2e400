package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/watermark"
)

// groupYAML is a pipeline that group mode runs: a filter before the keyBy,
// a tumbling window after it, an exactly-once Kafka sink. Its cluster, its
// output topic and its checkpoints come from the environment.
const groupYAML = `name: per-user
job:
  checkpoint:
    interval: 200ms
    dir: ${CKPT}
kafka:
  brokers: ["${BROKERS}"]
source:
  kafka:
    topics: [events]
    bounded: true
  timestamp: time
  watermark:
    outOfOrderness: 1s
    emit: every-record
steps:
  - filter: amount > 50
  - keyBy: user
  - window:
      tumbling: 5s
      aggregate:
        n: count
        total: sum(amount)
        top: max(amount)
sink:
  kafka: {topic: "${OUT}", delivery: exactly-once, key: user}
`

// groupBroker starts the in-process broker with the input topic loaded
// (none with n 0):
// n events over 4 partitions, timestamps rising per partition and
// disordered by less than the watermark bound (no record is late), with
// whole amounts (so that sums do not depend on the order), then in
// each partition a record a day later that the filter drops: it moves
// every partition's watermark past the events' windows, so that an
// unbounded run fires them all, as a bounded run does at its end.
func groupBroker(t *testing.T, n int, topics ...string) []string {
	t.Helper()
	all := map[string]int32{"events": 4}
	for _, tp := range topics {
		all[tp] = 2
	}
	b, err := broker.Start(broker.Options{Topics: all, Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if n > 0 {
		produceGroupEvents(t, b.Addrs(), groupEvents(n))
	}
	return b.Addrs()
}

// groupEvents are the input of groupBroker: n events, then the four flush
// records (the last four records, one per partition).
func groupEvents(n int) []*kgo.Record {
	rng := rand.New(rand.NewPCG(3, 4))
	base := int64(1_767_225_600_000)
	var recs []*kgo.Record
	for i := range n {
		v, _ := json.Marshal(map[string]any{"user": fmt.Sprintf("u%02d", rng.IntN(16)), "amount": rng.IntN(500),
			"time": base + int64(i/4)*20 + rng.Int64N(300)})
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i % 4), Value: v})
	}
	for p := range 4 {
		v, _ := json.Marshal(map[string]any{"user": "flush", "amount": 0, "time": base + 24*3600*1000})
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(p), Value: v})
	}
	return recs
}

// produceGroupEvents writes recs (with their partitions) to the brokers.
func produceGroupEvents(t *testing.T, brokers []string, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// writeGroupFile writes groupYAML into dir and sets its environment.
func writeGroupFile(t *testing.T, dir string, brokers []string) string {
	t.Helper()
	file := filepath.Join(dir, "per-user.yaml")
	if err := os.WriteFile(file, []byte(groupYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROKERS", brokers[0])
	return file
}

// committedOutput reads every committed record of topic (read_committed,
// up to its end) as "key value" and counts each.
func committedOutput(t *testing.T, brokers []string, topic string) map[string]int {
	t.Helper()
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: slog.New(slog.DiscardHandler)})
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, ReadCommitted: true, Stop: stop}, kafka.WithMetadata(kafka.Bytes()))
	got := weir.Collect(weir.FromSource(env, "read", src, watermark.NoWatermarks[kafka.Message[[]byte]]()))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range got.Values() {
		out[string(m.Key)+" "+string(m.Value)]++
	}
	return out
}

// groupChild is one `weir run --group` child process and its task lines.
type groupChild struct {
	name  string
	cmd   *exec.Cmd
	lines *lineWatcher
	out   bytes.Buffer
	done  chan struct{}
	err   error
}

func startGroupChild(t *testing.T, name string, args ...string) *groupChild {
	t.Helper()
	c := &groupChild{name: name, done: make(chan struct{})}
	c.cmd = weirCmd(t, args...)
	c.cmd.Stdout = &c.out
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.lines = watchLines(stderr, "started")
	go func() {
		c.lines.text()
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

var taskLine = regexp.MustCompile(`weir run: task (\S+) (started|finished|stopped)`)

// stderr is the child's stderr so far.
func (c *groupChild) stderr() string {
	c.lines.mu.Lock()
	defer c.lines.mu.Unlock()
	return c.lines.buf.String()
}

// running returns the tasks the child runs now, by its stderr so far.
func (c *groupChild) running() []string {
	text := c.stderr()
	state := map[string]string{}
	for _, m := range taskLine.FindAllStringSubmatch(text, -1) {
		state[m[1]] = m[2]
	}
	var out []string
	for task, s := range state {
		if s == "started" {
			out = append(out, task)
		}
	}
	return out
}

// TestRunGroupKillOne: `weir run --group` in two processes, one killed
// with SIGKILL while it runs tasks, once about half the input has reached
// the exchange topic; the other takes its tasks over from their
// checkpoints.
// The committed output equals that of a local `weir run` of the same file:
// no window total lost, none twice. The group run is unbounded (so that
// the kill always comes before the end): a late record in each partition
// fires every window, and once the output is complete the survivor is
// stopped with SIGTERM.
func TestRunGroupKillOne(t *testing.T) { groupKillOne(t, groupYAML, "per-user") }

// groupAgentYAML is groupYAML with an agent step (the offline model) as the
// keyed step: every input that passes the filter gets one reply.
var groupAgentYAML = strings.Replace(groupYAML, `  - window:
      tumbling: 5s
      aggregate:
        n: count
        total: sum(amount)
        top: max(amount)
`, `  - agent:
      model: {offline: {seed: 3}}
      prompt: 'User {{.user}} spent {{.amount}} at {{.time}}'
      output: reply
`, 1)

// TestRunGroupKillOneAgent: as TestRunGroupKillOne with an agent step:
// every input is decided (answered) exactly once in the committed output
// across the kill of a member, as in a local run.
func TestRunGroupKillOneAgent(t *testing.T) {
	if !strings.Contains(groupAgentYAML, "agent:") {
		t.Fatal("groupAgentYAML has no agent step")
	}
	groupKillOne(t, groupAgentYAML, "per-user-agent")
}

// groupKillOne runs the file y locally, then in group mode (unbounded) in
// two processes, kills one mid-run, and checks that the committed output
// equals the local run's.
func groupKillOne(t *testing.T, y, group string) {
	brokers := groupBroker(t, 6000, "out-local", "out-group")
	dir := t.TempDir()
	file := writeGroupFile(t, dir, brokers)
	if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}

	// The local run (in this process: weir run without --group).
	want := localRun(t, file, filepath.Join(dir, "local"), brokers)

	t.Setenv("OUT", "out-group")
	t.Setenv("CKPT", filepath.Join(dir, "unused"))
	unbounded := filepath.Join(dir, "unbounded.yaml")
	if err := os.WriteFile(unbounded, []byte(strings.Replace(y, "bounded: true", "bounded: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(member string) []string {
		return []string{"run", unbounded, "--group", group, "--keyed-tasks", "2", "--member", member,
			"--checkpoint-dir", filepath.Join(dir, "group"), "--session-timeout", "1s", "--json"}
	}
	// a writes the exchange's JSON batches (version 1) and b binary ones,
	// as in the first round of an upgrade from a build before version 2:
	// every keyed task reads both.
	a := startGroupChild(t, "a", append(args("a"), "--exchange-version", "1")...)
	b := startGroupChild(t, "b", args("b")...)

	exchangedSoFar := exchangedRecords(t, brokers, group)
	exchanged := func() bool {
		return exchangedSoFar() >= 3000 // half the input (and control records), committed or not
	}
	deadline := time.After(2 * time.Minute)
	wait := func(what string) {
		select {
		case <-a.done:
			t.Fatalf("process a ended %s: %v\n%s", what, a.err, a.lines.text())
		case <-b.done:
			t.Fatalf("process b ended %s: %v\n%s", what, b.err, b.lines.text())
		case <-deadline:
			t.Fatalf("timed out %s\na:\n%s\nb:\n%s", what, a.stderr(), b.stderr())
		case <-time.After(10 * time.Millisecond):
		}
	}
	var victim, survivor *groupChild
	var victimTasks []string
	t0 := time.Now()
	for victim == nil {
		wait("before the kill")
		if !exchanged() {
			continue
		}
		for _, c := range []*groupChild{a, b} {
			if tasks := c.running(); len(tasks) > len(victimTasks) {
				victim, victimTasks = c, tasks
			}
		}
	}
	survivor = a
	if victim == a {
		survivor = b
	}
	before := len(survivor.stderr())
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	t.Logf("killed %s running %v after %v", victim.name, victimTasks, time.Since(t0))
	got := committedOutput(t, brokers, "out-group")
	t.Logf("%d of %d window totals committed at the kill", len(got), len(want))

	// The survivor takes the victim's tasks over and completes the output.
	for {
		after := survivor.stderr()[before:]
		taken := true
		for _, task := range victimTasks {
			taken = taken && strings.Contains(after, "weir run: task "+task+" started")
		}
		if taken {
			if got = committedOutput(t, brokers, "out-group"); len(got) >= len(want) {
				break
			}
		}
		select {
		case <-survivor.done:
			t.Fatalf("the survivor ended: %v\n%s", survivor.err, survivor.lines.text())
		case <-deadline:
			t.Fatalf("the survivor did not take over %v and complete the output (%d of %d):\n%s", victimTasks, len(got), len(want), survivor.stderr())
		case <-time.After(200 * time.Millisecond):
		}
	}
	survivor.cmd.Process.Signal(syscall.SIGTERM)
	<-survivor.done
	text := survivor.lines.text()
	if survivor.err != nil {
		t.Fatalf("survivor: %v (want exit 0 after SIGTERM)\n%s", survivor.err, text)
	}
	var sum struct {
		Group   string         `json:"group"`
		Member  string         `json:"member"`
		Stopped bool           `json:"stopped"`
		Tasks   map[string]int `json:"tasks"`
	}
	if err := json.Unmarshal(survivor.out.Bytes(), &sum); err != nil || sum.Group != group || sum.Member != survivor.name || !sum.Stopped || len(sum.Tasks) != 6 {
		t.Errorf("survivor's --json summary %q (%v): want its group, member, stopped and the six tasks", survivor.out.String(), err)
	}

	got = committedOutput(t, brokers, "out-group")
	lost, dup := compareCounts(t, want, got)
	t.Logf("%d window totals; group run: %d lost, %d duplicated\nsurvivor %s:\n%s", len(want), lost, dup, survivor.name, text)
	if !maps.Equal(want, got) {
		t.Fatalf("the group run's committed output differs from the local run's: %d lost, %d duplicated (of %d)", lost, dup, len(want))
	}
	// Each process wrote the batch version it was given.
	versions := exchangeBatchVersions(t, brokers, group)
	t.Logf("exchange batches by version: %v", versions)
	for _, c := range []struct {
		child   *groupChild
		version byte
	}{{a, 1}, {b, 2}} {
		if sourceTaskLine.MatchString(c.child.stderr()) && versions[c.version] == 0 {
			t.Errorf("process %s ran a source task, but the exchange topic holds no batch of version %d: %v", c.child.name, c.version, versions)
		}
	}
}

// sourceTaskLine is the log line of a source task's start.
var sourceTaskLine = regexp.MustCompile(`weir run: task source-\d+ started`)

// exchangeBatchVersions reads the exchange topic of group from its start
// until it has nothing more and counts its batch records by version (the
// first byte of their value: cluster/wire.go).
func exchangeBatchVersions(t *testing.T, brokers []string, group string) map[byte]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(group+"-exchange"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	versions := map[byte]int{}
	for empty := 0; empty < 2; {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		n := 0
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			n++
			for _, h := range r.Headers {
				if h.Key == "weir-batch" && len(r.Value) > 0 {
					versions[r.Value[0]]++
				}
			}
		})
		cancel()
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return versions
}

// localRun runs file (groupYAML, bounded) as one local job in this
// process (weir run without --group), writing to topic out-local with its
// checkpoints in ckpt, and returns its committed window totals: the output
// a group run of the same input must equal (more than 50 of them).
func localRun(t *testing.T, file, ckpt string, brokers []string) map[string]int {
	t.Helper()
	t.Setenv("OUT", "out-local")
	t.Setenv("CKPT", ckpt)
	var lout, lerr bytes.Buffer
	if code := run([]string{"run", file}, &lout, &lerr); code != 0 {
		t.Fatalf("local run: exit %d\n%s", code, lerr.String())
	}
	want := committedOutput(t, brokers, "out-local")
	if len(want) < 50 {
		t.Fatalf("the local run committed %d window totals; want more than 50", len(want))
	}
	return want
}

// liveGroup is the set-up of the tests that feed a clustered job live:
// the broker with the first half of groupEvents(6000) (recs[:half]), the
// bounded pipeline file for the local run (file) and an unbounded copy for
// the group's members, whose command lines args gives.
type liveGroup struct {
	brokers   []string
	recs      []*kgo.Record
	half      int
	dir, file string
	group     string
	args      func(member string) []string
}

func newLiveGroup(t *testing.T, group, session string) liveGroup {
	t.Helper()
	g := liveGroup{brokers: groupBroker(t, 0, "out-local", "out-group"), recs: groupEvents(6000), half: 3000,
		dir: t.TempDir(), group: group}
	produceGroupEvents(t, g.brokers, g.recs[:g.half])
	g.file = writeGroupFile(t, g.dir, g.brokers)
	unbounded := filepath.Join(g.dir, "unbounded.yaml")
	if err := os.WriteFile(unbounded, []byte(strings.Replace(groupYAML, "bounded: true", "bounded: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUT", "out-group")
	t.Setenv("CKPT", filepath.Join(g.dir, "unused"))
	g.args = func(member string) []string {
		return []string{"run", unbounded, "--group", group, "--keyed-tasks", "2", "--member", member,
			"--checkpoint-dir", filepath.Join(g.dir, "group"), "--session-timeout", session}
	}
	return g
}

// exchangedRecords returns a function counting what group's exchange
// topic has received so far, committed or not: each data value (they
// travel in batches, so the topic's offsets do not say: cluster.
// ExchangeValues) and each control record. Each call reads what arrived
// since the last one.
func exchangedRecords(t *testing.T, brokers []string, group string) func() int64 {
	t.Helper()
	// A short metadata age: the exchange topic appears after the
	// client's first look.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.ConsumeTopics(group+"-exchange"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var n int64
	return func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			n += int64(max(cluster.ExchangeValues(r.Headers, r.Value), 1))
		})
		return n
	}
}

// TestRunGroupKillWhileIdle (cluster W7): two processes run the unbounded
// group job over the first half of the input until their source tasks
// have caught up and gone idle; then more input reaches every partition
// and, at once, the process running the most source tasks is killed
// (SIGKILL: nothing of what it read since is committed); the rest of the
// input follows. The keyed tasks must not take the dead tasks' idleness
// for the truth while the others carry event time to the end of the
// input: the survivor restores the dead tasks, and the committed output
// equals a local run's. (Before W7 it lost most of what the dead tasks'
// partitions got after the kill: their restored tasks sent it late.)
func TestRunGroupKillWhileIdle(t *testing.T) {
	in := newLiveGroup(t, "idle-kill", "1s")
	brokers, recs, half, file, dir, args := in.brokers, in.recs, in.half, in.file, in.dir, in.args
	a := startGroupChild(t, "a", args("a")...)
	b := startGroupChild(t, "b", args("b")...)
	exchanged := exchangedRecords(t, brokers, in.group)
	deadline := time.After(3 * time.Minute)
	wait := func(what string) {
		t.Helper()
		select {
		case <-a.done:
			t.Fatalf("process a ended %s: %v\n%s", what, a.err, a.lines.text())
		case <-b.done:
			t.Fatalf("process b ended %s: %v\n%s", what, b.err, b.lines.text())
		case <-deadline:
			t.Fatalf("timed out %s\na:\n%s\nb:\n%s", what, a.stderr(), b.stderr())
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The six tasks split between the two, and the first half through
	// the exchange topic: its end offsets stay put for a second (the
	// source tasks have caught up and gone idle; idle tasks write
	// nothing).
	for last, still := int64(-1), 0; still < 10; {
		wait("for the first half to go through")
		if len(a.running())+len(b.running()) != 6 {
			still = 0
			continue
		}
		n := exchanged()
		if n < int64(half/2) || n != last {
			last, still = n, 0
			continue
		}
		still++
	}
	sources := func(c *groupChild) (out []string) {
		for _, task := range c.running() {
			if strings.HasPrefix(task, "source-") {
				out = append(out, task)
			}
		}
		return out
	}
	victim, survivor := a, b
	if len(sources(b)) > len(sources(a)) {
		victim, survivor = b, a
	}
	victimTasks := victim.running()
	if len(sources(victim)) == 0 {
		t.Fatalf("no source task in either process: a %v, b %v", a.running(), b.running())
	}
	before := len(survivor.stderr())
	produceGroupEvents(t, brokers, recs[half:half+250])
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	produceGroupEvents(t, brokers, recs[half+250:])
	t.Logf("killed %s running %v while its source tasks were idle, with 250 new records in the partitions", victim.name, victimTasks)

	want := localRun(t, file, filepath.Join(dir, "local"), brokers)

	// The survivor takes the victim's tasks over and completes the
	// output; an output that stops short for a minute has lost some.
	var got map[string]int
	seen, changed := -1, time.Now()
	for {
		after := survivor.stderr()[before:]
		taken := true
		for _, task := range victimTasks {
			taken = taken && strings.Contains(after, "weir run: task "+task+" started")
		}
		got = committedOutput(t, brokers, "out-group")
		if len(got) != seen {
			seen, changed = len(got), time.Now()
		}
		if taken && len(got) >= len(want) || time.Since(changed) > time.Minute {
			break
		}
		select {
		case <-survivor.done:
			t.Fatalf("the survivor ended: %v\n%s", survivor.err, survivor.lines.text())
		case <-deadline:
			t.Fatalf("the survivor did not take over %v and complete the output (%d of %d):\n%s", victimTasks, len(got), len(want), survivor.stderr())
		case <-time.After(200 * time.Millisecond):
		}
	}
	survivor.cmd.Process.Signal(syscall.SIGTERM)
	<-survivor.done
	lost, dup := compareCounts(t, want, got)
	t.Logf("%d window totals; group run: %d lost, %d duplicated", len(want), lost, dup)
	if !maps.Equal(want, got) {
		t.Fatalf("the group run's committed output differs from the local run's: %d lost, %d duplicated (of %d)\nsurvivor:\n%s",
			lost, dup, len(want), survivor.lines.text())
	}
}

// TestRunGroupStaticRestartAmidInput is TestContainerCluster in processes:
// three static members over the first half of the input; the rest arrives
// in batches, and after the third the member m-1 is killed and started
// again under its id (its tasks come back to it, nobody else's move),
// while the input goes on. The committed output equals a local run's.
// (Before W7 and the hold of sync, the keyed tasks let event time pass
// what the killed member's source tasks had not committed: when they
// were idle at the kill, through their idleness; when a restored source
// task announced its replay, through the caught-up producers W6 made
// active again, which held nothing: their watermarks were below the
// task's. Their restored tasks' records then came late.)
func TestRunGroupStaticRestartAmidInput(t *testing.T) {
	in := newLiveGroup(t, "static-amid", "2m")
	brokers, recs, half, file, dir, args := in.brokers, in.recs, in.half, in.file, in.dir, in.args
	members := map[string]*groupChild{}
	for _, id := range []string{"m-0", "m-1", "m-2"} {
		members[id] = startGroupChild(t, id, args(id)...)
	}
	exchanged := exchangedRecords(t, brokers, in.group)
	deadline := time.After(3 * time.Minute)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			for id, c := range members {
				select {
				case <-c.done:
					t.Fatalf("member %s ended waiting for %s: %v\n%s", id, what, c.err, c.stderr())
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
	waitFor("the three members to run two tasks each, and a quarter of the input through the exchange", func() bool {
		for _, c := range members {
			if len(c.running()) != 2 {
				return false
			}
		}
		return exchanged() >= int64(half/2)
	})
	victim := members["m-1"]
	victimTasks := victim.running()
	slices.Sort(victimTasks)
	rest := recs[half:]
	for i := 0; len(rest) > 0; i++ {
		n := min(len(rest), 250)
		produceGroupEvents(t, brokers, rest[:n])
		rest = rest[n:]
		if i == 2 {
			victim.cmd.Process.Signal(syscall.SIGKILL)
			<-victim.done
			members["m-1"] = startGroupChild(t, "m-1-again", args("m-1")...)
		}
	}

	want := localRun(t, file, filepath.Join(dir, "local"), brokers)
	var got map[string]int
	seen, changed := -1, time.Now()
	waitFor("the group's committed output to be complete", func() bool {
		got = committedOutput(t, brokers, "out-group")
		if len(got) != seen {
			seen, changed = len(got), time.Now()
		}
		return len(got) >= len(want) || time.Since(changed) > time.Minute
	})
	again := members["m-1"].running()
	slices.Sort(again)
	if !slices.Equal(again, victimTasks) {
		t.Errorf("member m-1, started again within the session time-out, runs %v; want its tasks %v back", again, victimTasks)
	}
	lost, dup := compareCounts(t, want, got)
	t.Logf("killed m-1 running %v; %d window totals; group run: %d lost, %d duplicated", victimTasks, len(want), lost, dup)
	if !maps.Equal(want, got) {
		t.Fatalf("the group run's committed output differs from the local run's: %d lost, %d duplicated (of %d)", lost, dup, len(want))
	}
}

// TestRunGroupSIGTERMLeaves: SIGTERM makes a process of an unbounded
// group run checkpoint its tasks, hand them over and leave: exit 0, every
// task it ran stopped, and the summary names the tasks.
func TestRunGroupSIGTERMLeaves(t *testing.T) {
	brokers := groupBroker(t, 400, "out")
	dir := t.TempDir()
	file := writeGroupFile(t, dir, brokers)
	t.Setenv("OUT", "out")
	t.Setenv("CKPT", filepath.Join(dir, "ckpt"))
	if err := os.WriteFile(file, []byte(strings.Replace(groupYAML, "bounded: true", "bounded: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startGroupChild(t, "a", "run", file, "--group", "leave", "--keyed-tasks", "1", "--session-timeout", "1s",
		"--ui-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	// Every task started here: the four source tasks and the keyed task.
	deadline := time.After(2 * time.Minute)
	for len(c.running()) < 5 {
		select {
		case <-c.done:
			t.Fatalf("ended: %v\n%s", c.err, c.lines.text())
		case <-deadline:
			t.Fatalf("not every task started:\n%s", c.lines.text())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The dashboard shows this process's tasks as one job, operators
	// named TASK/OPERATOR; the metrics carry a label task.
	base := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(c.stderr())
		if m == nil {
			t.Fatalf("no %s in stderr:\n%s", re, c.stderr())
		}
		return m[1]
	}
	get := func(url string) string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	ui := base(`dashboard of this process's tasks on (http://[^/\s]+)/`)
	topology := get(ui + "/api/topology")
	for _, want := range []string{`"name":"keyed-0/window"`, `"name":"source-3/source"`} {
		if !strings.Contains(topology, want) {
			t.Errorf("the dashboard's topology lacks %s:\n%s", want, topology)
		}
	}
	// (Frames are taken every second: the first, at the start, had no task.)
	for frame := get(ui + "/api/frame"); !strings.Contains(frame, `"name":"keyed-0/window"`); frame = get(ui + "/api/frame") {
		select {
		case <-deadline:
			t.Fatalf("no frame of the dashboard shows the keyed task's window:\n%s", frame)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if m := get(base(`metrics on (http://\S+/metrics)`)); !strings.Contains(m, `operator="window",subtask="0",task="keyed-0"`) {
		t.Errorf("the metrics lack the keyed task's window:\n%s", m)
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	<-c.done
	text := c.lines.text()
	if c.err != nil {
		t.Fatalf("exit: %v (want status 0)\n%s", c.err, text)
	}
	for _, want := range []string{"SIGTERM: leaving group leave", "task keyed-0 stopped", "task source-3 stopped",
		"per-user stopped after", "tasks run here       keyed-0, source-0, source-1, source-2, source-3"} {
		if !strings.Contains(text, want) {
			t.Errorf("stderr lacks %q:\n%s", want, text)
		}
	}
	// The hand-over checkpoint of each task is there for its next owner.
	for _, task := range []string{"keyed-0", "source-0"} {
		if m, _ := filepath.Glob(filepath.Join(dir, "ckpt", "tasks", task, "chk-*")); len(m) == 0 {
			t.Errorf("task %s has no checkpoint", task)
		}
	}
}

// TestRunGroupBadInput: in group mode every bad flag, and every part of a
// file that group mode cannot run, is refused before any work: exit 2,
// one line naming the flag, or file:line:column and what is accepted.
func TestRunGroupBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, y string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("BROKERS", "127.0.0.1:9")
	t.Setenv("OUT", "out")
	t.Setenv("CKPT", filepath.Join(dir, "ckpt"))
	good := write("good.yaml", groupYAML)
	edit := func(name, old, new string) string {
		if !strings.Contains(groupYAML, old) {
			t.Fatalf("%s: %q not in the file", name, old)
		}
		return write(name, strings.Replace(groupYAML, old, new, 1))
	}
	g := func(args ...string) []string { return append([]string{"run", good, "--group", "g"}, args...) }
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", good, "--keyed-tasks", "2"}, "weir run: --keyed-tasks: needs --group"},
		{[]string{"run", good, "--checkpoint-dir", dir}, "weir run: --checkpoint-dir: needs --group"},
		{[]string{"run", good, "--group", ""}, `weir run: --group "": want a non-empty name`},
		{[]string{"run", good, "--group", "a/b"}, `weir run: --group "a/b": want a non-empty name without spaces or slashes`},
		{g("--keyed-tasks", "0"), "weir run: --keyed-tasks 0: want an integer from 1 to 32768"},
		{g("--session-timeout", "0s"), "weir run: --session-timeout 0s: want a duration >= 100ms"},
		{g("--exchange-version", "3"), "weir run: --exchange-version 3: want an integer from 0 to 2"},
		{[]string{"run", good, "--exchange-version", "1"}, "weir run: --exchange-version: needs --group"},
		{g("--checkpoint-dir", "ftp://x/y"), `weir run: --checkpoint-dir: checkpoint: location "ftp://x/y" has scheme "ftp"`},
		{g("--restore", dir), "weir run: pipeline: group savepoint " + dir + " (--restore, ClusterOptions.RestoreFrom): not one of 4 keyed tasks"},
		{g("--parallelism", "2"), "weir run: --parallelism: not taken with --group"},
		{[]string{"run", good, "--static-membership"}, "weir run: --static-membership: needs --group"},
		{g("--static-membership"), "weir run: --static-membership: needs --member, a name that stays the same across this process's restarts"},
		{g("--member", "m", "--static-membership=false", "--leave-group"), "weir run: --leave-group: only for a static member"},
		{g("--leave-group"), "weir run: --leave-group: only for a static member"},
		{g("--savepoint-dir", dir), "weir run: --savepoint-dir: not taken with --group"},
		{g("--keyed-tasks", "200"), "weir run: " + good + ":2:1: group mode: 200 keyed tasks with job.maxParallelism 128"},
		{[]string{"run", edit("embedded.yaml", `brokers: ["${BROKERS}"]`, "embedded: {topics: {events: 4, out: 1}}"), "--group", "g"},
			"embedded.yaml:7:3: group mode: kafka.embedded: every process would start a broker of its own; run one broker (weir broker)"},
		{[]string{"run", edit("file.yaml", "kafka:\n    topics: [events]\n    bounded: true", "file: {paths: [x.jsonl]}"), "--group", "g"},
			"file.yaml:8:1: group mode: source.file: the processes share the partitions of one Kafka topic; want source.kafka with one topic"},
		{[]string{"run", edit("topics.yaml", "topics: [events]", "topics: [events, out]"), "--group", "g"},
			"topics.yaml:9:3: group mode: source.kafka.topics: 2 topics"},
		{[]string{"run", edit("start.yaml", "bounded: true", "start: latest"), "--group", "g"},
			`start.yaml:9:3: group mode: source.kafka.start "latest": each source task starts at its partition's earliest offset`},
		{[]string{"run", edit("nokey.yaml", "  - keyBy: user\n  - window:\n      tumbling: 5s\n      aggregate:\n        n: count\n        total: sum(amount)\n        top: max(amount)\n", ""), "--group", "g"},
			"nokey.yaml:17:5: group mode: steps: no keyBy; the processes split the pipeline at its keyBy: want exactly one"},
		{[]string{"run", edit("twokeys.yaml", "        top: max(amount)\n", "        top: max(amount)\n  - keyBy: user\n  - sort: {}\n"), "--group", "g"},
			"twokeys.yaml:25:5: group mode: steps[3].keyBy: a second keyBy"},
		{[]string{"run", edit("alo.yaml", "delivery: exactly-once", "delivery: at-least-once"), "--group", "g"},
			"alo.yaml:25:1: group mode: sink.kafka.delivery at-least-once: the clustered job writes its output exactly once (a transaction per task checkpoint); set delivery: exactly-once"},
		{[]string{"run", edit("stdout.yaml", `kafka: {topic: "${OUT}", delivery: exactly-once, key: user}`, "stdout: {}"), "--group", "g"},
			"stdout.yaml:25:1: group mode: sink: the clustered job writes its output to Kafka exactly once"},
		{[]string{"run", edit("nockpt.yaml", "  checkpoint:\n    interval: 200ms\n    dir: ${CKPT}\n", "  parallelism: 2\n"), "--group", "g"},
			"nockpt.yaml:2:1: group mode: job.checkpoint.dir: none; every task checkpoints to a location all processes reach"},
		{[]string{"run", edit("slowckpt.yaml", "interval: 200ms", "interval: 12m"), "--group", "g"},
			"slowckpt.yaml:2:1: group mode: job.checkpoint.interval 12m0s: the transaction time-out 10m0s must be longer than checkpoint interval + session time-out + rebalance time-out (13m3s)"},
		{[]string{"run", write("output.yaml", strings.Replace(groupYAML, "        top: max(amount)\n", "        top: max(amount)\n  - tee: copy\n", 1)+
			"outputs:\n  copy:\n    file: {path: copy.jsonl}\n"), "--group", "g"},
			"output.yaml:29:3: group mode: outputs.copy: a file sink cannot be shared by tasks that move between processes; want a Kafka sink (or stdout)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, &out, &errb)
			lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
			if code != 2 || out.Len() != 0 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, one line containing %q", code, out.String(), errb.String(), c.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt")); err == nil {
		t.Errorf("a checkpoint directory was created: work was done")
	}
}

// TestRunGroupPage: two `weir run --group` processes, each with its
// dashboard; /api/group on either lists both members, their dashboards'
// URLs and their tasks, every task of the job exactly once.
func TestRunGroupPage(t *testing.T) {
	brokers := groupBroker(t, 40, "out")
	dir := t.TempDir()
	file := writeGroupFile(t, dir, brokers)
	t.Setenv("OUT", "out")
	t.Setenv("CKPT", filepath.Join(dir, "ckpt"))
	if err := os.WriteFile(file, []byte(strings.Replace(groupYAML, "bounded: true", "bounded: false", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	members := map[string]*groupChild{}
	for _, name := range []string{"a", "b"} {
		members[name] = startGroupChild(t, name, "run", file, "--group", "page", "--member", name, "--keyed-tasks", "2",
			"--session-timeout", "1s", "--ui-addr", "127.0.0.1:0")
	}
	uiRE := regexp.MustCompile(`dashboard of this process's tasks on (http://[^/\s]+/)`)
	deadline := time.After(2 * time.Minute)
	urls := map[string]string{}
	for name, c := range members {
		for urls[name] == "" {
			if m := uiRE.FindStringSubmatch(c.stderr()); m != nil {
				urls[name] = m[1]
				break
			}
			select {
			case <-c.done:
				t.Fatalf("%s ended: %v\n%s", name, c.err, c.lines.text())
			case <-deadline:
				t.Fatalf("%s prints no dashboard:\n%s", name, c.stderr())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	type member struct {
		Member string   `json:"member"`
		URL    string   `json:"url"`
		Tasks  []string `json:"tasks"`
	}
	type group struct {
		Group   string   `json:"group"`
		Self    string   `json:"self"`
		Members []member `json:"members"`
	}
	describe := func(url string) (group, string) {
		resp, err := http.Get(url + "api/group")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var g group
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &g) != nil {
			return group{}, fmt.Sprintf("status %d: %s", resp.StatusCode, body)
		}
		return g, string(body)
	}
	// complete says what is missing from g for the settled group: both
	// members with their URLs, the six tasks (source-0..3, keyed-0..1)
	// each exactly once; "" if nothing.
	complete := func(g group) string {
		if len(g.Members) != 2 {
			return fmt.Sprintf("%d members", len(g.Members))
		}
		owner := map[string]string{}
		for _, m := range g.Members {
			if m.URL != urls[m.Member] {
				return fmt.Sprintf("member %q has URL %q, want %q", m.Member, m.URL, urls[m.Member])
			}
			for _, task := range m.Tasks {
				if owner[task] != "" {
					return fmt.Sprintf("task %s on %s and %s", task, owner[task], m.Member)
				}
				owner[task] = m.Member
			}
		}
		for _, task := range []string{"source-0", "source-1", "source-2", "source-3", "keyed-0", "keyed-1"} {
			if owner[task] == "" {
				return "no member runs " + task
			}
		}
		if len(owner) != 6 {
			return fmt.Sprintf("%d tasks", len(owner))
		}
		return ""
	}
	for _, self := range []string{"a", "b"} {
		for {
			g, body := describe(urls[self])
			missing := complete(g)
			if missing == "" {
				if g.Group != "page" || g.Self != self {
					t.Errorf("/api/group of %s: group %q self %q, want page and %s", self, g.Group, g.Self, self)
				}
				t.Logf("/api/group of %s: %s", self, body)
				break
			}
			select {
			case <-deadline:
				t.Fatalf("/api/group of %s: %s:\n%s", self, missing, body)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// compareCounts reports every record of want missing from got ("lost")
// and every one got has more often than want ("extra") as a test error,
// and returns how many records were lost and duplicated.
func compareCounts(t *testing.T, want, got map[string]int) (lost, dup int) {
	t.Helper()
	for r, n := range want {
		if got[r] < n {
			lost += n - got[r]
			t.Errorf("lost: %s", r)
		}
	}
	for r, n := range got {
		if n > want[r] {
			dup += n - want[r]
			t.Errorf("extra: %s (%d times, want %d)", r, n, want[r])
		}
	}
	return lost, dup
}
