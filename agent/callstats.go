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
)

// callStat counts the calls to one model or tool. Its counters are created
// when the operator opens, for every model and tool the agent has, so
// counting takes no lock and no lookup in a shared map that grows.
type callStat struct {
	calls, errors *runtime.Counter
}

// record counts one call and whether it failed. A nil stat (an unknown
// name) counts nothing.
func (s *callStat) record(failed bool) {
	if s == nil {
		return
	}
	s.calls.Inc()
	if failed {
		s.errors.Inc()
	}
}

// callStats are an operator subtask's call counters, by call name prefix
// and model or tool name; read-only once built.
type callStats map[string]*callStat

func newCallStats(ctx *runtime.Context, def *compiled) callStats {
	s := callStats{}
	for _, name := range def.modelNames() {
		l := runtime.Label{Name: "model", Value: name}
		s[chatCallPrefix+name] = &callStat{ctx.LabeledCounter(MetricModelCalls, l), ctx.LabeledCounter(MetricModelCallErrors, l)}
	}
	if def.tools != nil {
		for _, name := range def.tools.Names() {
			l := runtime.Label{Name: "tool", Value: name}
			s[toolCallPrefix+name] = &callStat{ctx.LabeledCounter(MetricToolCalls, l), ctx.LabeledCounter(MetricToolCallErrors, l)}
		}
	}
	return s
}

// actionTimer times action runs into MetricActionMicros and
// MetricActionsTimed.
type actionTimer struct {
	now          func() time.Time
	micros, runs *runtime.Counter
}

func (t actionTimer) since(start time.Time) time.Duration {
	d := t.now().Sub(start)
	t.micros.Add(d.Microseconds())
	t.runs.Inc()
	return d
}
