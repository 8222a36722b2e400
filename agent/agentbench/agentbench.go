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
//  7. Realistic models (Config.Model, Faults, TreeDepth, TreeFanout): the
//     calls go to the offline model or through the OpenAI client (official
//     SDK, HTTP) to a FakeOpenAI on 127.0.0.1; a fraction of attempts is
//     answered 429 or fails transiently and is retried by the client; each
//     input runs an execution tree of actions. idealPerSec is then the
//     in-flight capacity ÷ ExpectedActionTime (the mean latency plus the
//     expected retry waits), in actions per second; the run reports the
//     retries, the faults injected, p50/p99 action time, the process CPU
//     per action, and fails unless every action's output reached the sink
//     exactly once. docs/agents.md, "Realistic models", defines it all.
package agentbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/benchhook"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/internal/cputime"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"go.opentelemetry.io/otel/trace"
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
	// TracerProvider, if set, traces the agent (agent.Options.TracerProvider).
	TracerProvider trace.TracerProvider `json:"-"`
	// Store, if set, is the operator's action-state store (every model
	// call and completed action recorded); StoreName names it in reports.
	Store     agent.StoreFactory `json:"-"`
	StoreName string             `json:"store,omitempty"`
	// Model is where the calls go: "offline" (or "") the offline model in
	// the process; "http" the project's OpenAI client (model.OpenAI, the
	// official SDK over HTTP and JSON, with its retry policy and a
	// model.Limiter) against a FakeOpenAI on 127.0.0.1 started for the
	// run, replying and taking as long as the offline model would.
	Model string `json:"model,omitempty"`
	// Stream makes the HTTP client stream its calls (server-sent events);
	// ignored offline.
	Stream bool `json:"stream,omitempty"`
	// Faults are injected into the calls (both modes; see Faults). With
	// faults the offline model is called through model.WithRetry and
	// model.WithRateLimit, the retry path the HTTP client has built in;
	// without, offline calls go to the model directly.
	Faults Faults `json:"faults,omitempty"`
	// RetryInitial is the retry policy's first back-off (doubling up to
	// 30s, 4 attempts); 0 means the client's default, 500ms.
	RetryInitial time.Duration `json:"retryInitialNs,omitempty"`
	// TreeDepth and TreeFanout shape each input's execution tree: an
	// action at depth d < TreeDepth sends TreeFanout child events, each
	// handled by a further action (one model call, one output), so an
	// input runs 1 + K + ... + K^TreeDepth actions (K = TreeFanout). 0
	// and 0 mean one action per input; TreeFanout 0 with TreeDepth > 0
	// means 1.
	TreeDepth  int `json:"treeDepth,omitempty"`
	TreeFanout int `json:"treeFanout,omitempty"`
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	var errs []error
	if err := c.Latency.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Faults.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.Model {
	case "", "offline", "http":
	default:
		errs = append(errs, fmt.Errorf("agentbench: model %q: want offline or http", c.Model))
	}
	if c.TreeDepth < 0 || c.TreeFanout < 0 {
		errs = append(errs, fmt.Errorf("agentbench: tree depth %d, fan-out %d: want integers >= 0", c.TreeDepth, c.TreeFanout))
	} else if n := c.ActionsPerInput(); n <= 0 || n > maxActionsPerInput {
		errs = append(errs, fmt.Errorf("agentbench: tree depth %d with fan-out %d: want at most %d actions per input", c.TreeDepth, c.TreeFanout, maxActionsPerInput))
	}
	if c.RetryInitial < 0 {
		errs = append(errs, fmt.Errorf("agentbench: retry back-off %v: want 0 (500ms) or a positive duration", c.RetryInitial))
	}
	return errors.Join(errs...)
}

// maxActionsPerInput bounds an input's execution tree.
const maxActionsPerInput = 10_000

// ActionsPerInput is the number of actions of one input's execution
// tree: 1 + K + ... + K^TreeDepth (-1 when that exceeds the bound
// Validate accepts).
func (c Config) ActionsPerInput() int64 {
	k := int64(max(c.TreeFanout, 1))
	n, level := int64(1), int64(1)
	for range c.TreeDepth {
		level *= k
		n += level
		if n > maxActionsPerInput {
			return -1
		}
	}
	return n
}

