package cluster_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/internal/durability"
	"github.com/weirproject/weir/internal/scaleout"
	"github.com/weirproject/weir/weirtest"
)

// startService serves a side-effect service counting calls per
// idempotency key on 127.0.0.1.
func startService(t *testing.T) (*durability.Service, string) {
	svc := durability.NewService()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: svc}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return svc, "http://" + ln.Addr().String()
}

// events collects task events.
type events struct {
	mu  sync.Mutex
	evs []cluster.TaskEvent
}

func (e *events) add(ev cluster.TaskEvent) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

func (e *events) find(f func(cluster.TaskEvent) bool) (cluster.TaskEvent, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.evs {
		if f(ev) {
			return ev, true
		}
	}
	return cluster.TaskEvent{}, false
}

// K1 with the Kafka store: an agent job whose keyed tasks move from one
// process to another mid-run (each handed over with a checkpoint) answers
// every input once and makes every side effect once, under one
// idempotency key; the store's topic, shared by the keyed tasks, has one
// partition per keyed task.
func TestAgentKafkaStoreHandOver(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 2, "out": 1})
	ctx := testCtx(t)
	svc, url := startService(t)
	const inputs, keys = 300, 12
	if err := scaleout.ProduceAgentInputs(ctx, b.Addrs(), "in", 2, inputs, keys); err != nil {
		t.Fatal(err)
	}
	var evs events
	t.Cleanup(func() {
		if t.Failed() {
			evs.mu.Lock()
			defer evs.mu.Unlock()
			for _, ev := range evs.evs {
				t.Logf("task event: %+v", ev)
			}
		}
	})
	cfg := cluster.Config{Brokers: b.Addrs(), Group: "agent-kafka", SourceTopic: "in", KeyedTasks: 2, CheckpointBase: t.TempDir(),
		CheckpointInterval: 100 * time.Millisecond, SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: quiet, OnTask: evs.add}
	job := scaleout.AgentJob("out", scaleout.AgentSpec{Service: url, Store: "kafka", Brokers: b.Addrs(), ActionTopic: "agent-kafka-actions",
		CallDelay: 2 * time.Millisecond, Pace: 100})
	run := func(c context.Context, member string) chan error {
		done := make(chan error, 1)
		mc := cfg
		mc.Member = member
		// a runs unbounded, so that it cannot finish the input before b
		// has joined and been handed a task, however slow the rebalance
		// on a loaded machine; b, which takes everything over, ends.
		mc.Bounded = member == "b"
		go func() { done <- cluster.Run(c, mc, job) }()
		return done
	}
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	aDone := run(actx, "a")
	weirtest.Eventually(t, "a has made side effects", func() bool { return svc.Effects(0) >= inputs/5 })
	bDone := run(ctx, "b")
	weirtest.Eventually(t, "b restores a task a handed over", func() bool {
		_, ok := evs.find(func(ev cluster.TaskEvent) bool {
			return ev.Member == "b" && ev.Kind == cluster.TaskStarted && ev.Restored != ""
		})
		return ok
	})
	stopA() // b takes the rest over
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a: %v, want context.Canceled", err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if _, ok := evs.find(func(ev cluster.TaskEvent) bool {
		return ev.Member == "b" && ev.Kind == cluster.TaskStarted && ev.Restored != "" && strings.HasPrefix(ev.Task, "keyed-")
	}); !ok {
		t.Fatal("b restored no keyed task: no agent moved")
	}
	if ev, ok := evs.find(func(ev cluster.TaskEvent) bool { return ev.Kind == cluster.TaskFailed }); ok {
		t.Errorf("a task failed: %+v", ev)
	}
	checkAgentRun(t, ctx, b.Addrs(), svc, inputs, true)
	// One partition per keyed task.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, "agent-kafka-actions")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(md.Topics["agent-kafka-actions"].Partitions); n != 2 {
		t.Errorf("the store's topic has %d partitions, want 2 (one per keyed task)", n)
	}
}

