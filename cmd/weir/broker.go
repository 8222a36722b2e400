package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/broker"
)

// brokerCmd is `weir broker`: the embedded Kafka-protocol broker as a
// process, until interrupted.
func brokerCmd() *cobra.Command {
	var o broker.Options
	var topics []string
	var configs []string
	var logLevel string
	c := &cobra.Command{
		Use:   "broker",
		Short: "Run the embedded Kafka-protocol broker (franz-go's kfake) until interrupted",
		Long: `Run the embedded Kafka-protocol broker until interrupted (Ctrl-C or SIGTERM).

Any Kafka client can use it (bootstrap servers = the printed address). With --data
the cluster persists in that directory and comes back on the next start; without it,
everything is in memory.

  weir broker --data ./kafka-data --addr 127.0.0.1:9092 --topic orders:3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Topics = map[string]int32{}
			for _, t := range topics {
				name, parts, _ := strings.Cut(t, ":")
				n := 0
				if parts != "" {
					var err error
					if n, err = strconv.Atoi(parts); err != nil || n <= 0 {
						return fmt.Errorf("--topic %q: want name or name:partitions with partitions > 0", t)
					}
				}
				o.Topics[name] = int32(n)
			}
			if len(configs) > 0 {
				o.Configs = map[string]string{}
				for _, kv := range configs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return fmt.Errorf("--config %q: want key=value", kv)
					}
					o.Configs[k] = v
				}
			}
			if logLevel != "none" {
				var lv slog.Level
				if err := lv.UnmarshalText([]byte(logLevel)); err != nil {
					return fmt.Errorf("--log-level %q: want none, debug, info, warn or error", logLevel)
				}
				o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lv}))
				o.LogLevel = lv
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return broker.Run(ctx, o, func(b *broker.Broker) {
				where := "in memory"
				if o.DataDir != "" {
					where = "data in " + o.DataDir
				}
				fmt.Fprintf(cmd.OutOrStdout(), "broker listening on %s (%s); Ctrl-C to stop\n", b.Addr(), where)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&o.Addr, "addr", "127.0.0.1:9092", "host:port of the first broker (port 0: any free port)")
	f.StringVar(&o.DataDir, "data", "", "persist the cluster in this directory (default: in memory)")
	f.IntVar(&o.Brokers, "brokers", 1, "number of brokers (the others listen on free ports)")
	f.StringArrayVar(&topics, "topic", nil, "create a topic at start, name or name:partitions (repeatable)")
	f.IntVar(&o.DefaultPartitions, "partitions", 1, "partitions of topics created without a count")
	f.BoolVar(&o.AutoCreateTopics, "auto-create-topics", false, "let clients create topics by producing to them")
	f.BoolVar(&o.SyncWrites, "sync", false, "fsync every write (slower, survives power loss)")
	f.StringArrayVar(&configs, "config", nil, "broker config key=value (repeatable), e.g. log.retention.ms=604800000")
	f.StringVar(&logLevel, "log-level", "none", "broker log level: none, debug, info, warn, error")
	return c
}
