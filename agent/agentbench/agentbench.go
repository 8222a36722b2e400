// Package agentbench measures the agent operator on the offline model: `weir
// experiment agent` prints its results, and the benchmarks in its tests
// compare the asynchronous operator with the blocking variant (actions run
// synchronously on the subtask goroutine) in the same run.
//
// The workload: Inputs records spread over Keys keys (a fixed pseudo-random
// order), timestamps ascending, watermarks every WatermarkInterval of
// processing time; one action per input, calling the offline model, whose
// latency is drawn per request from Latency, and emitting its answer.
//
// # What it reports, and how
//
//  1. throughputPerSec: actions per second in the steady state, between the
//     outputs that complete 10% and 90% of the inputs (start-up and the
//     drain of the slowest calls excluded); overallPerSec includes them.
//  2. idealPerSec: MaxConcurrentKeys × Parallelism ÷ mean latency, the rate
//     at which the in-flight limit is always full; efficiency is the ratio.
//  3. watermarkViolations: outputs that reached the sink with a timestamp
//     at or behind a watermark the sink had already received (must be 0).
//  4. heldWatermarksMax: the most watermarks the operator held at once
//     (sampled every 5ms).
//  5. cpuMicrosPerAction: process CPU time (user + system, getrusage) per
//     action of a zero-latency run minus that of the same pipeline with the
//     action's code called inline in a map (source, model reply, sink): the
//     operator's own cost per action, outside user code.
//  6. callToOutputMeanMicros and callToOutputP99Micros: per input, the
//     time from the model call's return (in the action) to its output
//     reaching the sink: what the operator adds to an in-flight slot after
//     the call, the action-state store's writes included. With a store
//     against the run without one it is the store's share of the slot
//     time, a figure that the machine's load distorts less than the
//     efficiency. cpuMicrosPerInput is the process CPU time (user +
//     system, getrusage) of the run over its inputs (with the Kafka store
//     the embedded broker's included).
package agentbench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// Config describes one experiment. The zero value is usable: every field
// documents its default.
type Config struct {
	// Inputs is the number of input records; 0 means 100,000.
	Inputs int `json:"inputs"`
	// Keys is the number of distinct keys; 0 means 10,000.
	Keys int `json:"keys"`
	// MaxConcurrentKeys is the operator's in-flight limit per subtask; 0
	// means 1,000.
	MaxConcurrentKeys int `json:"maxConcurrentKeys"`
	// Parallelism is the number of agent subtasks; 0 means 1.
	Parallelism int `json:"parallelism"`
	// Latency of the offline model; the zero value means exponential with
	// mean 50ms (set Dist "fixed" with Mean 0 for no latency).
	Latency model.Latency `json:"latency"`
	// WatermarkInterval is the sources' periodic watermark interval; 0
	// means 10ms.
	WatermarkInterval time.Duration `json:"watermarkIntervalNs"`
	// Seed seeds the offline model.
	Seed int64 `json:"seed"`
	// Blocking runs the blocking variant.
	Blocking bool `json:"blocking"`
	// Store, if set, is the operator's action-state store (every model
	// call and completed action recorded); StoreName names it in reports.
	Store     agent.StoreFactory `json:"-"`
	StoreName string             `json:"store,omitempty"`
}

func (c Config) withDefaults() Config {
	if c.Inputs <= 0 {
		c.Inputs = 100_000
	}
	if c.Keys <= 0 {
		c.Keys = 10_000
	}
	if c.MaxConcurrentKeys <= 0 {
		c.MaxConcurrentKeys = 1000
	}
	if c.Parallelism <= 0 {
		c.Parallelism = 1
	}
	if c.Latency == (model.Latency{}) {
		c.Latency = model.Latency{Dist: "exponential", Mean: 50 * time.Millisecond}
	}
	if c.WatermarkInterval <= 0 {
		c.WatermarkInterval = 10 * time.Millisecond
	}
	return c
}

