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
	var seeds, workers int
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
			ctx, stop := signalContext(cmd)
			defer stop()
			context.AfterFunc(ctx, stop) // a second signal ends the process at once
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			report := func(r *sim.Result) {
				if r.Failure == nil && n > 1 {
					return
				}
				if asJSON {
					json.NewEncoder(out).Encode(r)
					return
				}
				printSimResult(out, r)
			}
			sum, err := sim.RunSeeds(ctx, seed, n, workers, sim.Options{SkipKafka: !kafka, SkipAgent: !agent, Cluster: clustered}, report)
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
				return fmt.Errorf("sim: %d of %d seeds failed", sum.Failures, sum.Seeds)
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
	c.Flags().BoolVar(&asJSON, "json", false, "print each reported seed and the summary as JSON objects, one a line")
	return c
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
