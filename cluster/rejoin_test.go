package cluster_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/internal/scaleout"
	"github.com/weirproject/weir/weirtest"
)

// C2, M3: a process the coordinator removed from the group while it could
// not reach it (its JoinGroup held past the rebalance timeout, as in a
// broker outage during a rebalance) has its tasks given to the others.
// franz-go then answers its JoinGroup's UNKNOWN_MEMBER_ID by joining again
// as a new member, without calling lost; the tasks it still runs must stop
// as lost (SessionLost) once it learns, not be revoked as if it had owned
// them all along (a hand-over checkpoint and no SessionLost: what the
// simulator's seeds 36596 and 47302 reported), nor kept running.
//
// Driven by kfake's control of JoinGroup (a's rejoin is held until b and
// c run a's tasks), not by timing.
func TestRejoinAfterRemovalStopsTasksAsLost(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 4, "out": 1})
	ctx := testCtx(t)
	in := scaleout.Input{Partitions: 4, Records: 4000, Keys: 16, Seed: 5, StepMillis: 10}
	if err := scaleout.Produce(ctx, b.Addrs(), "in", in); err != nil {
		t.Fatal(err)
	}
	log := &taskLog{}
	cfg := cluster.Config{Brokers: b.Addrs(), Group: "rejoin", SourceTopic: "in", KeyedTasks: 2, CheckpointBase: t.TempDir(),
		CheckpointInterval: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Minute,
		RebalanceTimeout: time.Second, RevokeCheckpointTimeout: 200 * time.Millisecond, Logger: quiet, OnTask: log.add}
	job := scaleout.WindowJob("out", 200)
	run := func(member string) {
		c, cancel := context.WithCancel(ctx)
		ended := make(chan struct{})
		t.Cleanup(func() { cancel(); <-ended })
		mc := cfg
		mc.Member = member
		go func() {
			defer close(ended)
			if err := cluster.Run(c, mc, job); err != nil && c.Err() == nil {
				t.Errorf("member %s: %v", member, err)
			}
		}()
	}
	run("a")
	weirtest.Eventually(t, "a runs the six tasks", func() bool { return len(log.running("a")) == 6 })
	run("b")
	weirtest.Eventually(t, "a and b run three tasks each", func() bool { return len(log.running("a")) == 3 && len(log.running("b")) == 3 })
	aTasks := log.running("a")

	// Hold a's next JoinGroup (a known member id of a's) until released.
	var hold atomic.Bool
	hold.Store(true)
	release := make(chan struct{})
	kc := b.Cluster()
	kc.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if r := req.(*kmsg.JoinGroupRequest); hold.Load() && strings.HasPrefix(r.MemberID, "weir-a-") {
			kc.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	mark := log.mark()
	run("c") // a rebalance: a's rejoin is held, the rebalance timeout removes a
	weirtest.Eventually(t, "b and c run every task (a removed from the group)", func() bool {
		return len(log.running("b"))+len(log.running("c")) == 6
	})
	t.Logf("a (removed, its rejoin held) still runs %v; b runs %v, c %v", log.running("a"), log.running("b"), log.running("c"))
	hold.Store(false)
	close(release)

	// a learns it was removed: each of its old tasks stops, as lost.
	first := func() map[string]cluster.TaskEvent {
		out := map[string]cluster.TaskEvent{}
		for _, ev := range log.since(mark, "a") {
			if _, ok := out[ev.Task]; !ok && ev.Kind == cluster.TaskStopped {
				out[ev.Task] = ev
			}
		}
		return out
	}
	weirtest.Eventually(t, "a stops each task it ran before its removal", func() bool {
		stops := first()
		for _, task := range aTasks {
			if _, ok := stops[task]; !ok {
				return false
			}
		}
		return true
	})
	stops := first()
	for _, task := range aTasks {
		if !stops[task].SessionLost {
			t.Errorf("a stopped %s (given to another member while a was removed) without SessionLost", task)
		}
	}
	// And the group settles with each task in one member.
	weirtest.Eventually(t, "each task runs in exactly one member", func() bool {
		seen := map[string]int{}
		for _, m := range []string{"a", "b", "c"} {
			for _, task := range log.running(m) {
				seen[task]++
			}
		}
		if len(seen) != 6 {
			return false
		}
		for _, n := range seen {
			if n != 1 {
				return false
			}
		}
		return true
	})
}

// C2: a bounded process that the coordinator removed from the group while
// it could not hear of it (its group calls held, as in a broker outage)
// and whose tasks all finish meanwhile asks the group before it stops
// them, and reports their stops with SessionLost: they may have run
// elsewhere (the simulator's seed 402235: a removed member restarted its
// fenced run, finished it and stopped it as if it had kept its session).
func TestBoundedMemberRemovedBeforeItsFinishStopsAsLost(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 2, "out": 1})
	ctx := testCtx(t)
	in := scaleout.Input{Partitions: 2, Records: 400, Keys: 8, Seed: 7, StepMillis: 10}
	if err := scaleout.Produce(ctx, b.Addrs(), "in", in); err != nil {
		t.Fatal(err)
	}
	log := &taskLog{}
	cfg := cluster.Config{Brokers: b.Addrs(), Group: "removed", Member: "a", SourceTopic: "in", KeyedTasks: 1, CheckpointBase: t.TempDir(),
		CheckpointInterval: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Minute,
		RebalanceTimeout: time.Second, RevokeCheckpointTimeout: 200 * time.Millisecond, Logger: quiet, OnTask: log.add, Bounded: true}

	// No transaction commits until a was removed (no task finishes
	// before), and none of a's group calls is answered from then until
	// it has stopped its tasks (a cannot learn of the removal from them).
	var holdGroup atomic.Bool
	commits, groupCalls := make(chan struct{}), make(chan struct{})
	var releaseGroup sync.Once
	release := func() { releaseGroup.Do(func() { close(groupCalls) }) }
	t.Cleanup(release)
	kc := b.Cluster()
	kc.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		kc.SleepControl(func() { <-commits })
		return nil, nil, false
	})
	for _, key := range []kmsg.Key{kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup} {
		kc.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			kc.KeepControl()
			if holdGroup.Load() {
				kc.SleepControl(func() { <-groupCalls })
			}
			return nil, nil, false
		})
	}
	ended := make(chan error, 1)
	go func() { ended <- cluster.Run(ctx, cfg, scaleout.WindowJob("out", 200)) }()
	weirtest.Eventually(t, "a runs its three tasks", func() bool { return len(log.running("a")) == 3 })
	holdGroup.Store(true)

	// The coordinator removes a (what a session expiry does).
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	gs, err := kadm.NewClient(cl).DescribeGroups(ctx, "removed")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = "removed"
	for _, d := range gs["removed"].Members {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = d.MemberID
		req.Members = append(req.Members, lm)
	}
	if len(req.Members) != 1 {
		t.Fatalf("the group has %d members, want a alone", len(req.Members))
	}
	if _, err := req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	close(commits)
	weirtest.Eventually(t, "a stops its three tasks", func() bool {
		n := 0
		for _, ev := range log.since(0, "a") {
			if ev.Kind == cluster.TaskStopped {
				n++
			}
		}
		return n == 3
	})
	release()
	if err := <-ended; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, ev := range log.since(0, "a") {
		if ev.Kind == cluster.TaskStopped && !ev.SessionLost {
			t.Errorf("a stopped %s without SessionLost, though the group had removed it", ev.Task)
		}
	}
}