// Result is what one run measured.
type Result struct {
	Mode                string  `json:"mode"`
	Inputs              int64   `json:"inputs"`
	Keys                int     `json:"keys"`
	MaxConcurrentKeys   int     `json:"maxConcurrentKeys"`
	Parallelism         int     `json:"parallelism"`
	LatencyDist         string  `json:"latencyDist"`
	MeanLatencyMs       float64 `json:"meanLatencyMs"`
	Seconds             float64 `json:"seconds"`
	ThroughputPerSec    float64 `json:"throughputPerSec"`
	OverallPerSec       float64 `json:"overallPerSec"`
	IdealPerSec         float64 `json:"idealPerSec"`
	Efficiency          float64 `json:"efficiency"`
	WatermarkViolations int64   `json:"watermarkViolations"`
	Watermarks          int64   `json:"watermarks"`
	HeldWatermarksMax   int64   `json:"heldWatermarksMax"`
	MaxInFlightCalls    int64   `json:"maxInFlightCalls"`
	ActionsRun          int64   `json:"actionsRun"`
	CPUMicrosPerAction  float64 `json:"cpuMicrosPerAction,omitempty"`
	// CallToOutputMeanMicros and CallToOutputP99Micros: the time from a
	// model call's return to the input's output at the sink (item 6 of
	// the package documentation); CPUMicrosPerInput the process CPU time
	// of the run per input.
	CallToOutputMeanMicros float64 `json:"callToOutputMeanMicros"`
	CallToOutputP99Micros  float64 `json:"callToOutputP99Micros"`
	CPUMicrosPerInput      float64 `json:"cpuMicrosPerInput,omitempty"`
}

// Input is the record type of the workload.
type Input struct {
	ID   int64  `json:"id"` // the input's index, also its timestamp
	Key  string `json:"key"`
	Text string `json:"text"`
}

// Keys returns n distinct keys.
func Keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "user-" + strconv.Itoa(i)
	}
	return ks
}

// InputAt returns input i of the workload over keys: keys in a fixed
// pseudo-random order, timestamp i.
func InputAt(keys []string, i int64) weir.Record[Input] {
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x7F4A7C15
	h ^= h >> 31
	return weir.Record[Input]{Value: Input{ID: i, Key: keys[h%uint64(len(keys))], Text: "question " + strconv.FormatInt(i, 10)}, Timestamp: i}
}

// countingModel wraps the offline model and tracks concurrent calls.
type countingModel struct {
	m        *model.Offline
	inFlight atomic.Int64
	max      atomic.Int64
}

func (c *countingModel) Chat(ctx context.Context, req model.Request) (*model.Response, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		old := c.max.Load()
		if n <= old || c.max.CompareAndSwap(old, n) {
			break
		}
	}
	return c.m.Chat(ctx, req)
}

// Action is the workload's action body: ask the model, output the answer.
func Action(c *agent.RunnerContext, ev agent.Event) error {
	in, err := agent.Input[Input](ev)
	if err != nil {
		return err
	}
	resp, err := c.Chat("offline", model.Request{Messages: []model.Message{model.User(in.Text)}})
	if err != nil {
		return err
	}
	c.Output(resp.Message.Content)
	return nil
}

// timedAction is Action noting, per input, when its model call returned
// (nanoseconds since t0) in called.
func timedAction(called []atomic.Int64, t0 time.Time) func(*agent.RunnerContext, agent.Event) error {
	return func(c *agent.RunnerContext, ev agent.Event) error {
		in, err := agent.Input[Input](ev)
		if err != nil {
			return err
		}
		resp, err := c.Chat("offline", model.Request{Messages: []model.Message{model.User(in.Text)}})
		if err != nil {
			return err
		}
		if in.ID >= 0 && in.ID < int64(len(called)) {
			called[in.ID].Store(int64(time.Since(t0)))
		}
		c.Output(resp.Message.Content)
		return nil
	}
}

// sink checks outputs against watermarks and timestamps the 10% and 90%
// marks.
type sink struct {
	runtime.Base[struct{}]
	st *sinkState
	wm int64
}

