package sim

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/internal/cputime"
)

// Summary is the outcome of RunSeeds.
type Summary struct {
	Seeds    int     `json:"seeds"`
	Failures int     `json:"failures"`
	Seconds  float64 `json:"seconds"`
	// CPUSeconds is the process's user and system CPU time over the batch
	// (0 where unknown).
	CPUSeconds        float64 `json:"cpu_seconds"`
	SeedsPerSecond    float64 `json:"seeds_per_second"`
	SeedsPerCPUSecond float64 `json:"seeds_per_cpu_second"`
	// HeapStartBytes and HeapEndBytes are the live heap (after a
	// collection) before the first seed and after the last: memory a run
	// keeps after its end shows as growth between them (S7).
	HeapStartBytes uint64 `json:"heap_start_bytes"`
	HeapEndBytes   uint64 `json:"heap_end_bytes"`
	// PeakHeapBytes is the largest heap (objects live or not yet
	// collected) sampled every 10ms during the batch (S7: at most
	// PeakHeapLimit per worker, plus one more).
	PeakHeapBytes uint64 `json:"peak_heap_bytes"`
	Workers       int    `json:"workers"`
}

// PeakHeapLimit bounds S7's peak: the heap sampled during a batch may
// hold at most this much per worker, plus as much again. A seed's job
// holds a few hundred records, its channels' buffers and a few
// checkpoints in memory and, in its Kafka form, a dozen franz-go clients
// with their buffers and the broker's logs. Measured (heap objects, live
// or garbage, every 10ms; 60 seeds with every form): 29 MiB on 1 worker,
// 31 MiB on 2, 44 MiB on 6; one Kafka seed alone 16 MiB. A run that held
// its records, channels or checkpoints many times over crosses it.
const PeakHeapLimit = 32 << 20

// HeapGrowthLimit bounds S7: the live heap after a batch may exceed the
// one before it by at most this much. A run keeps about nothing after its
// end (about 60 KiB of caches fill over the first seeds, then the heap is
// flat: 460 KiB after 10, 50 and 100 seeds).
const HeapGrowthLimit = 32 << 20

// MemoryFailure checks S7 on a batch: nil when the live heap grew by at
// most HeapGrowthLimit.
func (s Summary) MemoryFailure() *Failure {
	if limit := PeakHeapLimit * uint64(1+max(1, s.Workers)); s.PeakHeapBytes > limit {
		return &Failure{Invariant: InvMemory, Detail: fmt.Sprintf("the heap reached %d MiB during the batch on %d workers (limit %d MiB)",
			s.PeakHeapBytes>>20, s.Workers, limit>>20)}
	}
	if s.HeapEndBytes <= s.HeapStartBytes+HeapGrowthLimit {
		return nil
	}
	return &Failure{Invariant: InvMemory, Detail: fmt.Sprintf("the live heap grew from %d KiB to %d KiB over %d seeds (limit %d KiB)",
		s.HeapStartBytes>>10, s.HeapEndBytes>>10, s.Seeds, HeapGrowthLimit>>10)}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() uint64 {
	// Twice: what a sync.Pool held survives one collection (its victim
	// cache), and franz-go pools megabytes of buffers.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// RunSeeds runs seeds first, first+1, ... (n of them) on workers
// goroutines (at least 1) and calls report with every result, from one
// goroutine at a time, in completion order. It stops early when ctx ends
// (the seeds not started are not counted).
func RunSeeds(ctx context.Context, first uint64, n, workers int, o Options, report func(*Result)) (Summary, error) {
	sum := Summary{Workers: max(1, workers)}
	sum.HeapStartBytes = liveHeap()
	stopPeak := samplePeak(&sum.PeakHeapBytes)
	start, cpu0 := time.Now(), cpuSeconds()
	var next atomic.Uint64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= uint64(n) {
					return
				}
				res, err := Run(ctx, first+i, o)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				if ctx.Err() == nil {
					sum.Seeds++
					if res.Failure != nil {
						sum.Failures++
					}
					report(res)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stopPeak()
	sum.Seconds = time.Since(start).Seconds()
	sum.CPUSeconds = cpuSeconds() - cpu0
	sum.HeapEndBytes = liveHeap()
	if sum.Seconds > 0 {
		sum.SeedsPerSecond = float64(sum.Seeds) / sum.Seconds
	}
	if sum.CPUSeconds > 0 {
		sum.SeedsPerCPUSecond = float64(sum.Seeds) / sum.CPUSeconds
	}
	return sum, firstErr
}

func cpuSeconds() float64 { return cputime.Process().Seconds() }

// samplePeak samples the heap's objects (live or not yet collected) every
// 10ms into *peak until the returned function is called.
func samplePeak(peak *uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if s[0].Value.Kind() == metrics.KindUint64 {
				*peak = max(*peak, s[0].Value.Uint64())
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
