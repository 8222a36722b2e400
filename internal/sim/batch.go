package sim

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
}

// RunSeeds runs seeds first, first+1, ... (n of them) on workers
// goroutines (at least 1) and calls report with every result, from one
// goroutine at a time, in completion order. It stops early when ctx ends
// (the seeds not started are not counted).
func RunSeeds(ctx context.Context, first uint64, n, workers int, o Options, report func(*Result)) (Summary, error) {
	start, cpu0 := time.Now(), cpuSeconds()
	var next atomic.Uint64
	var mu sync.Mutex
	var sum Summary
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
	sum.Seconds = time.Since(start).Seconds()
	sum.CPUSeconds = cpuSeconds() - cpu0
	if sum.Seconds > 0 {
		sum.SeedsPerSecond = float64(sum.Seeds) / sum.Seconds
	}
	if sum.CPUSeconds > 0 {
		sum.SeedsPerCPUSecond = float64(sum.Seeds) / sum.CPUSeconds
	}
	return sum, firstErr
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