// retryPolicy is the client's retry policy of a run.
func (c Config) retryPolicy() model.RetryPolicy {
	return model.RetryPolicy{Attempts: retryAttempts, Initial: c.RetryInitial}
}

// retryAttempts is the attempts of a call: injected faults stop one
// short of them (Faults.MaxInARow), so every call succeeds.
const retryAttempts = 4

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

	// Model is "offline" or "http" (Config.Model), Stream whether the
	// HTTP client streamed.
	Model  string `json:"model"`
	Stream bool   `json:"stream,omitempty"`
	// Actions is the number of actions (and outputs) of the run: Inputs ×
	// ActionsPerInput (Config.TreeDepth, TreeFanout). ThroughputPerSec,
	// OverallPerSec and IdealPerSec count actions.
	ActionsPerInput int64 `json:"actionsPerInput"`
	Actions         int64 `json:"actions"`
	// Faults are those injected, and ExpectedActionMs the mean action
	// time the ideal is computed from (ExpectedActionTime: the mean
	// latency plus the expected retries' waits).
	Faults           Faults  `json:"faults"`
	ExpectedActionMs float64 `json:"expectedActionMs"`
	// Injected is what the model (offline) or the fake server (http) saw
	// and injected: every attempt, and the faulted ones by kind.
	Injected FaultCounts `json:"injected"`
	// ModelRetries and RateLimitedRetries are the retries the client made
	// (agent metrics modelRetries, modelRateLimitedRetries): every
	// injected fault is retried once, so ModelRetries equals
	// Injected.Faulted(), RateLimitedRetries Injected.RateLimited.
	ModelRetries       int64 `json:"modelRetries"`
	RateLimitedRetries int64 `json:"rateLimitedRetries"`
	// ActionP50Ms and ActionP99Ms are percentiles of the actions' run
	// time (the model call with its retries, waits for the limiter
	// included).
	ActionP50Ms float64 `json:"actionP50Ms"`
	ActionP99Ms float64 `json:"actionP99Ms"`
	// ProcessCPUMicrosPerAction is the process CPU time (user + system,
	// getrusage) of the run over its actions: the operator, the client,
	// and the fake server or embedded broker, all in this process.
	ProcessCPUMicrosPerAction float64 `json:"processCpuMicrosPerAction,omitempty"`
	// Duplicates and Missing count actions whose output reached the sink
	// more than once, and not at all (Run fails unless both are 0).
	Duplicates int64 `json:"duplicates"`
	Missing    int64 `json:"missing"`
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

