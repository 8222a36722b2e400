package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/durability"
)

// durabilityCmd is `weir experiment durability`: the crash matrix of the
// action-state store (package internal/durability).
func durabilityCmd() *cobra.Command {
	var cfg durability.Config
	var asJSON, verbose bool
	c := &cobra.Command{
		Use:   "durability",
		Short: "Kill an agent job with SIGKILL at every step of a side effect and check that each happens once",
		Long: `Runs an agent job in child processes on the embedded broker: one side effect per input
through agent.Durable against a service on 127.0.0.1 that counts calls per idempotency key,
outputs through the exactly-once Kafka sink. Each trial kills the child with SIGKILL at exact
points (before a call, after a call before its record, after the record, after a sink write,
before a checkpoint's manifest, during the store's rebuild), restarts it from its latest
checkpoint until an attempt completes, then counts, per store:

  lostInputs, lostOutputs, duplicateOutputs   must be 0
  duplicateEffects                            inputs whose effect was asked for under two keys (must be 0)
  residualWindowEffects                       calls repeated with the same key: applied twice by a
                                              service that ignores idempotency keys (bounded by
                                              residualBound: kills × calls in flight)
  durableCallsPerSec, flushPerWriteCallsPerSec, rebuildStatesPerSec, replayActionsPerSec
                                              the store's speed`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("trials", int64(cfg.Trials), 1, 0)
			k.intRange("inputs", int64(cfg.Inputs), 1, 0)
			k.intRange("keys", int64(cfg.Keys), 1, 0)
			k.intRange("parallelism", int64(cfg.Parallelism), 1, 128)
			k.intRange("max-kills", int64(cfg.MaxKills), 1, 0)
			if cfg.Seed == 0 {
				k.fail("--seed 0: want an integer >= 1")
			}
			for _, st := range cfg.Stores {
				k.oneOf("stores", st, "wal", "kafka")
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
			if verbose {
				cfg.Log = cmd.ErrOrStderr()
			}
			res, err := durability.Run(ctx, cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			failed := false
			for _, r := range res {
				failed = failed || !r.OK()
				if asJSON {
					if err := json.NewEncoder(out).Encode(r); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(out, "store %s: %d trials, %d kills %v, %.1fs\n", r.Store, r.Trials, r.Kills, r.KillPoints, r.Seconds)
				fmt.Fprintf(out, "  inputs %d: lost %d; outputs lost %d, duplicated %d\n", r.Inputs, r.LostInputs, r.LostOutputs, r.DuplicateOutputs)
				fmt.Fprintf(out, "  effects %d, duplicated %d; calls repeated in the residual window %d (bound %d), without a kill %d\n",
					r.Effects, r.DuplicateEffects, r.ResidualWindowEffects, r.ResidualBound, r.RepeatsWithoutKill)
				fmt.Fprintf(out, "  durable calls/s %.0f (group commit) vs %.0f (flush per write): %.1fx; rebuild %.0f states/s; replay %.0f actions/s\n",
					r.DurableCallsPerSec, r.FlushPerWriteCallsPerSec, r.DurableCallsPerSec/r.FlushPerWriteCallsPerSec, r.RebuildStatesPerSec, r.ReplayActionsPerSec)
			}
			if failed {
				return fmt.Errorf("experiment durability: an input, output or effect was lost or repeated (see above)")
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringSliceVar(&cfg.Stores, "stores", []string{"wal", "kafka"}, "action-state stores to try: wal, kafka")
	f.IntVar(&cfg.Trials, "trials", 100, "trials per store")
	f.IntVar(&cfg.Inputs, "inputs", 120, "inputs per trial")
	f.IntVar(&cfg.Keys, "keys", 8, "keys the inputs spread over")
	f.IntVar(&cfg.Parallelism, "parallelism", 2, "parallelism of the job")
	f.IntVar(&cfg.MaxKills, "max-kills", 3, "kills per trial before an attempt runs to its end")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the kill points and hits")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per store")
	f.BoolVar(&verbose, "verbose", false, "log every attempt to stderr")
	return c
}
