package durability

import (
	"testing"
)

// BenchmarkSpeed runs the speed measurement of `weir experiment
// durability` (the fields durableCallsPerSec to replayActionsPerSec) on
// each store, without the crash trials. One op is one measurement.
func BenchmarkSpeed(b *testing.B) {
	for _, store := range []string{"wal", "kafka"} {
		b.Run(store, func(b *testing.B) {
			var sum Result
			for b.Loop() {
				var r Result
				if err := measureStore(store, b.TempDir(), &r); err != nil {
					b.Fatal(err)
				}
				sum.DurableCallsPerSec += r.DurableCallsPerSec
				sum.FlushPerWriteCallsPerSec += r.FlushPerWriteCallsPerSec
				sum.RebuildStatesPerSec += r.RebuildStatesPerSec
				sum.ReplayActionsPerSec += r.ReplayActionsPerSec
			}
			n := float64(b.N)
			b.ReportMetric(sum.DurableCallsPerSec/n, "calls/s")
			b.ReportMetric(sum.FlushPerWriteCallsPerSec/n, "flush-per-write-calls/s")
			b.ReportMetric(sum.DurableCallsPerSec/sum.FlushPerWriteCallsPerSec, "ratio")
			b.ReportMetric(sum.RebuildStatesPerSec/n, "rebuild-states/s")
			b.ReportMetric(sum.ReplayActionsPerSec/n, "replay-actions/s")
		})
	}
}