type sinkState struct {
	n, violations, watermarks atomic.Int64
	total                     int64 // set before the run
	mu                        sync.Mutex
	t10, t90, tEnd            time.Time
	// t0 and called are the action's (timedAction); lag[i] is the time
	// from input i's call returning to its output here (nanoseconds; the
	// sink has one subtask).
	t0     time.Time
	called []atomic.Int64
	lag    []int64
}

func (s *sink) Open(ctx *runtime.Context, out runtime.Output[struct{}]) error {
	s.wm = runtime.NoTimestamp
	return s.Base.Open(ctx, out)
}

func (s *sink) ProcessRecord(r runtime.Record[string]) error {
	if r.Timestamp <= s.wm {
		s.st.violations.Add(1)
	}
	if i := r.Timestamp; i >= 0 && i < int64(len(s.st.lag)) {
		if c := s.st.called[i].Load(); c > 0 {
			s.st.lag[i] = int64(time.Since(s.st.t0)) - c
		}
	}
	n := s.st.n.Add(1)
	if n == s.st.total/10 || n == s.st.total*9/10 || n == s.st.total {
		now := time.Now()
		s.st.mu.Lock()
		switch n {
		case s.st.total / 10:
			s.st.t10 = now
		case s.st.total * 9 / 10:
			s.st.t90 = now
		}
		if n == s.st.total {
			s.st.tEnd = now
		}
		s.st.mu.Unlock()
	}
	return nil
}

func (s *sink) ProcessWatermark(ts int64) error {
	s.wm = ts
	s.st.watermarks.Add(1)
	return nil
}

func (s *sink) EndInput() error { return nil }

// Run runs one experiment.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Latency.Validate(); err != nil {
		return Result{}, err
	}
	cm := &countingModel{m: &model.Offline{Seed: cfg.Seed, Latency: cfg.Latency}}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: cfg.WatermarkInterval})
	keys := Keys(cfg.Keys)
	src := weir.Generate(env, "inputs", int64(cfg.Inputs), func(i int64) weir.Record[Input] { return InputAt(keys, i) },
		watermark.ForMonotonous[Input]())
	st := &sinkState{t0: time.Now(), called: make([]atomic.Int64, cfg.Inputs), lag: make([]int64, cfg.Inputs)}
	a := &agent.Agent{Models: map[string]model.ChatModel{"offline": cm},
		Actions: []agent.Action{agent.NewAction("answer", timedAction(st.called, st.t0), agent.TypeInput)}}
	opts := agent.Options{MaxConcurrentKeys: cfg.MaxConcurrentKeys, Blocking: cfg.Blocking, Store: cfg.Store}
	out := agent.Apply[string, Input, string](weir.KeyBy(src, func(in Input) string { return in.Key }), "agent", a, opts).Parallelism(cfg.Parallelism)
	st.total = int64(cfg.Inputs)
	weir.Transform(out, "sink", func() runtime.OneInputOperator[string, struct{}] { return &sink{st: st} }).Parallelism(1)

	var heldMax atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				for _, m := range env.Metrics().Snapshot() {
					if m.Operator == "agent" && m.Name == "heldWatermarks" && m.Value > heldMax.Load() {
						heldMax.Store(m.Value)
					}
				}
			}
		}
	}()
	start, c0 := time.Now(), cpuTime()
	err := env.Execute(ctx)
	elapsed, cpu := time.Since(start), cpuTime()-c0
	close(stop)
	wg.Wait()
	if err != nil {
		return Result{}, err
	}
	if st.n.Load() != int64(cfg.Inputs) {
		return Result{}, fmt.Errorf("agentbench: %d outputs for %d inputs", st.n.Load(), cfg.Inputs)
	}
	mean := meanLatency(cm.m)
	r := Result{Mode: "async", Inputs: int64(cfg.Inputs), Keys: cfg.Keys, MaxConcurrentKeys: cfg.MaxConcurrentKeys,
		Parallelism: cfg.Parallelism, LatencyDist: cfg.Latency.Dist, MeanLatencyMs: float64(mean) / 1e6,
		Seconds: elapsed.Seconds(), WatermarkViolations: st.violations.Load(), Watermarks: st.watermarks.Load(),
		HeldWatermarksMax: heldMax.Load(), MaxInFlightCalls: cm.max.Load(), ActionsRun: env.Metrics().Sum("agent", "actionsRun")}
	slots := cfg.MaxConcurrentKeys * cfg.Parallelism
	if cfg.Blocking {
		r.Mode = "blocking"
		slots = cfg.Parallelism
	}
	if r.LatencyDist == "" {
		r.LatencyDist = "fixed"
	}
	if cpuSupported {
		r.CPUMicrosPerInput = float64(cpu) / 1e3 / float64(cfg.Inputs)
	}
	r.CallToOutputMeanMicros, r.CallToOutputP99Micros = lagStats(st.lag)
	r.OverallPerSec = float64(cfg.Inputs) / elapsed.Seconds()
	r.ThroughputPerSec = r.OverallPerSec
	if st.t90.After(st.t10) && cfg.Inputs >= 100 {
		r.ThroughputPerSec = float64(cfg.Inputs*8/10) / st.t90.Sub(st.t10).Seconds()
	}
	if mean > 0 {
		r.IdealPerSec = float64(slots) / mean.Seconds()
		r.Efficiency = r.ThroughputPerSec / r.IdealPerSec
	}
	return r, nil
}

