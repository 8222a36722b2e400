package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/sim"
)

func simCmd() *cobra.Command {
	var seeds, workers, replays int
	var seed uint64
	var asJSON, random, kafka, agent, clustered bool
	var duration time.Duration
	c := &cobra.Command{
		Use:   "sim",
		Short: "Run seeded simulations of a whole job with injected failures and check its invariants (docs/reliability.md, Simulation)",
		Long: `Each seed generates a job (a source of several splits with skewed keys and
out-of-order timestamps, a key-by, an event-time tumbling window with allowed
lateness and a late output; in some seeds beside it event-time timers, an
event-time sort per key, session windows, an agent with a scripted model
and tools; an exactly-once two-phase sink), its workload and a schedule of
failures (task failures, machine crashes with torn writes, failed fsyncs,
writes, creates and renames of the checkpoint storage, ENOSPC, clock jumps,
model and tool calls that hang, fail or answer late); the job runs,
restarting from its latest checkpoint after each failure, and its committed
output, watermarks, late records, timers, the sort's order, the state each
checkpoint keeps, the agent's side effects, leaked goroutines and the heap
are checked.

A third of the seeds also run a Kafka form (kfake, weir's Kafka source,
keyed windows, in half of them session windows too, and its exactly-once
sink; broker errors and restarts; --kafka=false leaves it out), one in 50 a
clustered form (2-3 cluster.Run members in this process, members killed,
joining and rejoining; --cluster=false leaves it out). A failing seed
prints its job, faults, the first broken invariant with the records
involved, and the command that replays it.

--seed S alone runs seed S; with --seeds N it runs S, S+1, ..., S+N-1.
--random starts at a random seed (printed first, to replay the batch);
--duration D stops the batch after D (the seeds running then are not
counted), for a time-boxed random batch in CI; SIGINT (Ctrl-C) or SIGTERM
stops it the same way, with its summary:

  weir sim --random --seeds 100000000 --duration 3m`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("seeds", int64(seeds), 1, 0)
			k.intRange("workers", int64(workers), 1, 4096)
			k.duration("duration", duration, 0)
			k.intRange("replays", int64(replays), 0, 100)
			if random && cmd.Flags().Changed("seed") {
				k.fail("--random and --seed: give one of them")
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n := seeds
			if cmd.Flags().Changed("seed") && !cmd.Flags().Changed("seeds") {
				n = 1
			}
			out := cmd.OutOrStdout()
			if random {
				seed = rand.Uint64() >> 1 // room for the batch after it
				fmt.Fprintf(out, "sim: random first seed %d (replay the batch with --seed %d --seeds %d)\n", seed, seed, n)
			}
			sigctx, stop := signalContext(cmd)
			defer stop()
			context.AfterFunc(sigctx, stop) // a second signal ends the process at once
			ctx := sigctx
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			var failed []*sim.Result
			report := func(r *sim.Result) {
				if r.Failure != nil {
					failed = append(failed, r)
				}
				if r.Failure == nil && n > 1 {
					return
				}
				if asJSON {
					json.NewEncoder(out).Encode(r)
					return
				}
				printSimResult(out, r)
			}
			opts := sim.Options{SkipKafka: !kafka, SkipAgent: !agent, Cluster: clustered}
			sum, err := sim.RunSeeds(ctx, seed, n, workers, opts, report)
			if err != nil {
				return err
			}
			if asJSON {
				json.NewEncoder(out).Encode(sum)
			} else {
				fmt.Fprintf(out, "sim: %d seeds, %d failures, %.1f seeds/s, %.1f seeds per CPU-second, live heap %d KiB before, %d KiB after, peak heap %d MiB\n",
					sum.Seeds, sum.Failures, sum.SeedsPerSecond, sum.SeedsPerCPUSecond, sum.HeapStartBytes>>10, sum.HeapEndBytes>>10, sum.PeakHeapBytes>>20)
			}
			if sum.Failures > 0 {
				counted, err := replayFailed(sigctx, out, failed, replays, opts, asJSON)
				if err != nil {
					return err
				}
				if counted > 0 {
					return fmt.Errorf("sim: %d of %d seeds failed", counted, sum.Seeds)
				}
			}
			if f := sum.MemoryFailure(); f != nil {
				return fmt.Errorf("sim: %v", f)
			}
			return nil
		},
	}
	c.Flags().IntVar(&seeds, "seeds", 100, "number of seeds to run")
	c.Flags().Uint64Var(&seed, "seed", 1, "first seed (alone: run only this seed)")
	c.Flags().IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "seeds run at once")
	c.Flags().BoolVar(&random, "random", false, "start at a random seed, printed first (not with --seed)")
	c.Flags().DurationVar(&duration, "duration", 0, "stop the batch after this long (0: run every seed)")
	c.Flags().BoolVar(&agent, "agent", true, "run the agent branch of the seeds that have one (false: leave it out)")
	c.Flags().BoolVar(&kafka, "kafka", true, "run the Kafka form of the seeds that have one (false: the scripted job only)")
	c.Flags().BoolVar(&clustered, "cluster", true, "run the clustered form of the seeds that have one (members in this process over a consumer group; false: leave it out)")
	c.Flags().IntVar(&replays, "replays", 0, "replay each failed seed this many times after the batch, alone; a time-out (S4) that does not recur is reported, not counted as a failure")
	c.Flags().BoolVar(&asJSON, "json", false, "print each reported seed and the summary as JSON objects, one a line")
	return c
}

