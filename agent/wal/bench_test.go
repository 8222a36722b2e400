package wal

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir/agent/storetest"
)

// BenchmarkPut measures concurrent Puts on the WAL with fsync and group
// commit (64 goroutines, as in the Kafka store's benchmark).
func BenchmarkPut(b *testing.B) {
	s, err := Open(b.TempDir(), all, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if err := s.Put(storetest.State(fmt.Sprintf("k%d", i%1000), i, 0, 0, int(i%128), true)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	writes, syncs, _, _ := s.Stats()
	b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
	b.ReportMetric(float64(writes)/float64(max(syncs, 1)), "writes/fsync")
}
