// Package sinkconformance is the conformance suite for exactly-once sinks:
// it runs a checkpointed job that ends in the sink under test, fails it at
// random points (in process), restores it from its latest checkpoint each
// time until it completes, and checks that the committed output equals
// that of a run without failures: every record exactly once.
//
// A sink passes it by giving three functions (Sink): how to end a stream
// in it, how to make an empty destination (a directory, a topic, a
// table), and how to read what is committed there. The suite is run by
// the sinks' own tests (connector/file, connector/kafka,
// connector/postgres and connector/parquet run it).
//
// What it checks:
//
//	S1. A failure-free run commits each of the job's records exactly once.
//	S2. Runs failed at Failures random points, each restored from the
//	    latest completed checkpoint, commit the same multiset of records
//	    as the failure-free run (nothing lost, nothing twice).
//
// Kill -9 of a process (a crash the runtime cannot see) needs a child
// process and is left to each sink's tests (connector/postgres,
// connector/parquet TestKill9, internal/crashtest TestKill9 for the Kafka
// and file sinks, cmd/weir TestRunResumesAfterKill); the suite's in-process
// failures leave the sink as a crash would (no Close-time commit).
package sinkconformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// Sink is the sink under test.
type Sink struct {
	// NewDest returns a new, empty destination; every run of one trial
	// writes to the same one.
	NewDest func(t testing.TB) string
	// Attach ends s in the sink, writing to dest. The records are
	// strings ("s<split>-<n>"); Attach maps them as the sink needs.
	Attach func(s weir.Stream[string], dest string)
	// Committed returns the records committed to dest, each as many times
	// as it is there, in any order.
	Committed func(t testing.TB, dest string) []string
}

// Options size the run; the zero value is usable.
type Options struct {
	// Records per split; 0 means 1500.
	Records int64
	// Splits of the generator; 0 means 4.
	Splits int
	// Parallelism of the job; 0 means 2.
	Parallelism int
	// Trials with failures; 0 means 3 (WEIR_CONFORMANCE_TRIALS overrides).
	Trials int
	// Failures per trial; 0 means 3.
	Failures int
	// Interval between checkpoints; 0 means 15ms.
	Interval time.Duration
	// Seed of the first trial (trial i uses Seed+i); 0 means 1.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.Records == 0 {
		o.Records = 1500
	}
	if o.Splits == 0 {
		o.Splits = 4
	}
	if o.Parallelism == 0 {
		o.Parallelism = 2
	}
	if o.Trials == 0 {
		o.Trials = 3
		if n, err := strconv.Atoi(os.Getenv("WEIR_CONFORMANCE_TRIALS")); err == nil && n > 0 {
			o.Trials = n
		}
	}
	if o.Failures == 0 {
		o.Failures = 3
	}
	if o.Interval == 0 {
		o.Interval = 15 * time.Millisecond
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// errInjected is the failure the job injects.
var errInjected = errors.New("sinkconformance: injected failure")

// Run runs the suite (S1, S2) for s. A failure names the trial's seed;
// Options{Seed: seed, Trials: 1} replays it.
func Run(t *testing.T, s Sink, o Options) {
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var want []string
	for sp := range o.Splits {
		for i := range o.Records {
			want = append(want, record(sp, i))
		}
	}
	slices.Sort(want)

	ref := s.NewDest(t)
	if err := runOnce(ctx, s, o, ref, t.TempDir(), 0); err != nil {
		t.Fatalf("failure-free run: %v", err)
	}
	got := s.Committed(t, ref)
	slices.Sort(got)
	if err := sameRecords(got, want); err != nil {
		t.Fatalf("S1: the failure-free run's committed output: %v", err)
	}

	restores := 0
	for trial := range o.Trials {
		seed := o.Seed + uint64(trial)
		rng := rand.New(rand.NewPCG(seed, 27))
		dest, chk := s.NewDest(t), filepath.Join(t.TempDir(), "chk")
		attempts := 0
		for {
			attempts++
			if _, _, err := checkpoint.Latest(chk); err == nil {
				restores++
			}
			failAt := int64(0)
			if attempts <= o.Failures {
				failAt = 1 + rng.Int64N(o.Records*int64(o.Splits))
			}
			err := runOnce(ctx, s, o, dest, chk, failAt)
			if err == nil {
				break
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("seed %d (replay with Options{Seed: %d, Trials: 1}): attempt %d: %v", seed, seed, attempts, err)
			}
			if attempts > o.Failures+5 {
				t.Fatalf("seed %d: still failing after %d attempts: %v", seed, attempts, err)
			}
		}
		got := s.Committed(t, dest)
		slices.Sort(got)
		if err := sameRecords(got, want); err != nil {
			t.Fatalf("S2: seed %d (replay with Options{Seed: %d, Trials: 1}), %d attempts: the committed output differs from the failure-free run's: %v", seed, seed, attempts, err)
		}
	}
	if restores == 0 {
		t.Fatalf("no run was restored from a checkpoint in %d trials: the suite tested nothing (raise Records or lower Interval)", o.Trials)
	}
	t.Logf("%d trials, %d runs restored from a checkpoint", o.Trials, restores)
}

func record(split int, i int64) string { return fmt.Sprintf("s%d-%06d", split, i) }

// runOnce runs the job once, restored from the latest checkpoint in chk if
// there is one, failing once failAt records have passed (0: never).
func runOnce(ctx context.Context, s Sink, o Options, dest, chk string, failAt int64) error {
	cfg := weir.Config{Parallelism: o.Parallelism, MaxParallelism: 64,
		Checkpoint: runtime.CheckpointConfig{Interval: o.Interval, Dir: chk, Retain: 2}}
	if dir, _, err := checkpoint.Latest(chk); err == nil {
		cfg.Checkpoint.RestoreFrom = dir
	}
	env := weir.NewEnvironment(cfg)
	src := weir.GenerateSplits(env, "records", o.Splits, o.Records, func(split int, i int64) weir.Record[string] {
		return weir.Record[string]{Value: record(split, i), Timestamp: i}
	}, watermark.ForMonotonous[string]()).UID("records")
	var seen atomic.Int64
	passed := weir.MapErr(src, "fail-injector", func(r string) (string, error) {
		n := seen.Add(1)
		if n%25 == 0 {
			// Let checkpoints complete while the job runs.
			time.Sleep(time.Millisecond)
		}
		if failAt > 0 && n == failAt {
			return r, errInjected
		}
		return r, nil
	}).UID("fail-injector")
	s.Attach(passed, dest)
	return env.Execute(ctx)
}

func sameRecords(got, want []string) error {
	if slices.Equal(got, want) {
		return nil
	}
	gm := map[string]int{}
	for _, g := range got {
		gm[g]++
	}
	var missing, twice []string
	for _, w := range want {
		switch gm[w] {
		case 0:
			missing = append(missing, w)
		case 1:
		default:
			twice = append(twice, w)
		}
		delete(gm, w)
	}
	var extra []string
	for k := range gm {
		extra = append(extra, k)
	}
	return fmt.Errorf("%d records committed, want %d; %d missing (first %v), %d more than once (first %v), %d unexpected (first %v)",
		len(got), len(want), len(missing), first(missing), len(twice), first(twice), len(extra), first(extra))
}

func first(s []string) []string { return s[:min(len(s), 3)] }