// replayFailed runs each failed seed n more times, one at a time, prints
// how many of its replays failed, and returns how many seeds count as
// failed: all of them when n is 0; otherwise each but a time-out (S4, the
// run did not finish within its time) that none of its replays repeated,
// which the forms on real time (kfake, the clustered members) may show on
// a machine starved of CPU (docs/reliability.md, Simulation).
func replayFailed(ctx context.Context, out io.Writer, failed []*sim.Result, n int, o sim.Options, asJSON bool) (int, error) {
	if n == 0 {
		return len(failed), nil
	}
	counted := 0
	for _, r := range failed {
		again := 0
		var first *sim.Failure
		for range n {
			rr, err := sim.Run(ctx, r.Seed, o)
			if err != nil {
				return 0, err
			}
			if rr.Failure != nil {
				again++
				if first == nil {
					first = rr.Failure
				}
			}
		}
		recurred := !r.Failure.TimedOut || again > 0
		if recurred {
			counted++
		}
		if asJSON {
			json.NewEncoder(out).Encode(struct {
				Seed    uint64       `json:"seed"`
				Replays int          `json:"replays"`
				Failed  int          `json:"replays_failed"`
				First   *sim.Failure `json:"first_replay_failure,omitempty"`
				Counted bool         `json:"counted"`
			}{r.Seed, n, again, first, recurred})
			continue
		}
		fmt.Fprintf(out, "sim: seed %d replayed %d times alone: %d failed", r.Seed, n, again)
		switch {
		case first != nil:
			fmt.Fprintf(out, " (first: %v)\n", first)
		case r.Failure.TimedOut:
			fmt.Fprintf(out, "; its time-out did not recur (a starved machine, or a rare hang: the stacks above say where it waited), not counted\n")
		default:
			fmt.Fprintf(out, "; counted: only a time-out that does not recur is not\n")
		}
	}
	return counted, nil
}

func printSimResult(w io.Writer, r *sim.Result) {
	if r.Failure == nil {
		fmt.Fprintf(w, "seed %d: ok (%d attempts, %d restores)\n  job: %s\n  faults: %s\n", r.Seed, r.Attempts, r.Restores, r.Shape, r.Schedule())
		return
	}
	fmt.Fprintf(w, "seed %d: FAIL %s\n  job: %s\n  faults: %s (%d attempts, %d restores)\n  %s\n",
		r.Seed, r.Failure.Invariant, r.Shape, r.Schedule(), r.Attempts, r.Restores, r.Failure.Detail)
	for _, rec := range r.Failure.Records {
		fmt.Fprintf(w, "    %s\n", rec)
	}
	fmt.Fprintf(w, "  replay: %s\n", r.Replay)
}
