package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
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
	var sigma float64
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the agent operator against a model of realistic latency and faults: throughput against the ideal, held watermarks, CPU per action, the store's cost",
		Long: `Runs an agent over --keys keys: one model call per action, one action per input, or
an execution tree per input with --tree-depth N --tree-fanout K (each action sends K child
events down to depth N, 1 + K + ... + K^N actions per input). The model is the offline model
in this process (--model offline) or, with --model http, the project's OpenAI client (the
official SDK, HTTP and JSON, its retry policy and rate limiter) against a fake OpenAI-compatible
server on 127.0.0.1 (--stream: server-sent events). Latencies are drawn from --latency-dist with
mean --latency-mean (--latency-sigma shapes lognormal and uniform) by each request's hash under
--seed; --rate-limit-rate and --error-rate make that fraction of attempts fail with 429
(Retry-After --retry-after) or a transient error (500 or a dropped connection), each retried by
the client. It reports:

  throughputPerSec     actions per second in the steady state
  idealPerSec          in-flight limit × parallelism ÷ expected action time (the mean latency
                       plus the expected retry waits; see docs/agents.md, "Measured")
  watermarkViolations  outputs that reached the sink behind a forwarded watermark (must be 0)
  heldWatermarksMax    the most watermarks the operator held at once
  actionP50Ms/P99Ms    percentiles of the actions' run time (retries included)
  modelRetries         retries the client made, rateLimitedRetries after a 429
  processCpuMicrosPerAction  the process's CPU per action (fake server, broker included)
  cpuMicrosPerAction   the operator's CPU per action beyond a hand-written loop doing
                       the same work (zero-latency runs on the offline model)
  callToOutput*Micros  mean and 99th percentile of the time from a model call's return
                       to its output at the sink; with a store, storeMeanMicros is the
                       mean beyond the run without one (what the store adds to a slot)
                       and storeCpuMicrosPerAction the CPU per action beyond it

then the same workload with each of --stores, and on the blocking variant (actions on the
subtask goroutine).`,
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
			k.oneOf("model", cfg.Model, "offline", "http")
			if cfg.Stream && cfg.Model != "http" {
				k.fail("--stream with --model %q: streaming applies to --model http only (the offline model answers in one piece)", cfg.Model)
			}
			if !(sigma >= 0 && sigma <= 4) {
				k.fail("--latency-sigma %v: want 0 (the default: 0.5) to 4 (lognormal sigma; uniform half-width as a fraction of the mean, at most 1)", sigma)
			}
			k.fraction("rate-limit-rate", cfg.Faults.RateLimitRate)
			k.fraction("error-rate", cfg.Faults.ErrorRate)
			if cfg.Faults.RateLimitRate+cfg.Faults.ErrorRate > 1 {
				k.fail("--rate-limit-rate %v with --error-rate %v: want at most 1 together", cfg.Faults.RateLimitRate, cfg.Faults.ErrorRate)
			}
			k.duration("retry-after", cfg.Faults.RetryAfter, time.Millisecond)
			k.duration("retry-initial", cfg.RetryInitial, time.Millisecond)
			k.intRange("tree-depth", int64(cfg.TreeDepth), 0, -1)
			k.intRange("tree-fanout", int64(cfg.TreeFanout), 1, 0)
			if k.err == nil && cfg.ActionsPerInput() < 0 {
				k.fail("--tree-depth %d with --tree-fanout %d: want at most 10000 actions per input (1 + K + ... + K^N)", cfg.TreeDepth, cfg.TreeFanout)
			}
			for _, st := range stores {
				k.oneOf("stores", st, "wal", "kafka")
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			cfg.Latency.Dist, cfg.Latency.Mean, cfg.Latency.Spread = dist, mean, sigma
			if cfg.Model == "offline" {
				cfg.Model = ""
			}
			if err := cfg.Validate(); err != nil {
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
			client := "offline model"
			if a.Model == "http" {
				client = "OpenAI client over HTTP to the fake server"
				if a.Stream {
					client += ", streaming"
				}
			}
			fmt.Fprintf(out, "inputs               %d over %d keys, %d actions each (%d in all), in-flight limit %d × %d subtask(s)\n",
				a.Inputs, a.Keys, a.ActionsPerInput, a.Actions, a.MaxConcurrentKeys, a.Parallelism)
			fmt.Fprintf(out, "model                %s, latency %s mean %.1fms; injected %.1f%% 429 (Retry-After %v), %.1f%% errors\n",
				client, a.LatencyDist, a.MeanLatencyMs, 100*a.Faults.RateLimitRate, cfg.Faults.RetryAfter, 100*a.Faults.ErrorRate)
			fmt.Fprintf(out, "throughput           %.0f actions/s (overall %.0f/s, %.1fs)\n", a.ThroughputPerSec, a.OverallPerSec, a.Seconds)
			fmt.Fprintf(out, "ideal                %.0f actions/s at %.1fms per action (efficiency %.0f%%)\n", a.IdealPerSec, a.ExpectedActionMs, 100*a.Efficiency)
			fmt.Fprintf(out, "watermark violations %d (%d watermarks reached the sink)\n", rep.WatermarkViolations, a.Watermarks)
			fmt.Fprintf(out, "held watermarks max  %d\n", a.HeldWatermarksMax)
			fmt.Fprintf(out, "action latency       p50 %.1f ms, p99 %.1f ms\n", a.ActionP50Ms, a.ActionP99Ms)
			fmt.Fprintf(out, "retries              %d (%d after a 429); injected %d 429s, %d 500s, %d dropped connections in %d attempts\n",
				a.ModelRetries, a.RateLimitedRetries, a.Injected.RateLimited, a.Injected.ServerErrors, a.Injected.Dropped, a.Injected.Attempts)
			fmt.Fprintf(out, "process CPU          %.1f µs per action\n", a.ProcessCPUMicrosPerAction)
			fmt.Fprintf(out, "call to output       mean %.0f µs, p99 %.0f µs\n", a.CallToOutputMeanMicros, a.CallToOutputP99Micros)
			if rep.CPU != nil {
				fmt.Fprintf(out, "CPU per action       %.2f µs beyond the hand-written loop (agent %.2f µs, loop %.2f µs per input)\n",
					rep.CPUMicrosPerAction, rep.CPU.AgentMicros, rep.CPU.LoopMicros)
			}
			for _, st := range rep.Stores {
				fmt.Fprintf(out, "with store %-9s %.0f actions/s (ideal %.0f/s, efficiency %.0f%%), %d watermark violations; call to output mean %.0f µs (+%.0f µs), p99 %.0f µs; CPU %.1f µs per action (+%.1f µs); action p50 %.1f ms, p99 %.1f ms\n",
					st.Store, st.ThroughputPerSec, st.IdealPerSec, 100*st.Efficiency, st.WatermarkViolations,
					st.CallToOutputMeanMicros, st.StoreMeanMicros, st.CallToOutputP99Micros,
					st.ProcessCPUMicrosPerAction, st.StoreCPUMicrosPerAction, st.ActionP50Ms, st.ActionP99Ms)
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
	f.Float64Var(&sigma, "latency-sigma", 0, "shape of the latency: lognormal sigma (0 means 0.5; 1 puts the p99 near 10× the median), uniform half-width as a fraction of the mean")
	f.Int64Var(&cfg.Seed, "seed", 1, "seed of the latencies, replies and injected faults (drawn per request, the same in every run)")
	f.StringVar(&cfg.Model, "model", "offline", "offline (the model in this process) or http (the OpenAI client, official SDK, against a fake OpenAI-compatible server on 127.0.0.1)")
	f.BoolVar(&cfg.Stream, "stream", false, "with --model http: stream every call (server-sent events)")
	f.Float64Var(&cfg.Faults.RateLimitRate, "rate-limit-rate", 0, "fraction of model call attempts answered 429 with Retry-After (0 to 1)")
	f.Float64Var(&cfg.Faults.ErrorRate, "error-rate", 0, "fraction of model call attempts failing with a transient error: HTTP 500 or a connection dropped mid-reply (0 to 1)")
	f.DurationVar(&cfg.Faults.RetryAfter, "retry-after", time.Second, "the Retry-After of the injected 429s")
	f.DurationVar(&cfg.RetryInitial, "retry-initial", 500*time.Millisecond, "the client's first back-off after an error (doubling, 4 attempts)")
	f.IntVar(&cfg.TreeDepth, "tree-depth", 0, "depth of each input's execution tree (0: one action per input)")
	f.IntVar(&cfg.TreeFanout, "tree-fanout", 1, "child events each action of the tree sends (above depth --tree-depth)")
	f.IntVar(&cfg.BlockingInputs, "blocking-inputs", 40, "inputs of the blocking run (negative: skip it)")
	f.IntVar(&cfg.CPUInputs, "cpu-inputs", 100_000, "inputs of each CPU run (negative: skip the CPU measurement)")
	f.StringSliceVar(&stores, "stores", []string{"wal", "kafka"}, "action-state stores to run the workload with as well (wal, kafka on an embedded broker; empty for none)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}
