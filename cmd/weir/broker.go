package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/ordering/experiment"
)

// brokerCmd is `weir broker`: the embedded Kafka-protocol broker as a
// process, until interrupted.
func brokerCmd() *cobra.Command {
	var o broker.Options
	var topics []string
	var configs []string
	var logLevel string
	var sec brokerSecurity
	var reg brokerRegistry
	c := &cobra.Command{
		Use:   "broker",
		Short: "Run the embedded Kafka-protocol broker (franz-go's kfake) until interrupted",
		Long: `Run the embedded Kafka-protocol broker until interrupted (Ctrl-C or SIGTERM).

Any Kafka client can use it (bootstrap servers = the printed address). With --data
the cluster persists in that directory and comes back on the next start; without it,
everything is in memory. A restart aborts the transactions that were open (a Kafka
cluster keeps them open until they time out): an exactly-once job whose newest
checkpoint's transactions were not committed yet when the broker stopped cannot restore
that checkpoint; stop such jobs (Ctrl-C) before restarting the broker (docs/kafka.md,
"Testing with weir broker").

  weir broker --data ./kafka-data --addr 127.0.0.1:9092 --topic orders:3

Security (docs/kafka.md "Security"): --sasl-user and --sasl-users require SASL
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) from every client; --tls-cert and --tls-key
serve TLS with your certificate, or --tls-self-signed CAFILE makes a CA and a
certificate at start and writes the CA to CAFILE for clients to trust:

  weir broker --tls-self-signed ca.pem --sasl-users users.txt

It also serves a Confluent-compatible Schema Registry (docs/kafka.md "Schema Registry
(embedded)") at --schema-registry (default 127.0.0.1:8081; off to disable), storing the
schemas in the compacted _schemas topic so that they survive a restart with --data. With
TLS it serves HTTPS with the broker's certificate; with SASL users it requires HTTP basic
authentication with their names and passwords.`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.hostPort("addr", o.Addr)
			k.intRange("brokers", int64(o.Brokers), 1, 0)
			k.intRange("partitions", int64(o.DefaultPartitions), 1, 0)
			o.Topics = map[string]int32{}
			for _, t := range topics {
				name, parts, hasParts := strings.Cut(t, ":")
				n := 0
				if hasParts {
					var err error
					if n, err = strconv.Atoi(parts); err != nil || n <= 0 || n > math.MaxInt32 {
						n = -1
					}
				}
				if !validTopic(name) || n < 0 {
					k.fail("--topic %q: want name or name:partitions, the name 1 to 249 of a-z A-Z 0-9 . _ - (Kafka's rule), partitions >= 1", t)
					continue
				}
				o.Topics[name] = int32(n)
			}
			if len(configs) > 0 {
				o.Configs = map[string]string{}
				for _, kv := range configs {
					key, v, ok := strings.Cut(kv, "=")
					if !ok || key == "" {
						k.fail("--config %q: want key=value, such as log.retention.ms=604800000", kv)
						continue
					}
					o.Configs[key] = v
				}
			}
			sec.check(k, &o)
			reg.check(k)
			if lv, ok, err := parseLogLevel(logLevel); err != nil {
				k.fail("%v", err)
			} else if ok {
				o.Logger = newLogger(cmd.ErrOrStderr(), logLevel)
				o.LogLevel = lv
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sec.apply(&o); err != nil {
				return err
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			var regL net.Listener
			if reg.on() {
				var err error
				if regL, err = reg.listen(o); err != nil {
					return err
				}
				defer regL.Close()
			}
			b, err := broker.Start(o)
			if err != nil {
				return err
			}
			defer b.Close()
			where := "in memory"
			if o.DataDir != "" {
				where = "data in " + o.DataDir
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "broker listening on %s (%s%s); Ctrl-C to stop\n", b.Addr(), where, sec.describe(o))
			if r := b.Recovery().String(); r != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "weir broker: %s: %s\n", o.DataDir, r)
			}
			if reg.on() {
				url, closeReg, err := reg.serve(ctx, cmd.ErrOrStderr(), regL, b, o, &sec)
				if err != nil {
					return err
				}
				defer closeReg()
				fmt.Fprintln(out, reg.describe(url, o))
			}
			<-ctx.Done()
			return nil
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
	sec.flags(f)
	reg.flags(f)
	return c
}

// experimentCmd is `weir experiment`, the reproducible experiments;
// `weir experiment ordering` is event-time ordering under three idleness
// policies (package ordering/experiment).
func experimentCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "experiment",
		Short: "Run the experiments of the design seeds",
		Args:  noArgs,
	}
	c.AddCommand(orderingExperimentCmd(), agentCmd(), durabilityCmd(), scaleoutCmd())
	return c
}

