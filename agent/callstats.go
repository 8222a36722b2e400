package agent

import (
	"time"

	"github.com/weirproject/weir/runtime"
)

// Metric names of the agent operator's call and latency counters (I9).
const (
	// MetricModelCalls and MetricModelCallErrors count the model calls
	// made through RunnerContext.Chat, and those that returned an error,
	// labelled model (the name in Agent.Models). Calls answered from the
	// action-state store after a restore are not counted.
	MetricModelCalls      = "modelCalls"
	MetricModelCallErrors = "modelCallErrors"
	// MetricToolCalls and MetricToolCallErrors count the tool calls made
	// through RunnerContext.CallTool, and those that returned an error or
	// an IsError result, labelled tool.
	MetricToolCalls      = "toolCalls"
	MetricToolCallErrors = "toolCallErrors"
	// MetricActionMicros adds up the time action runs took, in
	// microseconds of the job's clock, and MetricActionsTimed counts the
	// runs it covers (runs replayed from the store are not timed): their
	// ratio over an interval is the mean action latency.
	MetricActionMicros = "actionMicros"
	MetricActionsTimed = "actionsTimed"
	// MetricActionLatency is a histogram of the time action runs took
	// (runs replayed from the store are not timed), in seconds of the
	// job's clock, labelled action.
	MetricActionLatency = "actionLatencySeconds"
	// MetricModelLatency and MetricToolLatency are histograms of the time
	// the calls counted in MetricModelCalls and MetricToolCalls took, in
	// seconds, labelled model and tool; a model call's time includes the
	// client's retries and its waits in a rate limiter.
	MetricModelLatency = "modelCallLatencySeconds"
	MetricToolLatency  = "toolCallLatencySeconds"
	// MetricModelRetries counts the retries the model clients made inside
	// those calls (model.RetryObserver), labelled model; MetricModelRateLimited
	// counts the ones that waited out a 429 through a model.Limiter.
	MetricModelRetries     = "modelRetries"
	MetricModelRateLimited = "modelRateLimitedRetries"
)

// latencyBounds are the buckets of the latency histograms, in
// microseconds: 100µs to one minute, for calls from a local model to a
// slow one with retries.
var latencyBounds = []int64{100, 1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
	1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000}

func latencyHistogram(ctx *runtime.Context, name string, l runtime.Label) *runtime.Histogram {
	return ctx.LabeledHistogram(name, 1e-6, latencyBounds, l)
}

// callStat counts the calls to one model or tool. Its counters are created
// when the operator opens, for every model and tool the agent has, so
// counting takes no lock and no lookup in a shared map that grows.
type callStat struct {
	calls, errors *runtime.Counter
	latency       *runtime.Histogram // tools only; a model's is in modelUsage
}

// record counts one call, whether it failed, and (for a tool) how long it
// took. A nil stat (an unknown name) counts nothing.
func (s *callStat) record(failed bool, took time.Duration) {
	if s == nil {
		return
	}
	s.calls.Inc()
	if failed {
		s.errors.Inc()
	}
	if s.latency != nil {
		s.latency.Observe(took.Microseconds())
	}
}

// callStats are an operator subtask's call counters, by call name prefix
// and model or tool name; read-only once built.
type callStats map[string]*callStat

func newCallStats(ctx *runtime.Context, def *compiled) callStats {
	s := callStats{}
	for _, name := range def.modelNames() {
		l := runtime.Label{Name: "model", Value: name}
		s[chatCallPrefix+name] = &callStat{calls: ctx.LabeledCounter(MetricModelCalls, l), errors: ctx.LabeledCounter(MetricModelCallErrors, l)}
	}
	if def.tools != nil {
		for _, name := range def.tools.Names() {
			l := runtime.Label{Name: "tool", Value: name}
			s[toolCallPrefix+name] = &callStat{ctx.LabeledCounter(MetricToolCalls, l), ctx.LabeledCounter(MetricToolCallErrors, l),
				latencyHistogram(ctx, MetricToolLatency, l)}
		}
	}
	return s
}

// actionTimer times action runs into MetricActionMicros,
// MetricActionsTimed and the histogram of each action (by its index in
// the agent).
type actionTimer struct {
	now          func() time.Time
	micros, runs *runtime.Counter
	hists        []*runtime.Histogram
}

func newActionTimer(ctx *runtime.Context, def *compiled, now func() time.Time) actionTimer {
	t := actionTimer{now: now, micros: ctx.Counter(MetricActionMicros), runs: ctx.Counter(MetricActionsTimed)}
	for _, a := range def.actions {
		t.hists = append(t.hists, latencyHistogram(ctx, MetricActionLatency, runtime.Label{Name: "action", Value: a.Name}))
	}
	return t
}

func (t actionTimer) since(action int, start time.Time) time.Duration {
	d := t.now().Sub(start)
	us := d.Microseconds()
	t.micros.Add(us)
	t.runs.Inc()
	t.hists[action].Observe(us)
	return d
}
