// Package bench measures weir's capabilities against hand-written Go loops
// doing the same work in the same run. `weir bench --json` prints its
// results; bench_test.go exposes the same scenarios to `go test -bench`.
package bench

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// Result is one scenario measured against its baseline.
type Result struct {
	Name string `json:"name"`
	// Records processed by each side.
	Records int64 `json:"records"`
	// EnginePerSec and LoopPerSec are records per second.
	EnginePerSec float64 `json:"enginePerSec"`
	LoopPerSec   float64 `json:"loopPerSec"`
	// Ratio is loop throughput over engine throughput (2 means the engine
	// is half as fast as the loop).
	Ratio float64 `json:"ratio"`
	// OverheadNsPerRecordPerOp is (engine - loop) time per record divided
	// by the number of operators, where that is meaningful.
	OverheadNsPerRecordPerOp float64 `json:"overheadNsPerRecordPerOp,omitempty"`
	Parallelism              int     `json:"parallelism"`
	// EngineCPUNsPerRecord and LoopCPUNsPerRecord are each side's process
	// CPU per record (median run), where the scenario measures it.
	EngineCPUNsPerRecord float64 `json:"engineCpuNsPerRecord,omitempty"`
	LoopCPUNsPerRecord   float64 `json:"loopCpuNsPerRecord,omitempty"`
	// EngineBrokerCPUNsPerRecord and LoopBrokerCPUNsPerRecord are the
	// broker's CPU per record on each side (median run), where the
	// scenario runs the broker in a process of its own.
	EngineBrokerCPUNsPerRecord float64 `json:"engineBrokerCpuNsPerRecord,omitempty"`
	LoopBrokerCPUNsPerRecord   float64 `json:"loopBrokerCpuNsPerRecord,omitempty"`
	// PairedRatio is the median over rounds of the engine's time over the
	// loop's in the same round, where the scenario reports it: on a loaded
	// machine steadier than Ratio, whose two medians come from different
	// rounds.
	PairedRatio float64 `json:"pairedRatio,omitempty"`
	// SameCadenceLoopPerSec and SameCadenceRatio: a second loop, where the
	// scenario has one, that fires windows when the engine's watermark
	// would (every AutoWatermarkInterval of wall time) and so holds as many
	// windows as the engine, measured in the same rounds; Ratio is against
	// the loop that fires at once.
	SameCadenceLoopPerSec float64 `json:"sameCadenceLoopPerSec,omitempty"`
	SameCadenceRatio      float64 `json:"sameCadenceRatio,omitempty"`
}

// Event is the record type of the keyed scenarios.
type Event struct {
	Key string
	V   int64
}

// Keys returns n distinct keys.
func Keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "key-" + strconv.Itoa(i)
	}
	return ks
}

func eventAt(keys []string, i int64) Event {
	return Event{Key: keys[(i*7919)%int64(len(keys))], V: i & 1023}
}

// monotone is the strategy of every scenario: timestamps are the index.
func monotone[T any]() watermark.Strategy[T] { return watermark.ForMonotonous[T]() }

// countSink counts records per subtask into a shared total at the end.
type countSink[T any] struct {
	runtime.Base[struct{}]
	n     int64
	total *int64
	sum   *int64
	val   func(T) int64
	acc   int64
}

func (s *countSink[T]) ProcessRecord(r runtime.Record[T]) error {
	s.n++
	if s.val != nil {
		s.acc += s.val(r.Value)
	}
	return nil
}
func (s *countSink[T]) Close() error {
	atomicAdd(s.total, s.n)
	if s.sum != nil {
		atomicAdd(s.sum, s.acc)
	}
	return nil
}

func count[T any](s weir.Stream[T], total, sum *int64, val func(T) int64) {
	weir.Transform(s, "count", func() runtime.OneInputOperator[T, struct{}] {
		return &countSink[T]{total: total, sum: sum, val: val}
	})
}

// run runs env's job from a settled heap and returns its wall time.
func run(env *weir.Environment) (time.Duration, error) {
	settle()
	start := time.Now()
	err := env.Execute(context.Background())
	return time.Since(start), err
}

