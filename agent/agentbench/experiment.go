package agentbench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/internal/cputime"
)

// CPU is the CPU time per input of the agent operator and of a
// hand-written loop doing the same work.
type CPU struct {
	// AgentMicros is the process CPU time (user + system) per input of a
	// run of the agent operator (source, operator, sink).
	AgentMicros float64 `json:"agentMicros"`
	// LoopMicros is that of a hand-written Go loop doing the same work with
	// the same concurrency: a generator, a pool of worker goroutines
	// running the same action code (model call included) for at most
	// MaxConcurrentKeys inputs at once, and a collector goroutine; no keys,
	// order, watermarks or state.
	LoopMicros float64 `json:"loopMicros"`
}

// Overhead is AgentMicros - LoopMicros: the operator's own CPU per action,
// outside user code.
func (c CPU) Overhead() float64 { return c.AgentMicros - c.LoopMicros }

// MeasureCPU runs cfg (Blocking ignored) with the agent operator and with
// the hand-written loop, each three times, and returns the lowest CPU per
// input of each (to damp the noise of other processes).
func MeasureCPU(ctx context.Context, cfg Config) (CPU, error) {
	if !cputime.Supported {
		return CPU{}, fmt.Errorf("agentbench: CPU time is not available on this platform")
	}
	cfg = cfg.withDefaults()
	cfg.Blocking = false
	measure := func(f func() error) (float64, error) {
		best := -1.0
		for range 3 {
			c0 := int64(cputime.Process())
			if err := f(); err != nil {
				return 0, err
			}
			us := float64(int64(cputime.Process())-c0) / 1e3 / float64(cfg.Inputs)
			if best < 0 || us < best {
				best = us
			}
		}
		return best, nil
	}
	var c CPU
	var err error
	if c.LoopMicros, err = measure(func() error { return Loop(ctx, cfg) }); err != nil {
		return c, err
	}
	c.AgentMicros, err = measure(func() error { _, err := Run(ctx, cfg); return err })
	return c, err
}

// Loop does the work of Run by hand (see CPU.LoopMicros).
func Loop(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	keys := Keys(cfg.Keys)
	m := &countingModel{m: &model.Offline{Seed: cfg.Seed, Latency: cfg.Latency}}
	limit := cfg.MaxConcurrentKeys * cfg.Parallelism
	jobs := make(chan Input, limit)
	results := make(chan string, limit)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for in := range jobs {
				resp, err := m.Chat(ctx, model.Request{Messages: []model.Message{model.User(in.Text)}})
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					results <- ""
				} else {
					results <- resp.Message.Content
				}
				<-sem
			}
		}()
	}
	done := make(chan int)
	go func() {
		n := 0
		for range results {
			n++
		}
		done <- n
	}()
	for i := range int64(cfg.Inputs) {
		sem <- struct{}{}
		jobs <- InputAt(keys, i).Value
	}
	close(jobs)
	wg.Wait()
	close(results)
	if n := <-done; n != cfg.Inputs {
		return fmt.Errorf("agentbench: loop produced %d results for %d inputs", n, cfg.Inputs)
	}
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// ExperimentConfig configures Experiment.
type ExperimentConfig struct {
	Config
	// BlockingInputs is the number of inputs of the blocking run (which
	// does one action at a time); 0 means 40, negative skips it.
	BlockingInputs int `json:"blockingInputs"`
	// CPUInputs is the number of inputs of each CPU run (zero latency);
	// 0 means 100,000, negative skips the CPU measurement.
	CPUInputs int `json:"cpuInputs"`
	// Stores are further asynchronous runs of the same workload, each
	// with an action-state store (Config.Store and StoreName set).
	Stores []Config `json:"-"`
}

// StoreRun is the asynchronous run of the workload with one store.
type StoreRun struct {
	Store               string  `json:"store"`
	ThroughputPerSec    float64 `json:"throughputPerSec"`
	IdealPerSec         float64 `json:"idealPerSec"`
	Efficiency          float64 `json:"efficiency"`
	WatermarkViolations int64   `json:"watermarkViolations"`
	// CallToOutputMeanMicros and CallToOutputP99Micros are the run's
	// (Result); StoreMeanMicros is its mean less that of the run without
	// a store (Report.Async): what the store adds to a slot.
	CallToOutputMeanMicros float64 `json:"callToOutputMeanMicros"`
	CallToOutputP99Micros  float64 `json:"callToOutputP99Micros"`
	StoreMeanMicros        float64 `json:"storeMeanMicros"`
	CPUMicrosPerInput      float64 `json:"cpuMicrosPerInput,omitempty"`
	// ProcessCPUMicrosPerAction is the run's (Result), and
	// StoreCPUMicrosPerAction that less the run without a store's: the
	// store's CPU per action.
	ProcessCPUMicrosPerAction float64 `json:"processCpuMicrosPerAction,omitempty"`
	StoreCPUMicrosPerAction   float64 `json:"storeCpuMicrosPerAction,omitempty"`
	// ActionP50Ms, ActionP99Ms, ModelRetries, RateLimitedRetries and
	// Injected are the run's (Result).
	ActionP50Ms        float64     `json:"actionP50Ms"`
	ActionP99Ms        float64     `json:"actionP99Ms"`
	ModelRetries       int64       `json:"modelRetries"`
	RateLimitedRetries int64       `json:"rateLimitedRetries"`
	Injected           FaultCounts `json:"injected"`
	// Result is the whole result of the run.
	Result Result `json:"-"`
}

