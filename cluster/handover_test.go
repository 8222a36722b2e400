package cluster_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/internal/scaleout"
	"github.com/weirproject/weir/weirtest"
)

// M1, M2, C1, C3: a second process joins mid-run and takes tasks over
// (each checkpointed by the first before it moves), then the first stops
// mid-run and hands the rest over; the output equals the local job's.
func TestHandOverMidRun(t *testing.T) {
	b := startBroker(t, map[string]int32{"in": 4, "out-local": 1, "out-cluster": 1})
	ctx := testCtx(t)
	in := scaleout.Input{Partitions: 4, Records: 8000, Keys: 16, Seed: 2, StepMillis: 10}
	if err := scaleout.Produce(ctx, b.Addrs(), "in", in); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []cluster.TaskEvent
	cfg := cluster.Config{Brokers: b.Addrs(), Group: "handover", SourceTopic: "in", KeyedTasks: 2, CheckpointBase: t.TempDir(),
		CheckpointInterval: 100 * time.Millisecond, Bounded: true, SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: quiet, OnTask: func(ev cluster.TaskEvent) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}}
	want := reference(t, ctx, cfg, "out-local")
	started := func(member string, restored bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ev := range events {
			if ev.Member == member && ev.Kind == cluster.TaskStarted && (!restored || ev.Restored != "") {
				n++
			}
		}
		return n
	}
	job := scaleout.WindowJob("out-cluster", 1000) // 2,000 records per source task: about 2 s each
	run := func(c context.Context, member string) chan error {
		done := make(chan error, 1)
		mc := cfg
		mc.Member = member
		go func() { done <- cluster.Run(c, mc, job) }()
		return done
	}
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	aDone := run(actx, "a")
	weirtest.Eventually(t, "a runs all 6 tasks", func() bool { return started("a", false) >= 6 })
	bDone := run(ctx, "b")
	weirtest.Eventually(t, "b restores a task a handed over", func() bool { return started("b", true) >= 1 })
	stopA()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("a: %v, want context.Canceled", err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	got, err := scaleout.ReadTotals(ctx, cfg.Brokers, "out-cluster")
	if err != nil {
		t.Fatal(err)
	}
	if lost, dup := scaleout.Compare(want, got); lost != 0 || dup != 0 || !maps.Equal(want, got) {
		t.Fatalf("after the hand-overs: %d lost, %d duplicated (%d totals, want %d)", lost, dup, len(got), len(want))
	}
	t.Logf("b restored %d tasks; %d totals, %d records", started("b", true), len(got), sumCounts(got))
	// Every start of a task claimed a greater epoch of its checkpoint
	// location (C4), whichever process it ran in.
	mu.Lock()
	defer mu.Unlock()
	last := map[string]int64{}
	for _, ev := range events {
		if ev.Kind != cluster.TaskStarted {
			continue
		}
		if ev.Epoch <= last[ev.Task] {
			t.Errorf("%s started in %s at epoch %d, after a start at epoch %d", ev.Task, ev.Member, ev.Epoch, last[ev.Task])
		}
		last[ev.Task] = ev.Epoch
	}
}
