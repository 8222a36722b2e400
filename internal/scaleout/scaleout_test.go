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

// The restart runs, small: three workers, one stopped with SIGTERM (a
// rolling restart) and started again with the same member name. As static
// members (cluster M6) it gets every one of its tasks back and the others
// see no task move; as dynamic members it leaves and joins again, and
// the others are handed its tasks. Both keep exactly-once.
func TestRestartMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A session far longer than a restart takes, so that the static
	// member's tasks are never given away meanwhile.
	cfg := Config{Processes: 3, Partitions: 4, KeyedTasks: 2, Records: 40_000, Keys: 32, CheckpointInterval: 200 * time.Millisecond,
		KillAfter: 0.2, Pace: 2000, RestartOnly: true, RestartSessionTimeout: 20 * time.Second, RestartDelay: time.Second, Dir: t.TempDir()}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res.Restart)
	if len(res.Restart) != 2 || !res.Restart[0].Static || res.Restart[1].Static {
		t.Fatalf("restart runs %+v: want a static one, then a dynamic one", res.Restart)
	}
	st, dyn := res.Restart[0], res.Restart[1]
	if st.Tasks == 0 || st.TasksBack != st.Tasks || st.TasksMoved != 0 {
		t.Errorf("static: %d of %d tasks back, %d moved at the others; want all back, none moved", st.TasksBack, st.Tasks, st.TasksMoved)
	}
	if dyn.Tasks == 0 || dyn.TasksMoved < dyn.Tasks {
		t.Errorf("dynamic: %d moved at the others; want at least its %d tasks handed to them", dyn.TasksMoved, dyn.Tasks)
	}
	for _, r := range res.Restart {
		if !r.OK() {
			t.Errorf("static %v: %d lost, %d duplicated, results match %v", r.Static, r.LostOutputs, r.DuplicateOutputs, r.ResultsMatchSingleProcess)
		}
	}
}
