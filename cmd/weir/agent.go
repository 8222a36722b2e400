package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/agent/agentbench"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/keygroup"
)

// agentCmd is `weir experiment agent`: the agent operator on the offline
// model, against its in-flight limit and the blocking variant, with the
// CPU it costs per action (see package agentbench).
func agentCmd() *cobra.Command {
	var cfg agentbench.ExperimentConfig
	var asJSON bool
	var dist string
	var mean time.Duration
	var stores []string
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the agent operator on the offline model: throughput against the in-flight limit, held watermarks, CPU per action",
		Long: `Runs an agent (one model call per input) over --keys keys on the offline model,
whose latency is drawn from --latency-dist with mean --latency-mean, and reports:

  throughputPerSec     actions per second in the steady state
  idealPerSec          in-flight limit × parallelism ÷ mean latency
  watermarkViolations  outputs that reached the sink behind a forwarded watermark (must be 0)
  heldWatermarksMax    the most watermarks the operator held at once
  cpuMicrosPerAction   the operator's CPU per action beyond a hand-written loop doing
                       the same work (zero-latency runs)
  callToOutput*Micros  mean and 99th percentile of the time from a model call's return
                       to its output at the sink; with a store, storeMeanMicros is the
                       mean beyond the run without one (what the store adds to a slot)

then the same workload on the blocking variant (actions on the subtask goroutine).`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("inputs", int64(cfg.Inputs), 1, 0)
			k.intRange("keys", int64(cfg.Keys), 1, 0)
			k.intRange("limit", int64(cfg.MaxConcurrentKeys), 1, 0)
			k.intRange("parallelism", int64(cfg.Parallelism), 1, keygroup.UpperBound)
			k.oneOf("latency-dist", dist, "fixed", "uniform", "exponential", "lognormal")
			k.duration("latency-mean", mean, 0)
			k.duration("watermark-interval", cfg.WatermarkInterval, time.Millisecond)
			for _, st := range stores {
				k.oneOf("stores", st, "wal", "kafka")
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cfg.Latency.Dist, cfg.Latency.Mean = dist, mean
			if err := cfg.Latency.Validate(); err != nil {
				return err
			}
			for _, name := range stores {
				switch name {
				case "wal":
					dir, err := os.MkdirTemp("", "weir-agent-wal-")
					if err != nil {
						return err
					}
					defer os.RemoveAll(dir)
					cfg.Stores = append(cfg.Stores, agentbench.Config{StoreName: name, Store: wal.Factory(dir, wal.Options{})})
				case "kafka":
					b, err := broker.Start(broker.Options{})
					if err != nil {
						return err
					}
					defer b.Close()
					cfg.Stores = append(cfg.Stores, agentbench.Config{StoreName: name, Store: kafkastore.Factory(kafkastore.Options{
						Brokers: b.Addrs(), Topic: "agent-experiment-actions", Logger: slog.New(slog.DiscardHandler)})})
				}
			}
			rep, err := agentbench.Experiment(ctx, cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			a := rep.Async
			fmt.Fprintf(out, "inputs               %d over %d keys, in-flight limit %d × %d subtask(s), latency %s mean %.1fms\n",
				a.Inputs, a.Keys, a.MaxConcurrentKeys, a.Parallelism, a.LatencyDist, a.MeanLatencyMs)
			fmt.Fprintf(out, "throughput           %.0f actions/s (overall %.0f/s, %.1fs)\n", a.ThroughputPerSec, a.OverallPerSec, a.Seconds)
			fmt.Fprintf(out, "ideal                %.0f actions/s (efficiency %.0f%%)\n", a.IdealPerSec, 100*a.Efficiency)
			fmt.Fprintf(out, "watermark violations %d (%d watermarks reached the sink)\n", rep.WatermarkViolations, a.Watermarks)
			fmt.Fprintf(out, "held watermarks max  %d\n", a.HeldWatermarksMax)
			fmt.Fprintf(out, "call to output       mean %.0f µs, p99 %.0f µs\n", a.CallToOutputMeanMicros, a.CallToOutputP99Micros)
			if rep.CPU != nil {
				fmt.Fprintf(out, "CPU per action       %.2f µs beyond the hand-written loop (agent %.2f µs, loop %.2f µs per input)\n",
					rep.CPUMicrosPerAction, rep.CPU.AgentMicros, rep.CPU.LoopMicros)
			}
			for _, st := range rep.Stores {
				fmt.Fprintf(out, "with store %-9s %.0f actions/s (ideal %.0f/s, efficiency %.0f%%), %d watermark violations; call to output mean %.0f µs (+%.0f µs), p99 %.0f µs\n",
					st.Store, st.ThroughputPerSec, st.IdealPerSec, 100*st.Efficiency, st.WatermarkViolations,
					st.CallToOutputMeanMicros, st.StoreMeanMicros, st.CallToOutputP99Micros)
			}
			if b := rep.Blocking; b != nil {
				fmt.Fprintf(out, "blocking variant     %.0f actions/s on %d inputs (ideal %.0f/s); async is %.0f× faster\n",
					b.OverallPerSec, b.Inputs, b.IdealPerSec, rep.SpeedupVsBlocking)
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Inputs, "inputs", 100_000, "input records")
	f.IntVar(&cfg.Keys, "keys", 10_000, "distinct keys")
	f.IntVar(&cfg.MaxConcurrentKeys, "limit", 1000, "in-flight limit: keys running at once per subtask")
	f.IntVar(&cfg.Parallelism, "parallelism", 1, "agent subtasks")
	f.StringVar(&dist, "latency-dist", "exponential", "model latency distribution: fixed, uniform, exponential or lognormal")
	f.DurationVar(&mean, "latency-mean", 50*time.Millisecond, "mean model latency")
	f.DurationVar(&cfg.WatermarkInterval, "watermark-interval", 10*time.Millisecond, "periodic watermark interval of the source")
	f.Int64Var(&cfg.Seed, "seed", 1, "offline model seed")
	f.IntVar(&cfg.BlockingInputs, "blocking-inputs", 40, "inputs of the blocking run (negative: skip it)")
	f.IntVar(&cfg.CPUInputs, "cpu-inputs", 100_000, "inputs of each CPU run (negative: skip the CPU measurement)")
	f.StringSliceVar(&stores, "stores", []string{"wal", "kafka"}, "action-state stores to run the workload with as well (wal, kafka on an embedded broker; empty for none)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}
