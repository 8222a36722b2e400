package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/scaleout"
)

// scaleoutCmd is `weir experiment scaleout`: one clustered job over
// several processes, one killed with SIGKILL (package internal/scaleout).
func scaleoutCmd() *cobra.Command {
	var cfg scaleout.Config
	var asJSON, verbose, withOrdering, orderingOnly bool
	c := &cobra.Command{
		Use:   "scaleout",
		Short: "Run one job over several processes on the embedded broker, kill one with SIGKILL, add one, and compare with one process",
		Long: `Runs a keyed job (count and sum per key in one-second event-time windows, exactly-once Kafka
sink) as a clustered job (package cluster) over worker processes of this binary on the embedded
broker: --processes of them at first; once --kill-after of the input has reached the exchange
topic one is killed with SIGKILL; once its tasks run elsewhere one more is added. The committed
output is compared with the same job run as one local job over the same input. Then the job runs
again with each process count of --throughput to measure its speed.

  lostOutputs, duplicateOutputs     must be 0
  resultsMatchSingleProcess         must be true
  rebalanceSeconds                  kill to every task of the killed process running again
  recordsPerSecByProcesses          throughput by process count (one machine: cannot scale on 2 cores)

With --agent kafka,wal it then runs an agent job the same way, once per action-state store (its
own broker; the WAL's workers share one directory, as on one machine): each input's action makes
one durable call to a side-effect service on 127.0.0.1 that counts calls per idempotency key; once
--kill-after of the effects are made, a worker running a keyed task is killed with SIGKILL, then
one is added. Under "agent", per store:

  lostInputs, lostOutputs, duplicateOutputs   must be 0 (every input answered once, read_committed)
  effects, duplicateEffects                   effects == inputs; duplicateEffects (asked under a second key) must be 0
  residualWindowEffects, residualBound        calls repeated under their key (a service ignoring keys applies them twice), at most the bound

With --ordering (on by default) it then runs an ordering job (a sort per key by event time) over
uneven partitions: partition 1 replays --order-records records of history, partition 0 starts with
a thousandth of that and a loader writes the rest of its history to it for --load-for after the
start, and live records go to every partition meanwhile; once clustered over --processes workers,
once as one local job on the same input. Under "ordering":

  clusteredViolations, localViolations   records released after a later record of their key: must be 0
  ...Missing, ...Duplicated              must be 0

--ordering-only runs the ordering run alone.

With --restart-member it then runs the restart runs: --processes workers, one of them (running
tasks of both stages) stopped with --restart-signal (TERM, as in a rolling restart, or KILL) once
--kill-after of the input has reached the exchange topic, and started again with the same member
name --restart-delay after it has exited; once as static members of the group (group.instance.id
= member name), once as dynamic ones, with --restart-session-timeout. Under "restart", per run:

  tasks, tasksBack          the restarted worker's tasks, and how many it ran again
  tasksMoved                tasks started or handed over in the other workers (static: 0)
  pauseSeconds              signal to every task of the restarted worker running again
  taskDownSeconds           summed over tasks, time they ran nowhere (moved away and back: twice)
  lostOutputs, duplicateOutputs, resultsMatchSingleProcess   as above

--restart-only runs the restart runs alone.`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("processes", int64(cfg.Processes), 2, 64)
			k.intRange("partitions", int64(cfg.Partitions), 1, 1024)
			k.intRange("keyed-tasks", int64(cfg.KeyedTasks), 1, 128)
			k.intRange("records", int64(cfg.Records), 1, 0)
			k.intRange("keys", int64(cfg.Keys), 1, 0)
			k.intRange("pace", int64(cfg.Pace), 0, -1)
			k.duration("checkpoint-interval", cfg.CheckpointInterval, time.Millisecond)
			k.duration("timeout", cfg.Timeout, time.Second)
			if cfg.KillAfter <= 0 || cfg.KillAfter >= 1 {
				k.fail("--kill-after %v: want a share between 0 and 1, such as 0.3", cfg.KillAfter)
			}
			for _, n := range cfg.Throughput {
				k.intRange("throughput", int64(n), 1, 64)
			}
			for _, st := range cfg.Agent {
				k.oneOf("agent", st, "kafka", "wal")
			}
			k.intRange("agent-inputs", int64(cfg.AgentInputs), 1, 0)
			k.intRange("agent-keys", int64(cfg.AgentKeys), 1, 0)
			k.intRange("agent-pace", int64(cfg.AgentPace), 1, -1)
			k.duration("call-delay", cfg.CallDelay, time.Microsecond)
			k.intRange("order-records", int64(cfg.OrderRecords), 1000, 0)
			k.intRange("order-pace", int64(cfg.OrderPace), 0, -1)
			k.duration("load-for", cfg.LoadFor, time.Millisecond)
			k.oneOf("restart-signal", cfg.RestartSignal, "TERM", "KILL")
			k.duration("restart-session-timeout", cfg.RestartSessionTimeout, 500*time.Millisecond)
			k.duration("restart-delay", cfg.RestartDelay, 0)
			if k.err == nil && !cfg.RestartMember && !cfg.RestartOnly {
				for _, f := range []string{"restart-signal", "restart-session-timeout", "restart-delay"} {
					if cmd.Flags().Changed(f) {
						k.fail("--%s: needs --restart-member or --restart-only (it configures the restart runs)", f)
					}
				}
			}
			if k.err == nil && cfg.ThroughputOnly && (cfg.RestartOnly || orderingOnly || len(cfg.Throughput) == 0) {
				k.fail("--throughput-only: needs process counts in --throughput, and not --restart-only or --ordering-only")
			}
			if k.err == nil && cfg.RestartOnly && orderingOnly {
				k.fail("--restart-only and --ordering-only: give one of them")
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Program = exe
			cfg.NoThroughput = len(cfg.Throughput) == 0
			if verbose {
				cfg.Log = cmd.ErrOrStderr()
			}
			var res scaleout.Result
			if cfg.RestartOnly {
				withOrdering = false
			}
			if !orderingOnly {
				if res, err = scaleout.Run(ctx, cfg); err != nil {
					return err
				}
			}
			if withOrdering || orderingOnly {
				o, err := scaleout.RunOrdering(ctx, cfg)
				if err != nil {
					return err
				}
				res.Ordering = &o
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(out).Encode(res); err != nil {
					return err
				}
			} else if cfg.RestartOnly {
				fmt.Fprintf(out, "restart runs: %d processes, %d records, %d totals\n", cfg.Processes, res.Records, res.Totals)
				printRestarts(out, res.Restart)
			} else if !orderingOnly {
				if !cfg.ThroughputOnly {
					fmt.Fprintf(out, "%d processes, %d killed, %d added; %d records, %d totals\n", res.Processes, res.Killed, res.Added, res.Records, res.Totals)
					fmt.Fprintf(out, "  outputs lost %d, duplicated %d; results match one process: %v\n", res.LostOutputs, res.DuplicateOutputs, res.ResultsMatchSingleProcess)
					fmt.Fprintf(out, "  the killed process owned %d tasks, running again after %.2fs; the kill run took %.1fs\n", res.KilledTasks, res.RebalanceSeconds, res.KillRunSeconds)
				}
				fmt.Fprintf(out, "  local job (one process, no exchange): %.0f records/s; CPU per record %.1f µs, broker included\n", res.SingleProcessRecordsPerSec, res.SingleProcessCPUMicrosPerRecord)
				var ns []int
				for k := range res.RecordsPerSecByProcesses {
					n, _ := strconv.Atoi(k)
					ns = append(ns, n)
				}
				sort.Ints(ns)
				for _, n := range ns {
					k := strconv.Itoa(n)
					fmt.Fprintf(out, "  clustered, %d processes: %.0f records/s; CPU per record: workers %.1f µs, broker %.1f µs (%.2f× the local job's)\n",
						n, res.RecordsPerSecByProcesses[k], res.WorkerCPUMicrosPerRecord[k], res.BrokerCPUMicrosPerRecord[k], res.CPURatioByProcesses[k])
				}
				printRestarts(out, res.Restart)
				for _, a := range res.Agent {
					fmt.Fprintf(out, "  agent, %s store: %d inputs; %d killed owning %d keyed tasks, %d keyed restarts; inputs lost %d, outputs lost %d, duplicated %d\n",
						a.Store, a.Inputs, a.Killed, a.KilledKeyedTasks, a.KeyedRestarts, a.LostInputs, a.LostOutputs, a.DuplicateOutputs)
					fmt.Fprintf(out, "    effects %d, under a second key %d; calls repeated under their key %d (bound %d)\n",
						a.Effects, a.DuplicateEffects, a.ResidualWindowEffects, a.ResidualBound)
				}
			}
			if o := res.Ordering; o != nil && !asJSON {
				fmt.Fprintf(out, "ordering run: %d records (partition 1: %d of history; partition 0: %d, then %d loaded over %v; %d live)\n",
					o.Records, o.BigPartition, o.SmallHistory, o.Loaded, cfg.LoadFor, o.Live)
				fmt.Fprintf(out, "  each source task paced at %d records/s, so that partition 1 replays while the loader writes\n", o.Pace)
				fmt.Fprintf(out, "  clustered, %d processes: %d out of order, %d missing, %d duplicated (%.1fs)\n",
					o.Processes, o.ClusteredViolations, o.ClusteredMissing, o.ClusteredDuplicated, o.ClusteredSeconds)
				fmt.Fprintf(out, "  local job:              %d out of order, %d missing, %d duplicated (%.1fs)\n",
					o.LocalViolations, o.LocalMissing, o.LocalDuplicated, o.LocalSeconds)
			}
			if orderingOnly && res.Ordering != nil && !res.Ordering.OK() {
				return fmt.Errorf("experiment scaleout: records out of order, lost or repeated in the ordering run (see above)")
			}
			if !orderingOnly && !res.OK() {
				return fmt.Errorf("experiment scaleout: outputs were lost, repeated or differ from one process (see above)")
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Processes, "processes", 3, "worker processes at the start of the kill run")
	f.IntVar(&cfg.Partitions, "partitions", 8, "partitions of the input topic (source tasks)")
	f.IntVar(&cfg.KeyedTasks, "keyed-tasks", 4, "keyed tasks (partitions of the exchange topic)")
	f.IntVar(&cfg.Records, "records", 200_000, "input records")
	f.IntVar(&cfg.Keys, "keys", 256, "keys the input spreads over")
	f.IntVar(&cfg.Pace, "pace", 2000, "records per second of each source task in the kill run (0: unbounded), so that the kill and the addition happen mid-run")
	f.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", 500*time.Millisecond, "checkpoint interval of every task")
	f.Float64Var(&cfg.KillAfter, "kill-after", 0.3, "share of the input in the exchange topic before the kill")
	f.IntSliceVar(&cfg.Throughput, "throughput", []int{1, 2, 4}, "process counts of the throughput runs (empty: none)")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "bound on each run")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the input")
	f.StringSliceVar(&cfg.Agent, "agent", nil, "action-state stores of the agent kill runs after the others: kafka, wal (none by default)")
	f.IntVar(&cfg.AgentInputs, "agent-inputs", 2000, "inputs of each agent run")
	f.IntVar(&cfg.AgentKeys, "agent-keys", 64, "keys the agent runs' inputs spread over")
	f.IntVar(&cfg.AgentPace, "agent-pace", 50, "inputs per second of each source task in the agent runs")
	f.DurationVar(&cfg.CallDelay, "call-delay", 5*time.Millisecond, "the side-effect service's time per call in the agent runs")
	f.BoolVar(&withOrdering, "ordering", true, "run the ordering run after the others")
	f.BoolVar(&orderingOnly, "ordering-only", false, "run the ordering run alone")
	f.IntVar(&cfg.OrderRecords, "order-records", 200_000, "history records of the ordering run's big partition")
	f.IntVar(&cfg.OrderPace, "order-pace", 0, "records per second of each source task in the ordering run (0: the big partition's history over 3 × --load-for, so that it replays while the loader writes)")
	f.DurationVar(&cfg.LoadFor, "load-for", 2*time.Second, "how long the ordering run's loader writes to the small partition after the start")
	f.BoolVar(&cfg.RestartMember, "restart-member", false, "after the kill run, the restart runs: one worker stopped and started again with the same member name, as static and as dynamic members")
	f.BoolVar(&cfg.RestartOnly, "restart-only", false, "run the restart runs alone")
	f.StringVar(&cfg.RestartSignal, "restart-signal", "TERM", "the signal that stops the restarted worker: TERM (a rolling restart: its tasks checkpointed first) or KILL")
	f.DurationVar(&cfg.RestartSessionTimeout, "restart-session-timeout", 10*time.Second, "the group session timeout of the restart runs (a static member's tasks wait that long for it)")
	f.DurationVar(&cfg.RestartDelay, "restart-delay", 2*time.Second, "the pause between the restarted worker's exit and its new start (an orchestrator's restart)")
	f.BoolVar(&cfg.ThroughputOnly, "throughput-only", false, "skip the kill run: the local job and the throughput runs alone (CPU per record; cpuRatioByProcesses)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	f.BoolVar(&verbose, "verbose", false, "log progress and the workers' warnings to stderr")
	return c
}

// printRestarts prints the restart runs, one line each.
func printRestarts(out io.Writer, rs []scaleout.RestartResult) {
	for _, r := range rs {
		kind := "dynamic"
		if r.Static {
			kind = "static "
		}
		fmt.Fprintf(out, "  restart, %s members, SIG%s (session %gs, restarted %.2fs after the signal): %d of its %d tasks back, %d task moves at the others; pause %.2fs, tasks down %.2fs in all; outputs lost %d, duplicated %d\n",
			kind, r.Signal, r.SessionTimeoutSeconds, r.RestartSeconds, r.TasksBack, r.Tasks, r.TasksMoved, r.PauseSeconds, r.TaskDownSeconds, r.LostOutputs, r.DuplicateOutputs)
	}
}
