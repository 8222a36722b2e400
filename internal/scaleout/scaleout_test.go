package scaleout

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	MaybeRunWorker()
	os.Exit(m.Run())
}

// The scale-out experiment, small: three worker processes, one killed with
// SIGKILL mid-run and one added; the committed output must equal the
// single-process run's, nothing lost, nothing twice (cluster C1).
func TestKillOneProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{Processes: 3, Partitions: 4, KeyedTasks: 2, Records: 20_000, Keys: 32,
		CheckpointInterval: 200 * time.Millisecond, KillAfter: 0.2, Pace: 2000, NoThroughput: true, Dir: t.TempDir()}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Killed != 1 || res.Added != 1 || res.KilledTasks == 0 {
		t.Errorf("killed %d (owning %d tasks), added %d; want one killed owning a task, one added", res.Killed, res.KilledTasks, res.Added)
	}
	if !res.OK() {
		t.Fatalf("exactly-once broken: %d lost, %d duplicated, results match %v", res.LostOutputs, res.DuplicateOutputs, res.ResultsMatchSingleProcess)
	}
}

// The ordering run, small: a big partition replaying while a small one,
// at its end at once, still gets history from a loader for a second, and
// live records to every partition; sorted per key by the clustered job
// (three worker processes) and by one local job. Neither may release a
// record of a key after a later one (cluster W6, kafka K5).
func TestOrderingRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{Processes: 3, Partitions: 3, KeyedTasks: 2, Keys: 16, OrderRecords: 20_000, OrderPace: 8000, LoadFor: time.Second,
		CheckpointInterval: 200 * time.Millisecond, Dir: t.TempDir()}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := RunOrdering(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if !res.OK() {
		t.Fatalf("clustered: %d out of order, %d missing, %d duplicated; local: %d out of order, %d missing, %d duplicated",
			res.ClusteredViolations, res.ClusteredMissing, res.ClusteredDuplicated, res.LocalViolations, res.LocalMissing, res.LocalDuplicated)
	}
}