// countingModel wraps the workload's model and tracks concurrent calls.
type countingModel struct {
	m        model.ChatModel
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

// Node is the value of a child event: the input it descends from, its
// number in the input's execution tree (breadth first: the input's
// action is 0, the children of node n are n·K+1 ... n·K+K) and its depth.
type Node struct {
	ID    int64 `json:"id"`
	Node  int64 `json:"node"`
	Depth int   `json:"depth"`
}

// childEvent is the type of the tree's child events.
const childEvent = "child"

// treeAction is the workload's action: ask the model about the node,
// output "g answer" (g = the node's index among all actions of the run),
// send the node's children; it notes, per action, when its model call
// returned (nanoseconds since t0) in called and how long the action ran
// in took.
func treeAction(cfg Config, called, took []atomic.Int64, t0 time.Time) func(*agent.RunnerContext, agent.Event) error {
	apn, k := cfg.ActionsPerInput(), int64(max(cfg.TreeFanout, 1))
	return func(c *agent.RunnerContext, ev agent.Event) error {
		start := time.Now()
		var n Node
		if ev.Type == agent.TypeInput {
			in, err := agent.Input[Input](ev)
			if err != nil {
				return err
			}
			n.ID = in.ID
		} else {
			var err error
			if n, err = agent.ValueAs[Node](ev); err != nil {
				return err
			}
		}
		text := "question " + strconv.FormatInt(n.ID, 10)
		if n.Node > 0 {
			text += "/" + strconv.FormatInt(n.Node, 10)
		}
		resp, err := c.Chat("model", model.Request{Messages: []model.Message{model.User(text)}})
		if err != nil {
			return err
		}
		g := n.ID*apn + n.Node
		if g >= 0 && g < int64(len(called)) {
			called[g].Store(int64(time.Since(t0)))
		}
		c.Output(strconv.FormatInt(g, 10) + " " + resp.Message.Content)
		if n.Depth < cfg.TreeDepth {
			for j := range k {
				if err := c.Send(agent.NewEvent(childEvent, Node{ID: n.ID, Node: n.Node*k + 1 + j, Depth: n.Depth + 1}, nil)); err != nil {
					return err
				}
			}
		}
		if g >= 0 && g < int64(len(took)) {
			took[g].Store(int64(time.Since(start)))
		}
		return nil
	}
}

// runModel is a run's model and what counts its faults.
type runModel struct {
	m      *countingModel
	counts func() FaultCounts
	close  func()
}

// newRunModel builds the model of cfg (see Config.Model): offline, or the
// OpenAI client against a fake server started here, with the faults.
func newRunModel(cfg Config, slots int) (*runModel, error) {
	faults := cfg.Faults
	faults.MaxInARow = retryAttempts - 1
	limiter := model.MustLimiter(model.RateLimit{})
	if cfg.Model == "http" {
		srv, err := StartFakeOpenAI(FakeOpenAIConfig{Seed: cfg.Seed, Latency: cfg.Latency, Faults: faults})
		if err != nil {
			return nil, err
		}
		// As many idle connections as calls in flight: the default (2 per
		// host) would open a connection per call.
		tr := &http.Transport{MaxIdleConns: slots + 16, MaxIdleConnsPerHost: slots + 16, IdleConnTimeout: time.Minute}
		client := model.OpenAI(model.OpenAIConfig{BaseURL: srv.URL, APIKey: "fake-key", Model: "fake-model", Stream: cfg.Stream,
			HTTPClient: &http.Client{Transport: tr}, Retry: cfg.retryPolicy(), RateLimit: limiter})
		return &runModel{m: &countingModel{m: client}, counts: func() FaultCounts { return srv.Stats().FaultCounts },
			close: func() { srv.Close(); tr.CloseIdleConnections() }}, nil
	}
	off := &model.Offline{Seed: cfg.Seed, Latency: cfg.Latency}
	inj := newInjector(faults, cfg.Seed)
	var m model.ChatModel = off
	if faults.RateLimitRate > 0 || faults.ErrorRate > 0 {
		m = model.WithRetry(model.WithRateLimit(&faultyOffline{m: off, j: inj}, limiter), cfg.retryPolicy())
	} else {
		m = model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
			inj.attempts.Add(1)
			return off.Chat(ctx, req)
		})
	}
	return &runModel{m: &countingModel{m: m}, counts: inj.counts, close: func() {}}, nil
}

