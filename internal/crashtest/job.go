// Package crashtest runs a checkpointed job with failures injected at
// random points, restarting it from its latest checkpoint each time, so
// tests (and the soak command) can compare its exactly-once output with
// that of a failure-free run.
package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// Options describe one job.
type Options struct {
	Records     int64
	Keys        int
	Parallelism int
	// Interval between checkpoints.
	Interval time.Duration
	// Mode of checkpoints.
	Mode runtime.CheckpointMode
	// Out is the exactly-once sink's directory; Checkpoints the checkpoint
	// directory.
	Out, Checkpoints string
	// FailAt, when > 0, makes the job fail after that many records have
	// passed the failing operator in this attempt.
	FailAt int64
	// Throttle sleeps a millisecond every Throttle records (0: never), so
	// checkpoints happen while the job runs.
	Throttle int64
	// StateBackend is the keyed-state backend ("" or "memory", "pebble").
	StateBackend string
}

// ErrInjected is the failure the job injects.
var ErrInjected = errors.New("crashtest: injected failure")

type event struct {
	Key string
	Seq int64
}

// Run runs the job once: restored from the latest checkpoint in
// o.Checkpoints if there is one. It returns ErrInjected (wrapped) when the
// injected failure struck.
func Run(ctx context.Context, o Options) error {
	cfg := weir.Config{Parallelism: o.Parallelism, MaxParallelism: 128,
		Checkpoint:   runtime.CheckpointConfig{Interval: o.Interval, Dir: o.Checkpoints, Mode: o.Mode, Retain: 2},
		StateBackend: runtime.StateBackendConfig{Kind: o.StateBackend}}
	if dir, _, err := checkpoint.Latest(o.Checkpoints); err == nil {
		cfg.Checkpoint.RestoreFrom = dir
	}
	env := weir.NewEnvironment(cfg)
	keys := make([]string, o.Keys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	src := weir.Generate(env, "events", o.Records, func(i int64) weir.Record[event] {
		return weir.Record[event]{Value: event{Key: keys[(i*31)%int64(len(keys))], Seq: i}, Timestamp: i}
	}, watermark.ForMonotonous[event]()).UID("events")
	var seen atomic.Int64
	passed := weir.MapErr(src, "fail-injector", func(e event) (event, error) {
		n := seen.Add(1)
		if o.Throttle > 0 && n%o.Throttle == 0 {
			time.Sleep(time.Millisecond)
		}
		if o.FailAt > 0 && n == o.FailAt {
			return e, ErrInjected
		}
		return e, nil
	}).UID("fail-injector")
	counts := weir.Process(weir.KeyBy(passed, func(e event) string { return e.Key }), "count",
		func() weir.KeyedProcessFunction[string, event, string] { return &counter{} }).UID("count")
	weir.TwoPhaseCommit(counts, "out", file.ExactlyOnce(o.Out, func(s string) ([]byte, error) { return []byte(s), nil })).UID("out")
	return env.Execute(ctx)
}

// counter counts each key's records in value state, and also appends each
// record's sequence number to list state (on Pebble a merge operand), which
// must always hold exactly as many items as the count, the last one this
// record's: a restore that lost or repeated an append fails the job.
type counter struct {
	n    *state.ValueState[string, int64]
	seqs *state.ListState[string, int64]
}

func (c *counter) Open(ctx *weir.KeyedContext[string, string]) error {
	var err error
	if c.n, err = state.Value[string, int64](ctx.State(), "n"); err != nil {
		return err
	}
	c.seqs, err = state.List[string, int64](ctx.State(), "seqs")
	return err
}

func (c *counter) ProcessElement(e event, ctx *weir.KeyedContext[string, string]) error {
	n, _ := c.n.Value()
	n++
	c.n.Update(n)
	c.seqs.Add(e.Seq)
	if l := c.seqs.Get(); int64(len(l)) != n || l[len(l)-1] != e.Seq {
		return fmt.Errorf("crashtest: key %s: list state has %d items (last %v), the count is %d at record %d", e.Key, len(l), l[len(l)-1:], n, e.Seq)
	}
	ctx.Collect(fmt.Sprintf("%s %d %d", e.Key, n, e.Seq))
	return nil
}

func (c *counter) OnTimer(int64, *weir.KeyedContext[string, string]) error { return nil }

// Restores counts the runs that started from a checkpoint.
var Restores atomic.Int64

// RunWithFailures runs the job, failing it at `failures` random points and
// restarting from the latest checkpoint until it completes. It returns the
// number of attempts.
func RunWithFailures(ctx context.Context, o Options, failures int, rng *rand.Rand) (int, error) {
	attempts := 0
	for {
		attempts++
		if _, _, err := checkpoint.Latest(o.Checkpoints); err == nil {
			Restores.Add(1)
		}
		oo := o
		if attempts <= failures {
			oo.FailAt = 1 + rng.Int64N(o.Records)
		}
		err := Run(ctx, oo)
		if err == nil {
			return attempts, nil
		}
		if !errors.Is(err, ErrInjected) {
			return attempts, err
		}
		if attempts > failures+5 {
			return attempts, fmt.Errorf("crashtest: still failing after %d attempts: %w", attempts, err)
		}
	}
}
