package kafkastore

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
	"github.com/weirproject/weir/internal/testenv"
)

// putters is the number of goroutines putting at once when the store is
// filled for BenchmarkRestore.
const putters = 64

// BenchmarkPut measures concurrent durable Puts (acks=all, idempotent) on
// the embedded broker keeping its log in a data directory: with group
// commit, and flushing every write alone as Flink Agents does. The
// in-process broker answers in tens of microseconds; the latency=1ms runs
// delay every produce request by a millisecond in the broker, as a network
// round trip plus replication to the in-sync replicas do on a real
// cluster. putters is the number of goroutines putting at once (rounded
// down to a multiple of GOMAXPROCS); the operator runs up to
// MaxConcurrentKeys actions at once, 256 by default.
func BenchmarkPut(b *testing.B) {
	for _, latency := range []time.Duration{0, time.Millisecond} {
		br := startBroker(b, b.TempDir())
		if latency > 0 {
			c := br.Cluster()
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				c.SleepControl(func() { time.Sleep(latency) })
				return nil, nil, false
			})
		}
		for _, c := range []struct {
			name    string
			flush   bool
			putters int
		}{{"group-commit/putters=64", false, 64}, {"group-commit/putters=256", false, 256}, {"flush-every-write", true, 64}} {
			b.Run(fmt.Sprintf("latency=%v/%s", latency, c.name), func(b *testing.B) {
				s := open(b, options(br, newTopic(), 1), all)
				var put func(*agent.ActionState) error = s.Put
				if c.flush {
					put = serialPut(s)
				}
				// The states are built before the clock starts: what is
				// measured is the store.
				states := make([]*agent.ActionState, b.N)
				for i := range states {
					states[i] = storetest.State("k"+strconv.Itoa(i%1000), int64(i), 0, 0, i%maxP, true)
				}
				var n atomic.Int64
				b.SetParallelism(c.putters / runtime.GOMAXPROCS(0))
				b.ReportAllocs()
				b.ResetTimer()
				start, c0 := time.Now(), cpuTime()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := put(states[n.Add(1)-1]); err != nil {
							b.Error(err)
							return
						}
					}
				})
				el, cpu := time.Since(start), cpuTime()-c0
				b.StopTimer()
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				writes, rounds, _ := s.Stats()
				b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
				b.ReportMetric(float64(writes)/float64(max(rounds, 1)), "writes/round")
			})
		}
	}
}

// serialPut lets one Put run at a time, each produced and acknowledged
// alone, as Flink Agents flushes the producer after every write: the
// baseline group commit is measured against.
func serialPut(s *Store) func(*agent.ActionState) error {
	var mu sync.Mutex
	return func(st *agent.ActionState) error {
		mu.Lock()
		defer mu.Unlock()
		return s.Put(st)
	}
}

// BenchmarkRestore measures a rebuild: a new store reading 20,000 states
// from the marker to the end of the log.
func BenchmarkRestore(b *testing.B) {
	const states = 20000
	br := startBroker(b, b.TempDir())
	opts := options(br, newTopic(), 1)
	s := open(b, opts, all)
	m, err := s.Marker()
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range putters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < states; i += putters {
				if err := s.Put(storetest.State(fmt.Sprintf("k%d", i%1000), int64(i), 0, 0, i%maxP, true)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		r, err := Open(opts, all, maxP)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Restore([][]byte{m}); err != nil {
			b.Fatal(err)
		}
		if _, _, n := r.Stats(); n != states {
			b.Fatalf("rebuilt %d states, want %d", n, states)
		}
		r.Close()
	}
	el := time.Since(start)
	b.ReportMetric(float64(states*b.N)/el.Seconds(), "states/s")
}

// BenchmarkReplay measures what a restored operator does for every input
// it replays: a Get of each of 20,000 completed states after a rebuild
// (the first Get of a state decodes it). One op is one Get.
func BenchmarkReplay(b *testing.B) {
	const states = 20000
	br := startBroker(b, b.TempDir())
	opts := options(br, newTopic(), 1)
	s := open(b, opts, all)
	m, err := s.Marker()
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]agent.RunID, states)
	var wg sync.WaitGroup
	for g := range putters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < states; i += putters {
				st := storetest.State(fmt.Sprintf("k%d", i%1000), int64(i), 0, 0, i%maxP, true)
				ids[i] = st.ID
				if err := s.Put(st); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	var r *Store
	var cpu int64 // process CPU time of the Gets
	c0 := cpuTime()
	for i := range b.N {
		if i%states == 0 {
			cpu += cpuTime() - c0
			b.StopTimer()
			if r != nil {
				r.Close()
			}
			if r, err = Open(opts, all, maxP); err != nil {
				b.Fatal(err)
			}
			if err := r.Restore([][]byte{m}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			c0 = cpuTime()
		}
		st, err := r.Get(ids[i%states])
		if err != nil || st == nil || !st.Completed {
			b.Fatalf("state %d: %v, %v", i%states, st, err)
		}
	}
	cpu += cpuTime() - c0
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	r.Close()
}

// cpuTime returns the process's user + system CPU time in nanoseconds: on
// a loaded machine it shows what an op costs better than the wall clock.
func cpuTime() int64 { return int64(testenv.CPUTime()) }
