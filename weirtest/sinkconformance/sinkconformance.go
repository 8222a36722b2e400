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
	// Name identifies the sink to the kill9 mode's child process, which
	// finds it among those given to MaybeChild; unique within a test
	// binary. Required.
	Name string
	// NewDest returns a new, empty destination; every run of one trial
	// writes to the same one. It runs in the test's process only.
	NewDest func(t testing.TB) string
	// Attach ends s in the sink, writing to dest. The records are
	// strings ("s<split>-<n>"); Attach maps them as the sink needs. It
	// also runs in the kill9 mode's child processes, so it must depend on
	// dest alone.
	Attach func(s weir.Stream[string], dest string)
	// Committed returns the records committed to dest, each as many times
	// as it is there, in any order. It runs in the test's process once
	// the job has completed.
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
	// Trials of the crash mode; 0 means 3 (WEIR_CONFORMANCE_TRIALS
	// overrides).
	Trials int
	// Failures per crash trial; 0 means 3.
	Failures int
	// KillTrials of the kill9 mode; 0 means 2
	// (WEIR_CONFORMANCE_KILL_TRIALS overrides).
	KillTrials int
	// Kills per kill9 trial (at most; a child may complete before its
	// kill point); 0 means 3.
	Kills int
	// Interval between checkpoints; 0 means 15ms.
	Interval time.Duration
	// Seed of the first trial (trial i uses Seed+i); 0 means 1
	// (WEIR_CONFORMANCE_SEED overrides, to replay a failure).
	Seed uint64
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int, env string) {
		if *v == 0 {
			*v = d
			if n, err := strconv.Atoi(os.Getenv(env)); env != "" && err == nil && n > 0 {
				*v = n
			}
		}
	}
	if o.Records == 0 {
		o.Records = 1500
	}
	def(&o.Splits, 4, "")
	def(&o.Parallelism, 2, "")
	def(&o.Trials, 3, "WEIR_CONFORMANCE_TRIALS")
	def(&o.Failures, 3, "")
	def(&o.KillTrials, 2, "WEIR_CONFORMANCE_KILL_TRIALS")
	def(&o.Kills, 3, "")
	if o.Interval == 0 {
		o.Interval = 15 * time.Millisecond
	}
	if n, err := strconv.ParseUint(os.Getenv("WEIR_CONFORMANCE_SEED"), 10, 64); err == nil && n > 0 {
		o.Seed = n
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

func (o Options) total() int64 { return o.Records * int64(o.Splits) }

// errInjected is the failure the crash mode injects.
var errInjected = errors.New("sinkconformance: injected failure")

// Run runs the suite (S1, then S2 and S3 as the subtests crash and
// kill9) for s. A failure names the trial's seed and how to replay it.
func Run(t *testing.T, s Sink, o Options) {
	if s.Name == "" {
		t.Fatal("sinkconformance: Sink.Name is empty: name the sink and pass it to sinkconformance.MaybeChild in the package's TestMain")
	}
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var want []string
	for sp := range o.Splits {
		for i := range o.Records {
			want = append(want, record(sp, i))
		}
	}
	slices.Sort(want)

	ref := s.NewDest(t)
	if err := runJob(ctx, s, o, ref, t.TempDir(), nil); err != nil {
		t.Fatalf("failure-free run: %v", err)
	}
	got := s.Committed(t, ref)
	slices.Sort(got)
	if err := sameRecords(got, want); err != nil {
		t.Fatalf("S1: the failure-free run's committed output: %v", err)
	}
	t.Run("crash", func(t *testing.T) { runCrash(ctx, t, s, o, want) })
	t.Run("kill9", func(t *testing.T) {
		if testing.Short() {
			t.Skip("spawns processes")
		}
		runKill(ctx, t, s, o, want)
	})
}

// runCrash is the crash mode (S2).
func runCrash(ctx context.Context, t testing.TB, s Sink, o Options, want []string) {
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
			var at func(n int64) error
			if attempts <= o.Failures {
				failAt := 1 + rng.Int64N(o.total())
				at = func(n int64) error {
					if n == failAt {
						return errInjected
					}
					return nil
				}
			}
			err := runJob(ctx, s, o, dest, chk, at)
			if err == nil {
				break
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("%s: attempt %d: %v", replay(seed), attempts, err)
			}
			if attempts > o.Failures+5 {
				t.Fatalf("%s: still failing after %d attempts: %v", replay(seed), attempts, err)
			}
		}
		got := s.Committed(t, dest)
		slices.Sort(got)
		if err := sameRecords(got, want); err != nil {
			t.Fatalf("S2: %s, %d attempts: the committed output differs from the failure-free run's: %v", replay(seed), attempts, err)
		}
	}
	if restores == 0 {
		t.Fatalf("no run was restored from a checkpoint in %d trials: the suite tested nothing (raise Records or lower Interval)", o.Trials)
	}
	t.Logf("%d trials, %d runs restored from a checkpoint", o.Trials, restores)
}

// replay names a trial's seed and how to run it alone.
func replay(seed uint64) string {
	return fmt.Sprintf("seed %d (replay: WEIR_CONFORMANCE_SEED=%d WEIR_CONFORMANCE_TRIALS=1 WEIR_CONFORMANCE_KILL_TRIALS=1)", seed, seed)
}

func record(split int, i int64) string { return fmt.Sprintf("s%d-%06d", split, i) }

// runJob runs the job once, restored from the latest checkpoint in chk if
// there is one. at, if not nil, is called with the count of records that
// have passed (1, 2, ...) as each passes; an error fails the job.
func runJob(ctx context.Context, s Sink, o Options, dest, chk string, at func(n int64) error) error {
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
		if at != nil {
			return r, at(n)
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