// Run runs one experiment.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	slots := cfg.MaxConcurrentKeys * cfg.Parallelism
	if cfg.Blocking {
		slots = cfg.Parallelism
	}
	rm, err := newRunModel(cfg, slots)
	if err != nil {
		return Result{}, err
	}
	defer rm.close()
	cm := rm.m
	apn := cfg.ActionsPerInput()
	actions := int64(cfg.Inputs) * apn
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: cfg.WatermarkInterval})
	keys := Keys(cfg.Keys)
	src := weir.Generate(env, "inputs", int64(cfg.Inputs), func(i int64) weir.Record[Input] { return InputAt(keys, i) },
		watermark.ForMonotonous[Input]())
	st := &sinkState{t0: time.Now(), called: make([]atomic.Int64, actions), lag: make([]int64, actions), outputs: make([]int32, actions)}
	took := make([]atomic.Int64, actions)
	act := treeAction(cfg, st.called, took, st.t0)
	a := &agent.Agent{Models: map[string]model.ChatModel{"model": cm},
		Actions: []agent.Action{agent.NewAction("answer", act, agent.TypeInput)}}
	if cfg.TreeDepth > 0 {
		a.Actions = append(a.Actions, agent.NewAction("child", act, childEvent))
	}
	opts := agent.Options{MaxConcurrentKeys: cfg.MaxConcurrentKeys, Store: cfg.Store, TracerProvider: cfg.TracerProvider}
	if cfg.Blocking {
		benchhook.SetBlocking(&opts)
	}
	out := agent.Apply[string, Input, string](weir.KeyBy(src, func(in Input) string { return in.Key }), "agent", a, opts).Parallelism(cfg.Parallelism)
	st.total = actions
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
	start, c0 := time.Now(), int64(cputime.Process())
	err = env.Execute(ctx)
	elapsed, cpu := time.Since(start), int64(cputime.Process())-c0
	close(stop)
	wg.Wait()
	if err != nil {
		return Result{}, err
	}
	r := Result{Mode: "async", Inputs: int64(cfg.Inputs), Keys: cfg.Keys, MaxConcurrentKeys: cfg.MaxConcurrentKeys,
		Parallelism: cfg.Parallelism, LatencyDist: cfg.Latency.Dist,
		Seconds: elapsed.Seconds(), WatermarkViolations: st.violations.Load(), Watermarks: st.watermarks.Load(),
		HeldWatermarksMax: heldMax.Load(), MaxInFlightCalls: cm.max.Load(), ActionsRun: env.Metrics().Sum("agent", "actionsRun"),
		Model: cfg.Model, Stream: cfg.Stream && cfg.Model == "http", ActionsPerInput: apn, Actions: actions, Faults: cfg.Faults,
		Injected: rm.counts(), ModelRetries: env.Metrics().Sum("agent", agent.MetricModelRetries),
		RateLimitedRetries: env.Metrics().Sum("agent", agent.MetricModelRateLimited)}
	for _, n := range st.outputs {
		switch {
		case n == 0:
			r.Missing++
		case n > 1:
			r.Duplicates += int64(n - 1)
		}
	}
	if r.Missing > 0 || r.Duplicates > 0 || st.malformed > 0 || st.n.Load() != actions {
		return r, fmt.Errorf("agentbench: %d outputs for %d actions (%d missing, %d duplicates, %d malformed)",
			st.n.Load(), actions, r.Missing, r.Duplicates, st.malformed)
	}
	mean := meanLatency(cfg.Latency)
	r.MeanLatencyMs = float64(mean) / 1e6
	if cfg.Blocking {
		r.Mode = "blocking"
	}
	if r.LatencyDist == "" {
		r.LatencyDist = "fixed"
	}
	if r.Model == "" {
		r.Model = "offline"
	}
	if cputime.Supported {
		r.CPUMicrosPerInput = float64(cpu) / 1e3 / float64(cfg.Inputs)
		r.ProcessCPUMicrosPerAction = float64(cpu) / 1e3 / float64(actions)
	}
	r.CallToOutputMeanMicros, r.CallToOutputP99Micros = lagStats(st.lag)
	r.ActionP50Ms, r.ActionP99Ms = percentilesMs(took)
	r.OverallPerSec = float64(actions) / elapsed.Seconds()
	r.ThroughputPerSec = r.OverallPerSec
	if st.t90.After(st.t10) && actions >= 100 {
		r.ThroughputPerSec = float64(actions*8/10) / st.t90.Sub(st.t10).Seconds()
	}
	expected := mean
	if cfg.Faults.RateLimitRate > 0 || cfg.Faults.ErrorRate > 0 {
		f := cfg.Faults
		f.MaxInARow = retryAttempts - 1
		expected = ExpectedActionTime(mean, f, cfg.retryPolicy())
	}
	r.ExpectedActionMs = float64(expected) / 1e6
	if expected > 0 {
		r.IdealPerSec = float64(slots) / expected.Seconds()
		r.Efficiency = r.ThroughputPerSec / r.IdealPerSec
	}
	return r, nil
}
