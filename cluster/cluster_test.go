package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/internal/s3test"
	"github.com/weirproject/weir/internal/scaleout"
	"github.com/weirproject/weir/internal/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startBroker(t *testing.T, topics map[string]int32) *broker.Broker {
	t.Helper()
	return testenv.StartBroker(t, broker.Options{Topics: topics,
		Configs: map[string]string{"group.min.session.timeout.ms": "500"}})
}

func testCtx(t *testing.T) context.Context { return testenv.Context(t, 2*time.Minute) }

// reference runs the job as one plain local job and returns its output.
func reference(t *testing.T, ctx context.Context, cfg cluster.Config, out string) map[scaleout.Total]int {
	t.Helper()
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet})
	stop := make(chan struct{})
	close(stop)
	if err := cluster.BuildLocal(env, cfg, scaleout.WindowJob(out, 0), stop); err != nil {
		t.Fatal(err)
	}
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := scaleout.ReadTotals(ctx, cfg.Brokers, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("the local job wrote nothing")
	}
	return got
}

// C1 with one process: every task of both stages runs in it, and the
// committed output equals the plain local job's.
func TestOneProcessEqualsLocalJob(t *testing.T) { oneProcessEqualsLocalJob(t, t.TempDir()) }

// The same with every task's checkpoints in an object store (S3, served in
// the test), at a URL: the finished markers and the restores go there too.
func TestOneProcessCheckpointsInS3(t *testing.T) {
	base := s3test.Start(t, "cluster")
	oneProcessEqualsLocalJob(t, base)
	if keys := s3test.Keys(t, base); !slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "/_metadata") }) {
		t.Fatalf("no checkpoint in %s: %v", base, keys)
	}
}

func oneProcessEqualsLocalJob(t *testing.T, base string) {
	b := startBroker(t, map[string]int32{"in": 4, "out-local": 1, "out-cluster": 2})
	ctx := testCtx(t)
	in := scaleout.Input{Partitions: 4, Records: 4000, Keys: 16, Seed: 1, StepMillis: 10}
	if err := scaleout.Produce(ctx, b.Addrs(), "in", in); err != nil {
		t.Fatal(err)
	}
	cfg := cluster.Config{Brokers: b.Addrs(), Group: "g1", SourceTopic: "in", KeyedTasks: 3, CheckpointBase: base,
		CheckpointInterval: 100 * time.Millisecond, Bounded: true, SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: quiet}
	want := reference(t, ctx, cfg, "out-local")
	var mu sync.Mutex
	started := map[string]int{}
	cfg.OnTask = func(ev cluster.TaskEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Kind == cluster.TaskStarted {
			started[ev.Task]++
		}
	}
	if err := cluster.Run(ctx, cfg, scaleout.WindowJob("out-cluster", 0)); err != nil {
		t.Fatal(err)
	}
	got, err := scaleout.ReadTotals(ctx, cfg.Brokers, "out-cluster")
	if err != nil {
		t.Fatal(err)
	}
	if lost, dup := scaleout.Compare(want, got); lost != 0 || dup != 0 || !maps.Equal(want, got) {
		t.Fatalf("clustered output differs from the local job's: %d lost, %d duplicated (%d totals, want %d)", lost, dup, len(got), len(want))
	}
	t.Logf("%d totals, %d records counted; tasks started %v", len(got), sumCounts(got), started)
	if len(started) != 4+3 {
		t.Errorf("tasks started: %v, want 7 tasks", started)
	}
}

func sumCounts(m map[scaleout.Total]int) int64 {
	var n int64
	for t, c := range m {
		n += t.Count * int64(c)
	}
	return n
}
