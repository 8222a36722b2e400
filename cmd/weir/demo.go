package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/dashboard"
	"github.com/weirproject/weir/internal/demo"
	"github.com/weirproject/weir/internal/shutdown"
	"github.com/weirproject/weir/runtime"
)

func demoCmd() *cobra.Command {
	o := demo.Options{Orders: 120_000, Days: 3, Customers: 50, Items: 500, Parallelism: 2, Seed: 1,
		Rate: 2000, Live: 3 * time.Second, Malformed: 5, HeldBack: 3, StateBackend: "memory"}
	var asJSON bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the embedded demo: days of Kafka history caught up by end offsets, sorted by event time, windowed, then live",
		Args:  noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return validateDemo(cmd, &o)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			// The first SIGINT or SIGTERM stops the job with a savepoint
			// and exits 0; a second one aborts with 130.
			stop := shutdown.Notify(shutdown.Options{Log: cmd.ErrOrStderr()})
			defer stop.Close()
			o.Stop = stop.Requested()
			o.Progress = cmd.ErrOrStderr()
			// With --json, stdout holds the JSON summary only.
			narrative := cmd.OutOrStdout()
			if asJSON {
				narrative = cmd.ErrOrStderr()
			}
			s, err := demo.Run(ctx, narrative, o)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
			}
			return nil
		},
	}
	f := c.Flags()
	f.Int64Var(&o.Orders, "orders", o.Orders, "history records over all topics")
	f.IntVar(&o.Days, "days", o.Days, "days of history")
	f.IntVar(&o.Customers, "customers", o.Customers, "customers")
	f.IntVar(&o.Items, "items", o.Items, "items")
	f.IntVar(&o.Parallelism, "parallelism", o.Parallelism, "parallelism (1 to 128, the demo's max parallelism)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "generator seed")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON on stdout at the end (the narrative goes to stderr)")
	f.IntVar(&o.Rate, "rate", o.Rate, "live records per second")
	f.DurationVar(&o.Live, "live", o.Live, "length of the live phase (0: none)")
	f.IntVar(&o.Malformed, "malformed", o.Malformed, "undecodable records in the history (0: none)")
	f.IntVar(&o.HeldBack, "held-back", o.HeldBack, "live records a producer holds back for two hours (0: none)")
	f.StringVar(&o.KafkaData, "kafka-data", "", "persist the embedded broker in this directory (history is produced only once)")
	f.StringVar(&o.CheckpointDir, "checkpoint-dir", "", "take a checkpoint every second into this directory or URL (file://, s3://, gs://, azblob://)")
	f.BoolVar(&o.Resume, "resume", false, "resume from the newest checkpoint in --checkpoint-dir")
	f.StringVar(&o.StateBackend, "state-backend", o.StateBackend, "keyed-state backend: memory or pebble (incremental checkpoints)")
	f.StringVar(&o.RestoreFrom, "restore", "", "start from this savepoint or checkpoint (a directory or a URL)")
	f.DurationVar(&o.SavepointAfter, "savepoint-after", 0, "take a savepoint after this long, then stop (with --savepoint-dir)")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address while the demo runs")
	f.StringVar(&o.UIAddr, "ui-addr", "", "serve the live dashboard on this address while the demo runs (such as 127.0.0.1:8088; no host: loopback)")
	f.StringVar(&o.SavepointDir, "savepoint-dir", "", "where --savepoint-after, or a stop by SIGINT or SIGTERM, writes the savepoint, a directory or a URL (default for a stop: a new directory under $TMPDIR/weir-savepoints)")
	return c
}

// validateDemo checks the demo's flags before the broker starts, and maps
// the flags' "0: none" to the options' negative values.
func validateDemo(cmd *cobra.Command, o *demo.Options) error {
	k := &checks{c: cmd}
	k.intRange("orders", o.Orders, 1, 0)
	k.intRange("days", int64(o.Days), 1, 0)
	k.intRange("customers", int64(o.Customers), 1, 0)
	k.intRange("items", int64(o.Items), 1, 0)
	k.intRange("parallelism", int64(o.Parallelism), 1, demo.MaxParallelism)
	k.intRange("rate", int64(o.Rate), 1, 0)
	k.duration("live", o.Live, 0)
	k.intRange("malformed", int64(o.Malformed), 0, -1)
	k.intRange("held-back", int64(o.HeldBack), 0, -1)
	k.oneOf("state-backend", o.StateBackend, "memory", "pebble")
	k.duration("savepoint-after", o.SavepointAfter, 0)
	if o.SavepointAfter > 0 && o.SavepointDir == "" {
		k.fail("--savepoint-after %v: needs --savepoint-dir, where the savepoint is written", o.SavepointAfter)
	}
	if o.SavepointDir != "" {
		if es, err := os.ReadDir(o.SavepointDir); err == nil && len(es) > 0 {
			k.fail("--savepoint-dir %q: holds files already; want a new or empty directory for the savepoint", o.SavepointDir)
		}
	}
	if o.Resume && o.CheckpointDir == "" {
		k.fail("--resume: needs --checkpoint-dir, the directory whose newest checkpoint to resume from")
	}
	if o.Resume && o.RestoreFrom != "" {
		k.fail("--resume and --restore %q: give one of them", o.RestoreFrom)
	}
	for _, l := range []struct{ flag, loc string }{{"checkpoint-dir", o.CheckpointDir}, {"savepoint-dir", o.SavepointDir}, {"restore", o.RestoreFrom}} {
		if l.loc == "" {
			continue
		}
		if err := checkpoint.CheckLocation(l.loc); err != nil {
			k.fail("--%s %q: %s", l.flag, l.loc, strings.TrimPrefix(err.Error(), fmt.Sprintf("checkpoint: location %q", l.loc)+" "))
		}
	}
	if dir, ok := checkpoint.LocalPath(o.RestoreFrom); ok && o.RestoreFrom != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			k.fail("--restore %q: want an existing savepoint or checkpoint directory, or a URL (s3://, gs://, azblob://)", o.RestoreFrom)
		}
	}
	if o.MetricsAddr != "" {
		k.hostPort("metrics-addr", o.MetricsAddr)
	}
	if _, err := dashboard.ParseAddr(o.UIAddr); o.UIAddr != "" && err != nil {
		k.fail("--ui-addr %q: want host:port, such as 127.0.0.1:8088 (no host: loopback; 0.0.0.0: every interface)", o.UIAddr)
	}
	if _, local := checkpoint.LocalPath(o.CheckpointDir); k.err == nil && local && o.CheckpointDir != "" {
		if err := runtime.ValidateConfig(runtime.Config{Checkpoint: runtime.CheckpointConfig{Dir: o.CheckpointDir}}); err != nil {
			k.fail("--checkpoint-dir %q: want a directory that can be created and written", o.CheckpointDir)
		}
	}
	if o.Live == 0 {
		o.Live = -1
	}
	if o.Malformed == 0 {
		o.Malformed = -1
	}
	if o.HeldBack == 0 {
		o.HeldBack = -1
	}
	return k.err
}