// runCPU is run that also returns the process CPU time the job took,
// counted from after the settling GC: the loops' CPU is taken after
// theirs, and a forced GC marks the whole live heap (the in-process
// broker's records: 4-8 ms for 1M of them), which is neither side's work.
func runCPU(env *weir.Environment) (time.Duration, time.Duration, error) {
	settle()
	c0 := cpuNanos()
	start := time.Now()
	err := env.Execute(context.Background())
	return time.Since(start), time.Duration(cpuNanos() - c0), err
}

// settle collects garbage before one side of a scenario is timed, so that
// neither side pays for the other's garbage (the engine's state and
// buffers are garbage once its job ends; a loop's maps once it returns).
func settle() { goruntime.GC() }

// Reps is how many times each side of a scenario runs, alternating engine
// and loop; a result takes the median time of each side. The machine the
// benchmarks run on is shared and noisy: one run of each side can be off
// by tens of percent either way.
var Reps = 5

// sides runs engine and loop Reps times each, alternating, every run from a
// settled heap, and returns the median time of each.
func sides(engine func() (time.Duration, error), loop func() (time.Duration, error)) (time.Duration, time.Duration, error) {
	ts, err := runSides(engine, loop)
	if err != nil {
		return 0, 0, err
	}
	return ts[0], ts[1], nil
}

