package main

import (
	"context"
	"encoding/json"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/demo"
)

func demoCmd() *cobra.Command {
	var o demo.Options
	var asJSON bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the embedded demo: days of Kafka history caught up by end offsets, sorted by event time, windowed, then live",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if ctx == nil {
				ctx = context.Background()
			}
			s, err := demo.Run(ctx, cmd.OutOrStdout(), o)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
			}
			return nil
		},
	}
	c.Flags().Int64Var(&o.Orders, "orders", 0, "history records over all topics (default 120000)")
	c.Flags().IntVar(&o.Days, "days", 0, "days of history (default 3)")
	c.Flags().IntVar(&o.Customers, "customers", 0, "customers (default 50)")
	c.Flags().IntVar(&o.Items, "items", 0, "items (default 500)")
	c.Flags().IntVar(&o.Parallelism, "parallelism", 0, "parallelism (default 2)")
	c.Flags().Uint64Var(&o.Seed, "seed", 1, "generator seed")
	c.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON at the end")
	c.Flags().IntVar(&o.Rate, "rate", 0, "live records per second (default 2000)")
	c.Flags().DurationVar(&o.Live, "live", 0, "length of the live phase (default 3s)")
	c.Flags().IntVar(&o.Malformed, "malformed", 0, "undecodable records in the history (default 5; -1: none)")
	c.Flags().IntVar(&o.HeldBack, "held-back", 0, "live records a producer holds back for two hours (default 3; -1: none)")
	c.Flags().StringVar(&o.KafkaData, "kafka-data", "", "persist the embedded broker in this directory (history is produced only once)")
	c.Flags().StringVar(&o.CheckpointDir, "checkpoint-dir", "", "take a checkpoint every second into this directory")
	c.Flags().BoolVar(&o.Resume, "resume", false, "resume from the newest checkpoint in --checkpoint-dir")
	c.Flags().StringVar(&o.StateBackend, "state-backend", "", "keyed-state backend: memory (default) or pebble (incremental checkpoints)")
	c.Flags().StringVar(&o.RestoreFrom, "restore", "", "start from this savepoint or checkpoint directory")
	c.Flags().DurationVar(&o.SavepointAfter, "savepoint-after", 0, "take a savepoint after this long, then stop (with --savepoint-dir)")
	c.Flags().StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address while the demo runs")
	c.Flags().StringVar(&o.SavepointDir, "savepoint-dir", "", "where --savepoint-after writes the savepoint")
	return c
}
