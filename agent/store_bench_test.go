package agent_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
)

// BenchmarkMemoryStore measures the in-memory store's operations with 64
// goroutines at once, over 1,000 keys (as the WAL's and the Kafka store's
// BenchmarkPut do): put is a Put of a new run; mixed a Put, a Get and a
// Latest, and every 16th op a Prune of the key up to its run.
func BenchmarkMemoryStore(b *testing.B) {
	for _, mixed := range []bool{false, true} {
		name := "put"
		if mixed {
			name = "mixed"
		}
		b.Run(name, func(b *testing.B) {
			s := agent.NewMemoryStore()
			states := make([]*agent.ActionState, b.N)
			for i := range states {
				states[i] = storetest.State(fmt.Sprintf("k%d", i%1000), int64(i), 0, 0, i%128, true)
			}
			var n atomic.Int64
			b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1) - 1
					st := states[i]
					if err := s.Put(st); err != nil {
						b.Error(err)
						return
					}
					if !mixed {
						continue
					}
					// A concurrent Prune of the key may have removed the
					// run: only errors count.
					if _, err := s.Get(st.ID); err != nil {
						b.Error(err)
						return
					}
					s.Latest(st.ID.Key)
					if i%16 == 0 {
						if err := s.Prune([]agent.KeySeq{{Key: st.ID.Key, Seq: st.Pos.Seq}}); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
		})
	}
}