// checkAgentRun checks that every input was answered once in the
// committed output and, with effectsOnce, that every input's effect was
// asked for under one idempotency key.
func checkAgentRun(t *testing.T, ctx context.Context, brokers []string, svc *durability.Service, inputs int, effectsOnce bool) {
	t.Helper()
	seen, err := scaleout.AgentOutputs(ctx, brokers, "out", inputs)
	if err != nil {
		t.Fatal(err)
	}
	lost, dup := 0, 0
	for _, n := range seen {
		if n == 0 {
			lost++
		} else {
			dup += n - 1
		}
	}
	keysOf, repeats := svc.Counts(0)
	missing, dupEffects := 0, 0
	for id := range inputs {
		switch n := keysOf[id]; {
		case n == 0:
			missing++
		case n > 1:
			dupEffects += n - 1
		}
	}
	t.Logf("%d inputs: %d lost and %d duplicated outputs; %d inputs without effect, %d effects under a second key, %d calls repeated under their key",
		inputs, lost, dup, missing, dupEffects, repeats)
	if lost != 0 || dup != 0 || missing != 0 {
		t.Fatalf("outputs: %d lost, %d duplicated; %d inputs without effect", lost, dup, missing)
	}
	if effectsOnce && dupEffects != 0 {
		t.Fatalf("%d effects asked for under a second idempotency key", dupEffects)
	}
}

// K1 with the WAL store: a keyed task whose states are in a WAL on one
// machine, moved to a process that has another WAL directory (another
// machine), fails its restore with agent.ErrStatesMissing (issue 11,
// part 3) instead of repeating side effects, and keeps failing (M4);
// with agent.Options.AllowRepeatedSideEffects it goes on, and the
// committed output still answers every input once.
func TestAgentWALMovedToAnotherMachine(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 2, "out": 1})
	ctx := testCtx(t)
	svc, url := startService(t)
	const inputs, keys = 300, 12
	if err := scaleout.ProduceAgentInputs(ctx, b.Addrs(), "in", 2, inputs, keys); err != nil {
		t.Fatal(err)
	}
	var evs events
	base := t.TempDir()
	cfg := cluster.Config{Brokers: b.Addrs(), Group: "agent-wal", SourceTopic: "in", KeyedTasks: 2, CheckpointBase: base,
		CheckpointInterval: 100 * time.Millisecond, SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		RestartDelay: 200 * time.Millisecond, Logger: quiet, OnTask: evs.add}
	machine := func(member, walDir string, allow bool) (context.CancelFunc, chan error) {
		job := scaleout.AgentJob("out", scaleout.AgentSpec{Service: url, Store: "wal", StoreDir: walDir,
			CallDelay: 2 * time.Millisecond, Pace: 100, AllowRepeats: allow})
		c, cancel := context.WithCancel(ctx)
		mc := cfg
		mc.Member = member
		mc.Bounded = allow // the last one runs to the end
		done := make(chan error, 1)
		go func() { done <- cluster.Run(c, mc, job) }()
		return cancel, done
	}
	walA, walB := filepath.Join(t.TempDir(), "wal-a"), filepath.Join(t.TempDir(), "wal-b")
	stopA, aDone := machine("a", walA, false)
	weirtest.Eventually(t, "a's keyed tasks have checkpoints and side effects", func() bool {
		for _, task := range []string{"keyed-0", "keyed-1"} {
			if _, _, err := checkpoint.Latest(filepath.Join(base, "tasks", task)); err != nil {
				return false
			}
		}
		return svc.Effects(0) >= inputs/5
	})
	stopA()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a: %v", err)
	}
	stopB, bDone := machine("b", walB, false)
	weirtest.Eventually(t, "b's restore of a keyed task fails: its states are in a's WAL", func() bool {
		_, ok := evs.find(func(ev cluster.TaskEvent) bool {
			return ev.Member == "b" && ev.Kind == cluster.TaskFailed && strings.HasPrefix(ev.Task, "keyed-") &&
				strings.Contains(ev.Err, "lacks states the restored checkpoint needs")
		})
		return ok
	})
	if _, ok := evs.find(func(ev cluster.TaskEvent) bool {
		return ev.Member == "b" && ev.Kind == cluster.TaskFinished && strings.HasPrefix(ev.Task, "keyed-")
	}); ok {
		t.Fatal("b finished a keyed task whose states it does not have")
	}
	stopB()
	<-bDone
	_, cDone := machine("c", walB, true)
	if err := <-cDone; err != nil {
		t.Fatal(err)
	}
	checkAgentRun(t, ctx, b.Addrs(), svc, inputs, false)
}
