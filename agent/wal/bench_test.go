package wal

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir/agent/storetest"
)

// BenchmarkPut measures concurrent Puts on the WAL with fsync and group
// commit, with 64 and 256 goroutines putting at once (as in the Kafka
// store's benchmark).
func BenchmarkPut(b *testing.B) {
	for _, putters := range []int{64, 256} {
		b.Run(fmt.Sprintf("putters=%d", putters), func(b *testing.B) {
			s, err := Open(b.TempDir(), all, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			b.SetParallelism(putters / runtime.GOMAXPROCS(0))
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
		})
	}
}