// lagStats returns the mean and the 99th percentile of the lags measured
// (zero entries are inputs not measured), in microseconds.
func lagStats(lag []int64) (mean, p99 float64) {
	ls := make([]int64, 0, len(lag))
	var sum int64
	for _, l := range lag {
		if l > 0 {
			ls = append(ls, l)
			sum += l
		}
	}
	if len(ls) == 0 {
		return 0, 0
	}
	slices.Sort(ls)
	return float64(sum) / float64(len(ls)) / 1e3, float64(ls[len(ls)*99/100]) / 1e3
}

// meanLatency is the mean of the model's latency distribution, computed
// from its quantile function.
func meanLatency(o *model.Offline) time.Duration {
	const n = 10000
	var sum float64
	for i := range n {
		sum += float64(o.Latency.Sample((float64(i) + 0.5) / n))
	}
	return time.Duration(sum / n)
}

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
	if !cpuSupported {
		return CPU{}, fmt.Errorf("agentbench: CPU time is not available on this platform")
	}
	cfg = cfg.withDefaults()
	cfg.Blocking = false
	measure := func(f func() error) (float64, error) {
		best := -1.0
		for range 3 {
			c0 := cpuTime()
			if err := f(); err != nil {
				return 0, err
			}
			us := float64(cpuTime()-c0) / 1e3 / float64(cfg.Inputs)
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
		Efficiency: async.Efficiency, WatermarkViolations: async.WatermarkViolations, HeldWatermarksMax: async.HeldWatermarksMax, Async: async}
	for _, sc := range cfg.Stores {
		sc.Inputs, sc.Keys, sc.MaxConcurrentKeys, sc.Parallelism = c.Inputs, c.Keys, c.MaxConcurrentKeys, c.Parallelism
		sc.Latency, sc.WatermarkInterval, sc.Seed, sc.Blocking = c.Latency, c.WatermarkInterval, c.Seed, false
		r, err := Run(ctx, sc)
		if err != nil {
			return rep, fmt.Errorf("agentbench: run with store %s: %w", sc.StoreName, err)
		}
		rep.Stores = append(rep.Stores, StoreRun{Store: sc.StoreName, ThroughputPerSec: r.ThroughputPerSec,
			IdealPerSec: r.IdealPerSec, Efficiency: r.Efficiency, WatermarkViolations: r.WatermarkViolations,
			CallToOutputMeanMicros: r.CallToOutputMeanMicros, CallToOutputP99Micros: r.CallToOutputP99Micros,
			StoreMeanMicros: r.CallToOutputMeanMicros - async.CallToOutputMeanMicros, CPUMicrosPerInput: r.CPUMicrosPerInput})
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
		cpu, err := MeasureCPU(ctx, z)
		if err != nil {
			return rep, err
		}
		rep.CPU = &cpu
		rep.CPUMicrosPerAction = cpu.Overhead()
	}
	return rep, nil
}
