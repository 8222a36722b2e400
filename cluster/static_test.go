package cluster_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/internal/scaleout"
	"github.com/weirproject/weir/weirtest"
)

// taskLog records the task events of every member of a test's group.
type taskLog struct {
	mu  sync.Mutex
	evs []cluster.TaskEvent
}

func (l *taskLog) add(ev cluster.TaskEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

// mark is the number of events so far, for since.
func (l *taskLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.evs)
}

// since returns member's events after mark.
func (l *taskLog) since(mark int, member string) []cluster.TaskEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []cluster.TaskEvent
	for _, ev := range l.evs[mark:] {
		if ev.Member == member {
			out = append(out, ev)
		}
	}
	return out
}

// running returns the tasks member runs now, sorted.
func (l *taskLog) running(member string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	on := map[string]bool{}
	for _, ev := range l.evs {
		if ev.Member != member {
			continue
		}
		on[ev.Task] = ev.Kind == cluster.TaskStarted
	}
	var out []string
	for t, ok := range on {
		if ok {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// staticGroup starts an unbounded clustered job (4 source tasks, 2 keyed
// tasks) on a broker of its own; run starts a member of it.
func staticGroup(t *testing.T, group string, mod func(*cluster.Config)) (run func(ctx context.Context, member string) chan error, log *taskLog) {
	b := startBroker(t, map[string]int32{"in": 4, "out": 1})
	ctx := testCtx(t)
	in := scaleout.Input{Partitions: 4, Records: 4000, Keys: 16, Seed: 5, StepMillis: 10}
	if err := scaleout.Produce(ctx, b.Addrs(), "in", in); err != nil {
		t.Fatal(err)
	}
	log = &taskLog{}
	cfg := cluster.Config{Brokers: b.Addrs(), Group: group, SourceTopic: "in", KeyedTasks: 2, CheckpointBase: t.TempDir(),
		CheckpointInterval: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, Logger: quiet, OnTask: log.add}
	mod(&cfg)
	job := scaleout.WindowJob("out", 200)
	return func(c context.Context, member string) chan error {
		done := make(chan error, 1)
		ended := make(chan struct{})
		c, cancel := context.WithCancel(c)
		// Before the checkpoint directory is removed: stop the member.
		t.Cleanup(func() {
			cancel()
			<-ended
		})
		mc := cfg
		mc.Member = member
		go func() {
			defer close(ended)
			done <- cluster.Run(c, mc, job)
		}()
		return done
	}, log
}

// twoMembers starts members a and b and waits until they share the six
// tasks three and three (b joined after a, which handed three over).
func twoMembers(t *testing.T, run func(context.Context, string) chan error, log *taskLog) (stopB context.CancelFunc, bDone chan error) {
	ctx := testCtx(t)
	run(ctx, "a")
	weirtest.Eventually(t, "a runs the six tasks", func() bool { return len(log.running("a")) == 6 })
	bctx, stopB := context.WithCancel(ctx)
	bDone = run(bctx, "b")
	weirtest.Eventually(t, "a and b run three tasks each", func() bool { return len(log.running("a")) == 3 && len(log.running("b")) == 3 })
	return stopB, bDone
}

// M6: a static member stopped (as by SIGTERM in a rolling restart) and
// started again with the same Member within the session timeout gets the
// same tasks back, and the other member's tasks never stop, start or move:
// not when it stops (it does not leave the group), not when it comes back.
// (The session timeout is far longer than the restart takes, so that the
// group never gives the tasks away meanwhile; a dynamic member, below,
// leaves at once.)
func TestStaticMemberRestartKeepsItsTasks(t *testing.T) {
	run, log := staticGroup(t, "static", func(c *cluster.Config) { c.StaticMembership = true; c.SessionTimeout = 2 * time.Minute })
	stopB, bDone := twoMembers(t, run, log)
	aTasks, bTasks := log.running("a"), log.running("b")
	mark := log.mark()
	stopB()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v, want context.Canceled", err)
	}
	if got := log.running("b"); len(got) != 0 {
		t.Fatalf("b stopped but runs %v", got)
	}
	run(testCtx(t), "b")
	weirtest.Eventually(t, "b runs its tasks again", func() bool { return slices.Equal(log.running("b"), bTasks) })
	if evs := log.since(mark, "a"); len(evs) != 0 {
		t.Fatalf("a's tasks changed while b restarted: %+v", evs)
	}
	if got := log.running("a"); !slices.Equal(got, aTasks) {
		t.Fatalf("a runs %v, want %v", got, aTasks)
	}
}

// A dynamic member (the default) leaves the group when it stops: the other
// member takes its tasks over at once, long before the session timeout.
func TestDynamicMemberLeavesOnStop(t *testing.T) {
	run, log := staticGroup(t, "dynamic", func(c *cluster.Config) { c.SessionTimeout = 2 * time.Minute })
	stopB, bDone := twoMembers(t, run, log)
	stopB()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v, want context.Canceled", err)
	}
	weirtest.Eventually(t, "a runs every task", func() bool { return len(log.running("a")) == 6 })
}

// M6, LeaveOnStop: a static member that stops for good leaves the group
// explicitly, so its tasks move at once too (the session timeout is longer
// than Eventually waits).
func TestStaticMemberLeaveOnStop(t *testing.T) {
	run, log := staticGroup(t, "leave", func(c *cluster.Config) {
		c.StaticMembership, c.LeaveOnStop, c.SessionTimeout = true, true, 2*time.Minute
	})
	stopB, bDone := twoMembers(t, run, log)
	stopB()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v, want context.Canceled", err)
	}
	weirtest.Eventually(t, "a runs every task", func() bool { return len(log.running("a")) == 6 })
}

// M7: a second process started with the Member of a running static member
// takes its place; the first is fenced and its Run returns a
// *FencedMemberError that says what to change, rather than fighting for
// the place for ever.
func TestStaticMemberDuplicateIsFenced(t *testing.T) {
	run, log := staticGroup(t, "dup", func(c *cluster.Config) { c.StaticMembership = true; c.SessionTimeout = 2 * time.Minute })
	ctx := testCtx(t)
	first := run(ctx, "x")
	weirtest.Eventually(t, "the first x runs the six tasks", func() bool { return len(log.running("x")) == 6 })
	second := run(ctx, "x")
	var err error
	select {
	case err = <-first:
	case err = <-second:
		t.Fatalf("the second x returned first: %v", err)
	case <-ctx.Done():
		t.Fatal("the first x was not fenced")
	}
	var fe *cluster.FencedMemberError
	if !errors.As(err, &fe) || !errors.Is(err, kerr.FencedInstanceID) || fe.Member != "x" || fe.Group != "dup" {
		t.Fatalf("the first x: %v, want a *cluster.FencedMemberError for x in dup", err)
	}
	if !strings.Contains(err.Error(), "give each process its own member id") {
		t.Errorf("the error does not say what to change: %v", err)
	}
	select {
	case err := <-second:
		t.Fatalf("the second x ended: %v", err)
	default:
	}
}
