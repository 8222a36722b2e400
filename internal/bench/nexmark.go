package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/cputime"
	"github.com/weirproject/weir/nexmark"
)

// NexmarkOptions configure Nexmark.
type NexmarkOptions struct {
	// Queries to run, by name (nexmark.Names).
	Queries []string
	// Events is the number of events per run.
	Events int64
	// Kafka reads the events from the embedded broker as JSON (loaded
	// before the runs, untimed) instead of from the generator.
	Kafka bool
	// Parallelism of the job (and number of source splits or partitions).
	Parallelism int
	// Seed and EventsPerSecond configure the generator (nexmark.Config;
	// 0: its defaults).
	Seed            uint64
	EventsPerSecond int64
}

// NexmarkResult is one query measured, with its baselines from the same
// run. CPU figures are the process's user + system time (getrusage), which
// with --from kafka includes the embedded broker serving the fetches.
type NexmarkResult struct {
	Query       string `json:"query"`
	From        string `json:"from"`
	Events      int64  `json:"events"`
	Results     int64  `json:"results"`
	Parallelism int    `json:"parallelism"`
	// WallSeconds and EventsPerSec: the job's elapsed time and rate.
	WallSeconds  float64 `json:"wallSeconds"`
	EventsPerSec float64 `json:"eventsPerSec"`
	// CPUSecondsPerMillion is CPU seconds per million events: the main
	// figure on a shared machine.
	CPUSecondsPerMillion float64 `json:"cpuSecondsPerMillion"`
	// EventsPerCoreSec is events per CPU second: events/s per fully used
	// core, comparable with per-core figures of other systems.
	EventsPerCoreSec float64 `json:"eventsPerCoreSec"`
	// PeakMemoryBytes is the highest memory the Go runtime held from the
	// OS during the job (runtime/metrics, sampled every 10 ms: total minus
	// released); MaxRSSBytes is the process's peak resident set so far
	// (getrusage; never goes down, so with several queries it is the
	// highest of them and the broker's data).
	PeakMemoryBytes uint64 `json:"peakMemoryBytes"`
	MaxRSSBytes     int64  `json:"maxRSSBytes"`
	// GeneratorCPUSecondsPerMillion is the generator alone (one loop
	// calling Fill), the floor of every query from the generator.
	GeneratorCPUSecondsPerMillion float64 `json:"generatorCpuSecondsPerMillion"`
	// LoopCPUSecondsPerMillion is the hand-written query (the reference,
	// plain Go maps over the generator, one goroutine) on the same events.
	LoopCPUSecondsPerMillion float64 `json:"loopCpuSecondsPerMillion"`
	LoopResults              int64   `json:"loopResults"`
	// RatioToLoop is weir's CPU per event over the loop's.
	RatioToLoop float64 `json:"ratioToLoop"`
	// Load is the 1-minute load average when the job ended.
	Load float64 `json:"load"`
}

// Nexmark runs each query of o on o.Events events and measures it beside
// the generator alone and the hand-written query, in the same process. It
// calls report after each query.
func Nexmark(o NexmarkOptions, report func(NexmarkResult) error) error {
	g, err := nexmark.New(nexmark.Config{Seed: o.Seed, EventsPerSecond: o.EventsPerSecond})
	if err != nil {
		return err
	}
	from := "generator"
	var brokers []string
	const topic = "nexmark"
	if o.Kafka {
		from = "kafka"
		b, err := broker.Start(broker.Options{Topics: map[string]int32{topic: int32(o.Parallelism)}})
		if err != nil {
			return err
		}
		defer b.Close()
		brokers = b.Addrs()
		if err := nexmark.Produce(context.Background(), brokers, topic, int32(o.Parallelism), g, o.Events); err != nil {
			return err
		}
	}
	// The generator alone: the floor of every query.
	genCPU := cpuOf(func() {
		var e nexmark.Event
		for n := range o.Events {
			g.Fill(n, &e)
		}
	})
	for _, name := range o.Queries {
		q, ok := nexmark.Lookup(name)
		if !ok {
			return fmt.Errorf("bench: no Nexmark query %q; want one of %s", name, strings.Join(nexmark.Names(), ", "))
		}
		r := NexmarkResult{Query: q.Name, From: from, Events: o.Events, Parallelism: o.Parallelism}
		var results atomic.Int64
		env := weir.NewEnvironment(weir.Config{Parallelism: o.Parallelism})
		var src weir.Stream[nexmark.Event]
		if o.Kafka {
			stop := make(chan struct{})
			close(stop)
			src = nexmark.KafkaSource(env, "nexmark", brokers, topic, stop)
		} else {
			src = nexmark.Source(env, "nexmark", g, o.Events, o.Parallelism)
		}
		q.Build(src, &results)
		settle()
		peak := samplePeak()
		start, cpu0 := time.Now(), cpuNanos()
		err := env.Execute(context.Background())
		cpu, wall := cpuNanos()-cpu0, time.Since(start)
		r.PeakMemoryBytes = peak()
		if err != nil {
			return fmt.Errorf("bench: nexmark %s: %w", q.Name, err)
		}
		r.Results = results.Load()
		r.WallSeconds = wall.Seconds()
		r.EventsPerSec = float64(o.Events) / wall.Seconds()
		r.CPUSecondsPerMillion = float64(cpu) / 1e9 / (float64(o.Events) / 1e6)
		r.EventsPerCoreSec = float64(o.Events) / (float64(cpu) / 1e9)
		r.MaxRSSBytes = maxRSS()
		r.Load = loadAvg()
		env = nil
		settle()
		loopCPU := cpuOf(func() { r.LoopResults = q.Reference(g.Events(0, o.Events)) })
		r.GeneratorCPUSecondsPerMillion = float64(genCPU) / 1e9 / (float64(o.Events) / 1e6)
		r.LoopCPUSecondsPerMillion = float64(loopCPU) / 1e9 / (float64(o.Events) / 1e6)
		r.RatioToLoop = r.CPUSecondsPerMillion / r.LoopCPUSecondsPerMillion
		if err := report(r); err != nil {
			return err
		}
	}
	return nil
}

func cpuOf(f func()) int64 {
	c := cpuNanos()
	f()
	return cpuNanos() - c
}

// cpuNanos is the process's user + system CPU time.
func cpuNanos() int64 { return int64(cputime.Process()) }

// maxRSS is the process's peak resident set in bytes (Linux reports KiB).
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// samplePeak samples the memory the runtime holds from the OS every 10 ms
// until the returned function is called, which returns the highest sample.
func samplePeak() func() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	var peak atomic.Uint64
	read := func() {
		metrics.Read(s)
		if v := s[0].Value.Uint64() - s[1].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		read()
		return peak.Load()
	}
}

// loadAvg is the 1-minute load average (0 where /proc/loadavg is absent).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}