// runSides runs each of fns Reps times, in turn (a round), each but the
// first of a round from a settled heap (the engine's garbage collected),
// and returns the median time of each.
func runSides(fns ...func() (time.Duration, error)) ([]time.Duration, error) {
	times := make([][]time.Duration, len(fns))
	for range max(Reps, 1) {
		for i, f := range fns {
			if i > 0 {
				settle()
			}
			d, err := f()
			if err != nil {
				return nil, err
			}
			times[i] = append(times[i], d)
		}
	}
	meds := make([]time.Duration, len(fns))
	for i, t := range times {
		meds[i] = median(t)
	}
	return meds, nil
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func result(name string, n int64, engine, loop time.Duration, ops, par int) Result {
	r := Result{Name: name, Records: n, Parallelism: par,
		EnginePerSec: float64(n) / engine.Seconds(),
		LoopPerSec:   float64(n) / loop.Seconds()}
	r.Ratio = r.LoopPerSec / r.EnginePerSec
	if ops > 0 {
		r.OverheadNsPerRecordPerOp = float64(engine-loop) / float64(n) / float64(ops)
	}
	return r
}

// Chain runs source -> map -> filter -> map -> count over n integers.
func Chain(n int64) (Result, error) {
	engine := func() (time.Duration, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.Generate(env, "numbers", n, func(i int64) weir.Record[int64] {
			return weir.Record[int64]{Value: i, Timestamp: i}
		}, monotone[int64]())
		m := weir.Map(src, "inc", func(v int64) int64 { return v + 1 })
		f := weir.Filter(m, "even", func(v int64) bool { return v&1 == 0 })
		d := weir.Map(f, "double", func(v int64) int64 { return v * 2 })
		var total, sum int64
		count(d, &total, &sum, func(v int64) int64 { return v })
		t, err := run(env)
		if err == nil && sum != chainSum(n) {
			return 0, fmt.Errorf("chain: engine sum %d, want %d", sum, chainSum(n))
		}
		return t, err
	}
	loop := func() (time.Duration, error) {
		t, sum := ChainLoop(n)
		if sum != chainSum(n) {
			return 0, fmt.Errorf("chain: loop sum %d, want %d", sum, chainSum(n))
		}
		return t, nil
	}
	e, l, err := sides(engine, loop)
	if err != nil {
		return Result{}, err
	}
	return result("map-filter-map chain", n, e, l, 3, 1), nil
}

// chainSum is what Chain sums over n integers: 2v for every even v in
// 1..n, that is 4(1 + ... + m) with m = n/2.
func chainSum(n int64) int64 {
	m := n / 2
	return 2 * m * (m + 1)
}

// ChainLoop is Chain as a plain loop.
func ChainLoop(n int64) (time.Duration, int64) {
	start := time.Now()
	var sum int64
	for i := range n {
		v := i + 1
		if v&1 == 0 {
			sum += v * 2
		}
	}
	return time.Since(start), sum
}

// countFn counts records per key in value state and emits the new count.
type countFn[T any] struct {
	cnt *state.ValueState[string, int64]
}

func (f *countFn[T]) Open(ctx *weir.KeyedContext[string, int64]) error {
	var err error
	f.cnt, err = state.Value[string, int64](ctx.State(), "count")
	return err
}

func (f *countFn[T]) ProcessElement(_ T, ctx *weir.KeyedContext[string, int64]) error {
	n, _ := f.cnt.Value()
	n++
	f.cnt.Update(n)
	ctx.Collect(n)
	return nil
}

func (f *countFn[T]) OnTimer(int64, *weir.KeyedContext[string, int64]) error { return nil }

// countPerKey adds the keyed count (countFn) over src and counts its
// outputs into total when the job ends.
func countPerKey(src weir.Stream[Event], total *int64) {
	countPerKeyOf(src, func(e Event) string { return e.Key }, total)
}

// countPerKeyOf is countPerKey for any record type, keyed by key.
func countPerKeyOf[T any](src weir.Stream[T], key func(T) string, total *int64) {
	counts := weir.Process(weir.KeyBy(src, key), "count",
		func() weir.KeyedProcessFunction[string, T, int64] { return &countFn[T]{} })
	count(counts, total, nil, nil)
}

// KeyedCount counts n events over nKeys keys drawn uniformly (KeysUniform)
// with value state, at the given parallelism (1: one goroutine; 2: the
// key-by crosses subtasks).
func KeyedCount(n int64, nKeys, par int) (Result, error) {
	return KeyedCountOrder(n, nKeys, par, KeysUniform)
}

// KeyedCountOrder is KeyedCount with the keys in order o (round-robin: the
// stride-7919 cycle of eventAt). Both sides read the same pre-generated
// key sequence.
func KeyedCountOrder(n int64, nKeys, par int, o KeyOrder) (Result, error) {
	keys := Keys(nKeys)
	seq := KeySequence(o, n, nKeys, 7919)
	var ecpu, lcpu []time.Duration
	engine := func() (time.Duration, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: par})
		src := weir.Generate(env, "events", n, func(i int64) weir.Record[Event] {
			return weir.Record[Event]{Value: Event{Key: keys[seq[i]], V: i & 1023}, Timestamp: i}
		}, monotone[Event]())
		var total int64
		countPerKey(src, &total)
		t, cpu, err := runCPU(env)
		ecpu = append(ecpu, cpu)
		if err == nil && total != n {
			return 0, fmt.Errorf("keyed count: %d outputs, want %d", total, n)
		}
		return t, err
	}
	loop := func() (time.Duration, error) {
		c0 := cpuNanos()
		t := KeyedCountLoop(keys, seq)
		lcpu = append(lcpu, time.Duration(cpuNanos()-c0))
		return t, nil
	}
	e, l, err := sides(engine, loop)
	if err != nil {
		return Result{}, err
	}
	name := "keyed count, value state"
	if par > 1 {
		name = fmt.Sprintf("key-by across %d subtasks, keyed count", par)
	}
	name += ", keys " + o.String()
	r := result(name, n, e, l, 0, par)
	r.EngineCPUNsPerRecord = float64(median(ecpu)) / float64(n)
	r.LoopCPUNsPerRecord = float64(median(lcpu)) / float64(n)
	return r, nil
}

// KeyedCountLoop is KeyedCount as a plain loop over a map: record i is
// the event of key keys[seq[i]], as the engine's generator makes it.
func KeyedCountLoop(keys []string, seq []int32) time.Duration {
	start := time.Now()
	m := make(map[string]int64)
	var sink int64
	for i, k := range seq {
		e := Event{Key: keys[k], V: int64(i) & 1023}
		c := m[e.Key] + 1
		m[e.Key] = c
		sink += c
	}
	_ = sink
	return time.Since(start)
}

// Scenario is one named measurement.
type Scenario struct {
	Name string
	Run  func(n int64, keys int) (Result, error)
}

