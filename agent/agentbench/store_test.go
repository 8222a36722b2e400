package agentbench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/broker"
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
				c0 := cpuTime()
				r, err := Run(context.Background(), Config{Inputs: 20_000, Keys: 10_000, MaxConcurrentKeys: 1000,
					Latency: model.Latency{Dist: "exponential", Mean: 50 * time.Millisecond}, Store: store, StoreName: name})
				if err != nil {
					b.Fatal(err)
				}
				cpu += float64(cpuTime()-c0) / 1e3 / 20_000
				eff += r.Efficiency
			}
			b.ReportMetric(100*eff/float64(b.N), "%ideal")
			b.ReportMetric(cpu/float64(b.N), "cpu-µs/input")
		})
	}
}