// Report is the result of Experiment: the headline numbers of the
// asynchronous run, then the details of every run.
type Report struct {
	Inputs              int64   `json:"inputs"`
	ThroughputPerSec    float64 `json:"throughputPerSec"`
	IdealPerSec         float64 `json:"idealPerSec"`
	Efficiency          float64 `json:"efficiency"`
	WatermarkViolations int64   `json:"watermarkViolations"`
	HeldWatermarksMax   int64   `json:"heldWatermarksMax"`
	// CPUMicrosPerAction is CPU.Overhead() of zero-latency runs: the
	// operator's CPU per action outside user code.
	CPUMicrosPerAction float64 `json:"cpuMicrosPerAction"`
	// ProcessCPUMicrosPerAction, ActionP50Ms, ActionP99Ms, ModelRetries
	// and RateLimitedRetries are the asynchronous run's (Result).
	ProcessCPUMicrosPerAction float64 `json:"processCpuMicrosPerAction,omitempty"`
	ActionP50Ms               float64 `json:"actionP50Ms"`
	ActionP99Ms               float64 `json:"actionP99Ms"`
	ModelRetries              int64   `json:"modelRetries"`
	RateLimitedRetries        int64   `json:"rateLimitedRetries"`
	// BlockingPerSec is the throughput of the blocking variant, and
	// SpeedupVsBlocking the asynchronous throughput over it.
	BlockingPerSec    float64 `json:"blockingPerSec,omitempty"`
	SpeedupVsBlocking float64 `json:"speedupVsBlocking,omitempty"`
	// Stores are the runs with an action-state store, beside the run
	// without one above.
	Stores   []StoreRun `json:"stores,omitempty"`
	Async    Result     `json:"async"`
	Blocking *Result    `json:"blocking,omitempty"`
	CPU      *CPU       `json:"cpu,omitempty"`
}

// Experiment runs the asynchronous operator on cfg, the blocking variant
// on BlockingInputs inputs of the same workload, and the CPU measurement,
// in this process, one after the other.
func Experiment(ctx context.Context, cfg ExperimentConfig) (Report, error) {
	c := cfg.Config.withDefaults()
	c.Blocking = false
	async, err := Run(ctx, c)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Inputs: async.Inputs, ThroughputPerSec: async.ThroughputPerSec, IdealPerSec: async.IdealPerSec,
		Efficiency: async.Efficiency, WatermarkViolations: async.WatermarkViolations, HeldWatermarksMax: async.HeldWatermarksMax, Async: async,
		ProcessCPUMicrosPerAction: async.ProcessCPUMicrosPerAction, ActionP50Ms: async.ActionP50Ms, ActionP99Ms: async.ActionP99Ms,
		ModelRetries: async.ModelRetries, RateLimitedRetries: async.RateLimitedRetries}
	for _, sc := range cfg.Stores {
		sc.Inputs, sc.Keys, sc.MaxConcurrentKeys, sc.Parallelism = c.Inputs, c.Keys, c.MaxConcurrentKeys, c.Parallelism
		sc.Latency, sc.WatermarkInterval, sc.Seed, sc.Blocking = c.Latency, c.WatermarkInterval, c.Seed, false
		sc.Model, sc.Stream, sc.Faults, sc.RetryInitial, sc.TreeDepth, sc.TreeFanout = c.Model, c.Stream, c.Faults, c.RetryInitial, c.TreeDepth, c.TreeFanout
		r, err := Run(ctx, sc)
		if err != nil {
			return rep, fmt.Errorf("agentbench: run with store %s: %w", sc.StoreName, err)
		}
		rep.Stores = append(rep.Stores, StoreRun{Store: sc.StoreName, ThroughputPerSec: r.ThroughputPerSec,
			IdealPerSec: r.IdealPerSec, Efficiency: r.Efficiency, WatermarkViolations: r.WatermarkViolations,
			CallToOutputMeanMicros: r.CallToOutputMeanMicros, CallToOutputP99Micros: r.CallToOutputP99Micros,
			StoreMeanMicros: r.CallToOutputMeanMicros - async.CallToOutputMeanMicros, CPUMicrosPerInput: r.CPUMicrosPerInput,
			ProcessCPUMicrosPerAction: r.ProcessCPUMicrosPerAction,
			StoreCPUMicrosPerAction:   r.ProcessCPUMicrosPerAction - async.ProcessCPUMicrosPerAction,
			ActionP50Ms:               r.ActionP50Ms, ActionP99Ms: r.ActionP99Ms, ModelRetries: r.ModelRetries,
			RateLimitedRetries: r.RateLimitedRetries, Injected: r.Injected, Result: r})
		rep.WatermarkViolations += r.WatermarkViolations
	}
	if cfg.BlockingInputs >= 0 {
		b := c
		b.Blocking = true
		b.Inputs = cfg.BlockingInputs
		if b.Inputs == 0 {
			b.Inputs = 40
		}
		br, err := Run(ctx, b)
		if err != nil {
			return rep, err
		}
		rep.Blocking = &br
		rep.BlockingPerSec = br.OverallPerSec
		if br.OverallPerSec > 0 {
			rep.SpeedupVsBlocking = async.ThroughputPerSec / br.OverallPerSec
		}
		rep.WatermarkViolations += br.WatermarkViolations
	}
	if cfg.CPUInputs >= 0 {
		z := c
		z.Inputs = cfg.CPUInputs
		if z.Inputs == 0 {
			z.Inputs = 100_000
		}
		z.Latency = model.Latency{Dist: "fixed"}
		// The operator's own cost: the plain workload on the offline
		// model, as the hand-written loop does it.
		z.Model, z.Stream, z.Faults, z.TreeDepth, z.TreeFanout = "", false, Faults{}, 0, 0
		cpu, err := MeasureCPU(ctx, z)
		if err != nil {
			return rep, err
		}
		rep.CPU = &cpu
		rep.CPUMicrosPerAction = cpu.Overhead()
	}
	return rep, nil
}
