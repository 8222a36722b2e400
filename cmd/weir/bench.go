package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/bench"
	"github.com/weirproject/weir/internal/bytesize"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/nexmark"
	"github.com/weirproject/weir/state"
)

func benchCmd() *cobra.Command {
	var n int64
	var keys int
	var asJSON bool
	var scenarios string
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure the engine against hand-written loops doing the same work, in the same run",
		Args:  noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("records", n, 1, 0)
			k.intRange("keys", int64(keys), 1, 0)
			if scenarios != "" {
				for _, s := range strings.Split(scenarios, ",") {
					k.oneOf("scenarios", s, bench.ScenarioNames()...)
				}
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var results []bench.Result
			var err error
			if scenarios == "" {
				results, err = bench.All(n, keys)
			} else {
				results, err = bench.Run(strings.Split(scenarios, ","), n, keys)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, r := range results {
				if asJSON {
					if err := json.NewEncoder(out).Encode(r); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(out, "%-40s engine %12.0f rec/s   loop %12.0f rec/s   ratio %.2f", r.Name, r.EnginePerSec, r.LoopPerSec, r.Ratio)
				if r.EngineCPUNsPerRecord > 0 && r.LoopCPUNsPerRecord > 0 {
					fmt.Fprintf(out, "   cpu/rec %.0f ns vs %.0f ns (%.2fx)", r.EngineCPUNsPerRecord, r.LoopCPUNsPerRecord, r.EngineCPUNsPerRecord/r.LoopCPUNsPerRecord)
				}
				if r.SameCadenceLoopPerSec > 0 {
					fmt.Fprintf(out, "   same-cadence loop %12.0f rec/s   ratio %.2f", r.SameCadenceLoopPerSec, r.SameCadenceRatio)
				}
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	c.Flags().Int64Var(&n, "records", 5_000_000, "records per scenario")
	c.Flags().IntVar(&keys, "keys", 10_000, "distinct keys in keyed scenarios")
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per scenario")
	c.Flags().StringVar(&scenarios, "scenarios", "", "comma-separated scenarios to run, in that order (default all: "+strings.Join(bench.ScenarioNames(), ", ")+")")
	c.AddCommand(benchCheckpointCmd(), benchStateSizeCmd(), benchNexmarkCmd())
	return c
}

func benchNexmarkCmd() *cobra.Command {
	var query, from string
	var events, rate int64
	var par int
	var seed uint64
	var asJSON bool
	c := &cobra.Command{
		Use:   "nexmark",
		Short: "Run Nexmark queries on generated events (or from the embedded broker as JSON): events/s, CPU per event, peak memory, beside the hand-written query",
		Args:  noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			if query != "all" {
				k.oneOf("query", query, append(nexmark.Names(), "all")...)
			}
			k.intRange("events", events, 1, 0)
			k.oneOf("from", from, "generator", "kafka")
			k.intRange("parallelism", int64(par), 1, keygroup.UpperBound)
			k.intRange("rate", rate, 1, 0)
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			qs := []string{query}
			if query == "all" {
				qs = nexmark.Names()
			}
			out := cmd.OutOrStdout()
			o := bench.NexmarkOptions{Queries: qs, Events: events, Kafka: from == "kafka", Parallelism: par, Seed: seed, EventsPerSecond: rate}
			return bench.Nexmark(o, func(r bench.NexmarkResult) error {
				if asJSON {
					return json.NewEncoder(out).Encode(r)
				}
				_, err := fmt.Fprintf(out, "%-4s from %-9s %10.0f events/s  %6.3f CPU s per M events  %9.0f events/s per core  peak %4d MiB  results %d  | loop %6.3f CPU s/M (weir %.2fx), generator alone %6.3f  load %.1f\n",
					r.Query, r.From, r.EventsPerSec, r.CPUSecondsPerMillion, r.EventsPerCoreSec, r.PeakMemoryBytes>>20, r.Results,
					r.LoopCPUSecondsPerMillion, r.RatioToLoop, r.GeneratorCPUSecondsPerMillion, r.Load)
				return err
			})
		},
	}
	c.Flags().StringVar(&query, "query", "q5", "query to run: "+strings.Join(nexmark.Names(), ", ")+", or all")
	c.Flags().Int64Var(&events, "events", 10_000_000, "events per query")
	c.Flags().StringVar(&from, "from", "generator", "where events come from: generator (in the job), kafka (pre-loaded into the embedded broker as JSON, untimed)")
	c.Flags().IntVar(&par, "parallelism", 1, "parallelism of the job (and source splits or Kafka partitions)")
	c.Flags().Int64Var(&rate, "rate", 10_000_000, "event-time rate of the generator in events per second (Flink Nexmark's 10M: 1M events span 100 ms)")
	c.Flags().Uint64Var(&seed, "seed", 0, "generator seed")
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per query")
	return c
}

func benchCheckpointCmd() *cobra.Command {
	var keys []int64
	var par int
	var backends []string
	c := &cobra.Command{
		Use:   "checkpoint",
		Short: "Measure checkpoint duration, synchronous pause, size and restore time against keyed-state size (JSON lines)",
		Args:  noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			for _, n := range keys {
				k.intRange("keys", n, 1, 0)
			}
			k.intRange("parallelism", int64(par), 1, keygroup.UpperBound)
			if len(backends) == 0 {
				k.fail("--backend: want one or more of memory, pebble")
			}
			for _, b := range backends {
				k.oneOf("backend", b, "memory", "pebble")
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			enc := json.NewEncoder(cmd.OutOrStdout())
			for _, k := range keys {
				for _, b := range backends {
					r, err := bench.Checkpoint(k, par, b)
					if err != nil {
						return err
					}
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	c.Flags().Int64SliceVar(&keys, "keys", []int64{100_000, 1_000_000}, "state sizes as numbers of ~108-byte entries (100k = ~10 MB)")
	c.Flags().IntVar(&par, "parallelism", 2, "parallelism of the measured job")
	c.Flags().StringSliceVar(&backends, "backend", []string{"memory", "pebble"}, "state backends to measure, side by side (memory, pebble)")
	return c
}

func benchStateSizeCmd() *cobra.Command {
	cfg := bench.StateSizeConfig{Keys: 1_000_000, ValueBytes: 1024, Backend: "pebble"}
	limit := "100MiB"
	cache := "0"
	c := &cobra.Command{
		Use:   "state-size",
		Short: "Run a keyed job whose state is larger than the memory it may use; print throughput and peak memory (JSON)",
		Long: `Writes --value-bytes into ValueState for each of --keys keys, then reads and writes every
key again, at parallelism 1, with the Go memory limit set to --memory-limit, and prints one JSON
object: records/s, CPU per record, the state's logical size, the Go runtime's peak memory and
the process's peak resident set. Run it once per backend (each in its own process, so that the
peak resident set is the job's alone).`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("keys", int64(cfg.Keys), 1, 1_000_000_000)
			k.intRange("value-bytes", int64(cfg.ValueBytes), 0, 4<<20)
			k.oneOf("backend", cfg.Backend, "memory", "pebble")
			if cache == "off" {
				cfg.CacheBytes = state.NoCache
			} else if n, err := bytesize.Parse(cache); err != nil {
				k.fail("--cache %q: %v (or off)", cache, err)
			} else {
				cfg.CacheBytes = n
			}
			n, err := bytesize.Parse(limit)
			if err != nil {
				k.fail("--memory-limit %q: %v", limit, err)
			}
			cfg.MemoryLimit = n
			return k.err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := bench.StateSize(cfg)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Keys, "keys", cfg.Keys, "distinct keys")
	f.IntVar(&cfg.ValueBytes, "value-bytes", cfg.ValueBytes, "bytes of each key's value")
	f.StringVar(&cfg.Backend, "backend", cfg.Backend, "state backend: memory or pebble")
	f.StringVar(&limit, "memory-limit", limit, "Go memory limit (bytes, or with KiB, MiB, GiB; 0: none)")
	f.StringVar(&cfg.Dir, "dir", "", "parent of the Pebble working directory (default: a new temporary directory)")
	f.StringVar(&cache, "cache", cache, "Pebble write-back cache bound (bytes, or with KiB, MiB, GiB; 0: the default, 4 MiB; off: no cache)")
	return c
}
