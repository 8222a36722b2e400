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
