package agentbench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/cputime"
)

// BenchmarkStores runs the workload of `weir experiment agent` (10,000
// keys, in-flight limit 1,000, exponential latency of mean 50 ms) without
// a store and with each store, 20,000 inputs per op, and reports the
// efficiency (throughput ÷ ideal) and the process CPU per input.
func BenchmarkStores(b *testing.B) {
	for _, name := range []string{"none", "wal", "kafka"} {
		b.Run(name, func(b *testing.B) {
			var br *broker.Broker
			if name == "kafka" {
				var err error
				if br, err = broker.Start(broker.Options{}); err != nil {
					b.Fatal(err)
				}
				defer br.Close()
			}
			var eff, cpu float64
			run := 0
			for b.Loop() {
				// A store of its own per run: a store holding an earlier
				// run's states would replay them.
				var store agent.StoreFactory
				switch name {
				case "wal":
					store = wal.Factory(b.TempDir(), wal.Options{})
				case "kafka":
					run++
					store = kafkastore.Factory(kafkastore.Options{Brokers: br.Addrs(), Topic: fmt.Sprintf("bench-actions-%d", run), Logger: slog.New(slog.DiscardHandler)})
				}
				c0 := int64(cputime.Process())
				r, err := Run(context.Background(), Config{Inputs: 20_000, Keys: 10_000, MaxConcurrentKeys: 1000,
					Latency: model.Latency{Dist: "exponential", Mean: 50 * time.Millisecond}, Store: store, StoreName: name})
				if err != nil {
					b.Fatal(err)
				}
				cpu += float64(int64(cputime.Process())-c0) / 1e3 / 20_000
				eff += r.Efficiency
			}
			b.ReportMetric(100*eff/float64(b.N), "%ideal")
			b.ReportMetric(cpu/float64(b.N), "cpu-µs/input")
		})
	}
}

// BenchmarkSlotTime measures what each store adds to an action's
// in-flight slot, with so few actions at once (20 in flight, fixed 20 ms
// model latency, 1,000 actions/s) that the CPU is not what they wait for,
// also on a loaded machine: the mean and 99th percentile of the time from
// the model call's return to the output at the sink (c2o-µs, c2o-p99-µs),
// and the mean beyond the run without a store (store-µs). The Kafka
// store's broker takes 2 ms per produce request (a network round trip
// and replication, as kfake's control sleeps), the WAL its disk's fsync.
func BenchmarkSlotTime(b *testing.B) {
	var none float64
	for _, name := range []string{"none", "wal", "kafka"} {
		b.Run(name, func(b *testing.B) {
			var br *broker.Broker
			if name == "kafka" {
				var err error
				if br, err = broker.Start(broker.Options{}); err != nil {
					b.Fatal(err)
				}
				defer br.Close()
				c := br.Cluster()
				c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					c.SleepControl(func() { time.Sleep(2 * time.Millisecond) })
					return nil, nil, false
				})
			}
			var mean, p99 float64
			run := 0
			for b.Loop() {
				var store agent.StoreFactory
				switch name {
				case "wal":
					store = wal.Factory(b.TempDir(), wal.Options{})
				case "kafka":
					run++
					store = kafkastore.Factory(kafkastore.Options{Brokers: br.Addrs(), Topic: fmt.Sprintf("slot-actions-%d", run), Logger: slog.New(slog.DiscardHandler)})
				}
				r, err := Run(context.Background(), Config{Inputs: 2000, Keys: 2000, MaxConcurrentKeys: 20,
					Latency: model.Latency{Dist: "fixed", Mean: 20 * time.Millisecond}, Store: store, StoreName: name})
				if err != nil {
					b.Fatal(err)
				}
				mean += r.CallToOutputMeanMicros
				p99 += r.CallToOutputP99Micros
			}
			mean /= float64(b.N)
			if name == "none" {
				none = mean
			}
			b.ReportMetric(mean, "c2o-µs")
			b.ReportMetric(p99/float64(b.N), "c2o-p99-µs")
			b.ReportMetric(mean-none, "store-µs")
		})
	}
}
