package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// restartJob runs 4000 generated records through a map that fails at
// record 3000 the first `failures` times it sees it, into exactly-once
// files, checkpointing every few milliseconds, with strategy rs. It returns
// the job's error, its restarts metric and the committed lines.
func restartJob(t *testing.T, failures int64, rs runtime.RestartStrategy) (error, int64, []string) {
	t.Helper()
	const n = 4000
	out, chk := t.TempDir(), t.TempDir()
	var left atomic.Int64
	left.Store(failures)
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Restart: rs,
		Checkpoint: runtime.CheckpointConfig{Interval: 2 * time.Millisecond, Dir: chk}})
	src := weir.Generate(env, "numbers", n, func(i int64) weir.Record[int64] {
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.ForMonotonous[int64]()).UID("numbers")
	checked := weir.MapErr(src, "check", func(i int64) (string, error) {
		if i == 3000 && left.Add(-1) >= 0 {
			return "", fmt.Errorf("record %d: injected failure", i)
		}
		return fmt.Sprint(i), nil
	}).UID("check")
	weir.TwoPhaseCommit(checked, "sink", file.ExactlyOnce(out, func(s string) ([]byte, error) { return []byte(s), nil })).UID("sink")
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = job.Wait()
	return err, job.Metrics().Sum("job", runtime.MetricRestarts), lines(t, out)
}

// TestRestartStrategies: a step that fails twice then succeeds is restarted
// twice from the newest checkpoint, in the process, with a fixed delay and
// with back-off, and the exactly-once output holds every record once;
// without a strategy the job fails with the cause; with fewer attempts than
// failures it fails with the cause after them.
func TestRestartStrategies(t *testing.T) {
	for _, rs := range []runtime.RestartStrategy{
		{Kind: runtime.RestartFixedDelay, Attempts: 2, Delay: time.Millisecond},
		{Kind: runtime.RestartExponentialBackoff, Attempts: 2, Delay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
	} {
		err, restarts, got := restartJob(t, 2, rs)
		if err != nil || restarts != 2 {
			t.Fatalf("%+v: error %v, %d restarts; want none and 2", rs, err, restarts)
		}
		seen := map[string]bool{}
		for _, l := range got {
			seen[l] = true
		}
		if len(got) != 4000 || len(seen) != 4000 {
			t.Fatalf("%+v: %d lines, %d distinct; want the 4000 records once each", rs, len(got), len(seen))
		}
	}
	for _, c := range []struct {
		rs       runtime.RestartStrategy
		restarts int64
		want     string
	}{
		{runtime.RestartStrategy{}, 0, "record 3000: injected failure"},
		{runtime.RestartStrategy{Kind: runtime.RestartFixedDelay, Attempts: 1, Delay: time.Millisecond}, 1,
			"record 3000: injected failure (the job had been restarted 1 times; the restart strategy allows no more)"},
	} {
		err, restarts, _ := restartJob(t, 2, c.rs)
		if err == nil || !strings.HasSuffix(err.Error(), c.want) || restarts != c.restarts {
			t.Errorf("%+v: error %v, %d restarts; want one ending %q and %d restarts", c.rs, err, restarts, c.want, c.restarts)
		}
	}
}

// TestRestartStrategyValidated: bad values are refused before the job
// starts, each naming the field and what is accepted.
func TestRestartStrategyValidated(t *testing.T) {
	for _, c := range []struct {
		rs   runtime.RestartStrategy
		want string
	}{
		{runtime.RestartStrategy{Kind: 7}, "RestartStrategy.Kind 7"},
		{runtime.RestartStrategy{Attempts: -1}, "RestartStrategy.Attempts -1"},
		{runtime.RestartStrategy{Delay: -time.Second}, "RestartStrategy.Delay -1s"},
		{runtime.RestartStrategy{MaxDelay: -time.Second}, "RestartStrategy.MaxDelay -1s"},
		{runtime.RestartStrategy{Multiplier: 0.5}, "RestartStrategy.Multiplier 0.5: want 0 (meaning 2) or a number >= 1"},
		{runtime.RestartStrategy{Kind: runtime.RestartExponentialBackoff, Delay: time.Minute, MaxDelay: time.Second}, "RestartStrategy.MaxDelay 1s is shorter than Delay 1m0s"},
	} {
		err := runtime.ValidateConfig(runtime.Config{Restart: c.rs})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error with %q", c.rs, err, c.want)
		}
	}
}

// TestRestartingBetweenAttempts: Job.Restarting names the failure from the
// moment an attempt fails until the next attempt has started (a readiness
// probe's "not ready"), and is nil before and after. The restart pause runs
// on a manual clock, so the test sees the job between attempts for as long
// as it likes.
func TestRestartingBetweenAttempts(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var left atomic.Int64
	left.Store(1)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk,
		Restart: runtime.RestartStrategy{Kind: runtime.RestartFixedDelay, Attempts: 1, Delay: time.Minute}})
	src := weir.Generate(env, "numbers", 100, func(i int64) weir.Record[int64] {
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.ForMonotonous[int64]()).UID("numbers")
	var seen atomic.Int64
	weir.ToSink(weir.MapErr(src, "check", func(i int64) (int64, error) {
		if i == 50 && left.Add(-1) >= 0 {
			return 0, fmt.Errorf("record %d: injected failure", i)
		}
		return i, nil
	}).UID("check"), "count", func(*runtime.Context) (weir.SinkWriter[int64], error) {
		return weir.SinkFunc[int64](func(weir.Record[int64]) error { seen.Add(1); return nil }), nil
	})
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for job.Restarting() == nil {
		select {
		case <-job.Done():
			t.Fatalf("the job ended (%v) without Restarting reporting the failure", job.Wait())
		case <-time.After(time.Millisecond):
		}
	}
	if err := job.Restarting(); !strings.Contains(err.Error(), "record 50: injected failure") {
		t.Fatalf("Restarting() = %v: want the failure", err)
	}
	// The pause ends when the manual clock passes it.
	for done := false; !done; {
		clk.Advance(time.Minute)
		select {
		case <-job.Done():
			done = true
		case <-time.After(time.Millisecond):
		}
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := job.Restarting(); err != nil {
		t.Fatalf("after the restart Restarting() = %v: want nil", err)
	}
	if r := job.Metrics().Sum("job", runtime.MetricRestarts); r != 1 || seen.Load() < 100 {
		t.Fatalf("%d restarts, %d records to the sink: want 1 restart and every record (at least once)", r, seen.Load())
	}
}
