package bench

import (
	"testing"

	"github.com/weirproject/weir/nexmark"
)

// A test-sized `weir bench nexmark --query all`: every query runs, from
// the generator and from the broker, and the engine's result count equals
// the hand-written loop's (q4 answers per closed auction, its loop per
// category, so only q4's engine count is checked for being above zero).
// From Kafka too: partitions that catch up go idle while event-time timers
// are pending downstream, and the runtime keeps those operators active
// (runtime I8), so no result is lost to the idle hand-over.
func TestNexmarkSmall(t *testing.T) {
	for _, kafka := range []bool{false, true} {
		o := NexmarkOptions{Queries: nexmark.Names(), Events: 20_000, Kafka: kafka, Parallelism: 2, EventsPerSecond: 1000}
		seen := 0
		err := Nexmark(o, func(r NexmarkResult) error {
			seen++
			exact := r.Query != "q4"
			if r.Results == 0 || (exact && r.Results != r.LoopResults) {
				t.Errorf("%s from %s: %d results, the loop %d", r.Query, r.From, r.Results, r.LoopResults)
			}
			if r.CPUSecondsPerMillion <= 0 || r.PeakMemoryBytes == 0 || r.EventsPerCoreSec <= 0 {
				t.Errorf("%s from %s: a figure is missing: %+v", r.Query, r.From, r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if seen != len(nexmark.Queries) {
			t.Fatalf("%d results reported, want %d", seen, len(nexmark.Queries))
		}
	}
}