func orderingExperimentCmd() *cobra.Command {
	cfg := experiment.Defaults
	var policies []string
	var asJSON, verbose bool
	c := &cobra.Command{
		Use:   "ordering",
		Short: "Sort many Kafka topics by event time under three idleness policies",
		Long: `Produce days of history into an embedded broker (13 topics x 3 partitions by default,
uneven rates per partition), read it with one job whose partition readers start at
staggered times, sort every item's events by event time, then go on with live traffic.
The same data runs under three idleness policies: two-tier time-outs, one time-out,
and catch-up by Kafka end offsets. For each it reports records out of order, the
release latency of live records, and the replay rate of the history (measured in a
pass without the start stagger, from the first record read to the sort's release of
the last history record) beside franz-go's own consumer reading the same history
(one JSON object per policy with --json).

--timeouts 0.4s,2s,10s,60s sweeps the time-out: the time-out policies run once per
value and end offsets once, to show the trade-off time-outs force (short ones put
records out of order, long ones hold the history's tail and sparse partitions back).`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("topics", int64(cfg.Topics), 1, 0)
			k.intRange("partitions", int64(cfg.Partitions), 1, 0)
			k.intRange("items", int64(cfg.Items), 1, 0)
			k.intRange("history-records", int64(cfg.HistoryRecords), 1, 0)
			k.duration("history-span", cfg.HistorySpan, time.Millisecond)
			k.duration("stagger", cfg.Stagger, 0)
			k.duration("timeout", cfg.Timeout, time.Millisecond)
			for _, d := range cfg.Timeouts {
				k.duration("timeouts", d, time.Millisecond)
			}
			k.duration("lag", cfg.Lag, 0)
			k.duration("tick", cfg.Tick, time.Millisecond)
			k.duration("live", cfg.Live, 0)
			k.intRange("live-rate", int64(cfg.LiveRate), 1, 0)
			k.intRange("parallelism", int64(cfg.SortParallelism), 1, keygroup.UpperBound)
			for _, p := range policies {
				k.oneOf("policy", p, experiment.Policies...)
			}
			return k.err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Policies = policies
			if verbose {
				cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			}
			ctx, stop := signalContext(cmd)
			defer stop()
			out := cmd.OutOrStdout()
			if !asJSON {
				fmt.Fprintf(out, "%-12s %9s %9s %11s %9s %9s %12s %9s %9s %9s %11s %14s %14s %7s\n", "policy", "timeout", "records", "outOfOrder", "fraction",
					"history", "violations", "p50 ms", "p99 ms", "max ms", "history ms", "history ev/s", "raw ev/s", "ratio")
			}
			_, err := experiment.Run(ctx, cfg, writerFunc(func(b []byte) (int, error) {
				if asJSON {
					return out.Write(b)
				}
				var r experiment.Result
				if err := json.Unmarshal(b, &r); err != nil {
					return 0, err
				}
				timeout := "-"
				if r.TimeoutMs > 0 {
					timeout = (time.Duration(r.TimeoutMs * float64(time.Millisecond))).String()
				}
				fmt.Fprintf(out, "%-12s %9s %9d %11d %9.4f %9.4f %12d %9.1f %9.1f %9.1f %11.0f %14.0f %14.0f %7.3f\n", r.Policy, timeout, r.Records, r.OutOfOrder,
					r.OutOfOrderFraction, r.HistoryOutOfOrderFraction, r.OrderViolations, r.ReleaseLatencyMs.P50, r.ReleaseLatencyMs.P99,
					r.ReleaseLatencyMs.Max, r.HistoryStaggeredMs, r.HistoryEventsPerSec, r.RawEventsPerSec, r.HistoryVsRaw)
				return len(b), nil
			}))
			return err
		},
	}
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object per policy")
	f.BoolVarP(&verbose, "verbose", "v", false, "log progress to stderr")
	f.IntVar(&cfg.Topics, "topics", cfg.Topics, "topics")
	f.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions per topic")
	f.IntVar(&cfg.Items, "items", cfg.Items, "distinct items (sort keys)")
	f.IntVar(&cfg.HistoryRecords, "history-records", cfg.HistoryRecords, "history records over all partitions")
	f.DurationVar(&cfg.HistorySpan, "history-span", cfg.HistorySpan, "event-time span of the history")
	f.DurationVar(&cfg.Stagger, "stagger", cfg.Stagger, "largest start delay of a partition reader")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "idleness time-out of the time-out policies")
	f.DurationSliceVar(&cfg.Timeouts, "timeouts", nil, "sweep: run the time-out policies once per time-out (such as 0.4s,2s,10s,60s), end-offsets once, without the replay passes")
	f.BoolVar(&cfg.NoReplay, "no-replay", false, "leave out the replay passes (historyEventsPerSec, rawEventsPerSec)")
	f.DurationVar(&cfg.Lag, "lag", cfg.Lag, "the clock stream's lag behind processing time")
	f.DurationVar(&cfg.Tick, "tick", cfg.Tick, "the clock stream's tick")
	f.DurationVar(&cfg.Live, "live", cfg.Live, "how long live records are produced")
	f.IntVar(&cfg.LiveRate, "live-rate", cfg.LiveRate, "live records per second")
	f.IntVar(&cfg.SortParallelism, "parallelism", cfg.SortParallelism, "parallelism of the sort")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the generated history and start delays")
	f.StringSliceVar(&policies, "policy", nil, "policies to run (default: two-tier, timeout, end-offsets)")
	return c
}

// validTopic reports whether name is a legal Kafka topic name.
func validTopic(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	return strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == ""
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
