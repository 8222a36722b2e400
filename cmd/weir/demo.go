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
		Short: "Run the embedded demo: an event-time pipeline over generated out-of-order data",
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
	c.Flags().Int64Var(&o.Orders, "orders", 0, "orders to generate (default 200000)")
	c.Flags().IntVar(&o.Customers, "customers", 0, "customers (default 50)")
	c.Flags().IntVar(&o.Parallelism, "parallelism", 0, "parallelism (default 2)")
	c.Flags().Uint64Var(&o.Seed, "seed", 1, "generator seed")
	c.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON at the end")
	c.Flags().IntVar(&o.Rate, "rate", 0, "limit orders per second (0: as fast as possible)")
	c.Flags().StringVar(&o.CheckpointDir, "checkpoint-dir", "", "take a checkpoint every second into this directory")
	c.Flags().BoolVar(&o.Resume, "resume", false, "resume from the newest checkpoint in --checkpoint-dir")
	c.Flags().StringVar(&o.RestoreFrom, "restore", "", "start from this savepoint or checkpoint directory")
	c.Flags().DurationVar(&o.SavepointAfter, "savepoint-after", 0, "take a savepoint after this long, then stop (with --savepoint-dir)")
	c.Flags().StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address while the demo runs")
	c.Flags().StringVar(&o.SavepointDir, "savepoint-dir", "", "where --savepoint-after writes the savepoint")
	return c
}