// Scenarios lists what All runs; other packages (windows) add theirs.
var Scenarios = []Scenario{
	{"chain", func(n int64, _ int) (Result, error) { return Chain(n) }},
	// The keyed engine scenarios in each key order: the plain name draws
	// keys uniformly, -zipf from a Zipf distribution, -round-robin keeps
	// the fixed cycle of the benchmarks before issue 31.
	{"keyed-count", func(n int64, k int) (Result, error) { return KeyedCountOrder(n, k, 1, KeysUniform) }},
	{"keyed-count-zipf", func(n int64, k int) (Result, error) { return KeyedCountOrder(n, k, 1, KeysZipf) }},
	{"keyed-count-round-robin", func(n int64, k int) (Result, error) { return KeyedCountOrder(n, k, 1, KeysRoundRobin) }},
	{"key-by-2", func(n int64, k int) (Result, error) { return KeyedCount(n, k, 2) }},
	{"window-sum", func(n int64, k int) (Result, error) { return WindowSumOrder(n, k, KeysUniform, false) }},
	{"window-sum-zipf", func(n int64, k int) (Result, error) { return WindowSumOrder(n, k, KeysZipf, false) }},
	{"window-sum-round-robin", func(n int64, k int) (Result, error) { return WindowSumOrder(n, k, KeysRoundRobin, false) }},
	{"window-sum-periodic", func(n int64, k int) (Result, error) { return WindowSumOrder(n, k, KeysUniform, true) }},
	{"window-sum-periodic-zipf", func(n int64, k int) (Result, error) { return WindowSumOrder(n, k, KeysZipf, true) }},
	{"window-sum-periodic-round-robin", func(n int64, k int) (Result, error) { return WindowSumOrder(n, k, KeysRoundRobin, true) }},
	{"checkpoint-1s", func(n int64, k int) (Result, error) { return CheckpointThroughput(4*n, k, time.Second) }},
	// At most a million records: they are produced into the in-process
	// broker first.
	{"kafka-keyed-count", func(n int64, k int) (Result, error) { return KafkaKeyedCount(min(n, 1_000_000), k, 1, ShapePeers) }},
	{"kafka-keyed-count-2", func(n int64, k int) (Result, error) { return KafkaKeyedCount(min(n, 1_000_000), k, 2, ShapePeers) }},
	{"kafka-keyed-count-bare", func(n int64, k int) (Result, error) { return KafkaKeyedCount(min(n, 1_000_000), k, 1, ShapeBare) }},
	{"kafka-keyed-count-bare-2", func(n int64, k int) (Result, error) { return KafkaKeyedCount(min(n, 1_000_000), k, 2, ShapeBare) }},
	{"kafka-keyed-count-tls", func(n int64, k int) (Result, error) { return KafkaKeyedCountTLS(min(n, 1_000_000), k, 1) }},
}

// ScenarioAliases maps names that earlier versions listed to the scenario
// that now measures the same thing: window-sum-random was the window sum
// with uniformly drawn keys, which window-sum now is.
var ScenarioAliases = map[string]string{"window-sum-random": "window-sum"}

// ScenarioNames returns the names Run accepts: every scenario's and the
// aliases.
func ScenarioNames() []string {
	var out []string
	for _, s := range Scenarios {
		out = append(out, s.Name)
	}
	for a := range ScenarioAliases {
		out = append(out, a)
	}
	slices.Sort(out[len(Scenarios):])
	return out
}

// Run runs the named scenarios (Scenarios' names or ScenarioAliases), in
// the order given, with n records and k keys.
func Run(names []string, n int64, k int) ([]Result, error) {
	var out []Result
	for _, name := range names {
		if a, ok := ScenarioAliases[name]; ok {
			name = a
		}
		i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
		if i < 0 {
			return out, fmt.Errorf("no scenario %q: want one of %s", name, strings.Join(ScenarioNames(), ", "))
		}
		r, err := Scenarios[i].Run(n, k)
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// All runs every scenario with n records and k keys.
func All(n int64, k int) ([]Result, error) {
	var out []Result
	for _, s := range Scenarios {
		r, err := s.Run(n, k)
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}
