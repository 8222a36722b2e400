package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir/clock"
)

// EvalOptions configures an Evaluator. The zero value is usable.
type EvalOptions struct {
	// Listeners get the event log of every evaluated run (LogEntry), as
	// an operator's listeners do: action starts and ends, model and tool
	// calls and results, memory updates, outputs. Operator is "evaluate"
	// and Subtask 0.
	Listeners []Listener
	// Clock is the clock of the log's times and durations, which the
	// actions' contexts carry (clock.FromContext), as the operator's
	// carry the job's: model and tool clients wait on it between
	// retries; nil: the system clock.
	Clock clock.Clock
	// Logger receives what actions log through RunnerContext.Logger; nil:
	// slog's default.
	Logger *slog.Logger
}

// Evaluator runs an agent's actions over inputs in-process, one input at
// a time, on the caller's goroutine, without a job, a store or state: what
// package agent/replay uses to run a changed agent over recorded inputs.
//
// Per input it does what the operator does for one input (G2
// and G4): the actions listening to the input event (and meeting their
// conditions) run one after the other, breadth first; an action's memory
// writes and sent events take effect when it returns successfully; events
// sent by actions trigger further actions; output events are collected.
// Short-term memory is kept per key across the inputs evaluated (by the
// key as given), so inputs of one key should be evaluated in their order.
//
// It differs from the operator in what a job would add: no store (Chat and
// CallTool are plain calls, never replayed), no budgets, no tracing, no
// metrics, no Await (an action that waits fails), and memory TTLs are
// ignored (entries never expire). A failed action ends the input's
// evaluation with its error (as if ContinueOnError were off).
//
// Evaluate calls the agent's models and tools as the operator would: to
// keep tools from running, give the Evaluator an agent whose tools answer
// from elsewhere (package agent/replay wraps them).
//
// An Evaluator is not safe for concurrent use.
type Evaluator struct {
	def    *compiled
	opts   EvalOptions
	elog   *eventLog
	logger *slog.Logger
	clk    clock.Clock
	act    eventActivation
	memory map[string]map[string]json.RawMessage
}

// NewEvaluator compiles a (as Apply does: names, event types, conditions,
// tools) and returns an Evaluator of it.
func NewEvaluator(a *Agent, opts EvalOptions) (*Evaluator, error) {
	def, err := compile(a)
	if err != nil {
		return nil, err
	}
	e := &Evaluator{def: def, opts: opts, clk: opts.Clock, logger: opts.Logger, memory: map[string]map[string]json.RawMessage{}}
	if e.clk == nil {
		e.clk = clock.Real
	}
	if e.logger == nil {
		e.logger = slog.Default()
	}
	if len(opts.Listeners) > 0 {
		e.elog = &eventLog{listeners: opts.Listeners, operator: "evaluate", now: e.clk.Now}
	}
	return e, nil
}

// EvalResult is what evaluating one input gave.
type EvalResult struct {
	// Outputs are the values of the output events, in the order they
	// would have left the operator.
	Outputs []any
	// Actions is the number of action runs.
	Actions int
	// Err is the first failed action's error (the input's evaluation
	// stopped there; Outputs holds what earlier actions emitted) or a
	// condition's; nil when every action succeeded.
	Err error
}

// maxEvalActions bounds the action runs of one input: an agent whose
// actions keep sending events to each other would otherwise never end.
const maxEvalActions = 10000

// Evaluate runs the execution tree of one input of key (the key as the
// event log prints it) with sequence number seq and the input value v.
// ctx is every action's RunnerContext.Context. The returned error is ctx's
// when it is done; an action's failure is EvalResult.Err.
func (e *Evaluator) Evaluate(ctx context.Context, key string, seq int64, v any) (EvalResult, error) {
	var res EvalResult
	type task struct {
		ev     *Event
		action int
	}
	input := &Event{Type: TypeInput, Value: v, Parent: -1}
	var tasks []task
	var nextID int64 = 1
	add := func(ev *Event) error {
		for _, a := range e.def.byType[ev.Type] {
			if cond := e.def.conds[a]; cond != nil {
				ok, err := cond.match(&e.act, ev)
				if err != nil {
					return conditionFailed(e.def.actions[a], ev, err)
				}
				if !ok {
					continue
				}
			}
			tasks = append(tasks, task{ev: ev, action: a})
		}
		return nil
	}
	if err := add(input); err != nil {
		res.Err = err
		return res, nil
	}
	var sensory map[string]json.RawMessage
	// The actions' context carries the evaluator's clock, as the
	// operator's carries the job's: see RunnerContext.ctx.
	actx := clock.NewContext(ctx, e.clk)
	for i := 0; i < len(tasks); i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if res.Actions == maxEvalActions {
			res.Err = fmt.Errorf("agent: evaluating key %s input %d: more than %d action runs; the actions keep sending events", key, seq, maxEvalActions)
			return res, nil
		}
		t := tasks[i]
		rc := &RunnerContext{ctx: actx, host: e, key: key, seq: seq, ev: t.ev, action: e.def.actions[t.action], actionIdx: t.action,
			short:   Memory{name: "short-term", base: e.memory[key], short: true},
			sensory: Memory{name: "sensory", base: sensory},
			elog:    e.elog}
		res.Actions++
		if err := e.run(rc); err != nil {
			res.Err = fmt.Errorf("agent: action %q failed for key %s (input %d, event %d %q): %w", rc.action.Name, key, seq, rc.ev.ID, rc.ev.Type, err)
			return res, nil
		}
		if e.elog != nil {
			e.logApplied(rc)
		}
		updates := e.applyShort(key, rc.short.writes)
		sensory = applyWrites(sensory, rc.sensory.writes)
		for j := range rc.sent {
			ev := new(Event)
			*ev = rc.sent[j]
			ev.ID, ev.Parent, ev.Action = nextID, rc.ev.ID, rc.action.Name
			nextID++
			if ev.Type == TypeOutput {
				res.Outputs = append(res.Outputs, ev.Value)
				continue
			}
			if err := add(ev); err != nil {
				res.Err = err
				return res, nil
			}
		}
		for _, u := range updates {
			ev := &Event{Type: TypeMemoryUpdated, Value: u, ID: nextID, Parent: rc.ev.ID, Action: rc.action.Name}
			nextID++
			if err := add(ev); err != nil {
				res.Err = err
				return res, nil
			}
		}
	}
	return res, nil
}

// run runs one action, logging its start and end.
func (e *Evaluator) run(rc *RunnerContext) (err error) {
	if e.elog != nil {
		s := rc.entry(LogActionStart)
		s.Data = rc.ev
		e.elog.emit(s)
	}
	start := e.clk.Now()
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		err = rc.action.Run(rc, *rc.ev)
	}()
	if e.elog != nil {
		x := rc.entry(LogActionEnd)
		if err != nil {
			x.Kind, x.Error = LogActionError, err.Error()
		}
		x.DurationMicros = e.clk.Now().Sub(start).Microseconds()
		e.elog.emit(x)
	}
	return err
}

// logApplied logs the committed memory writes and the outputs of rc, as
// the operator's logApplied does.
func (e *Evaluator) logApplied(rc *RunnerContext) {
	if len(rc.short.writes) > 0 {
		x := rc.entry(LogMemory)
		w := maps.Clone(rc.short.writes)
		maps.DeleteFunc(w, func(k string, _ json.RawMessage) bool { return strings.HasPrefix(k, ttlPrefix) })
		x.Name, x.Data = "short-term", w
		e.elog.emit(x)
	}
	for i := range rc.sent {
		if rc.sent[i].Type == TypeOutput {
			x := rc.entry(LogOutput)
			x.Data = rc.sent[i].Value
			e.elog.emit(x)
		}
	}
}

// applyShort commits writes to key's short-term memory (TTL writes are
// dropped: the evaluator keeps no timers) and returns the updates the
// actions listening to TypeMemoryUpdated get.
func (e *Evaluator) applyShort(key string, writes map[string]json.RawMessage) []MemoryUpdate {
	if len(writes) == 0 {
		return nil
	}
	listen := len(e.def.byType[TypeMemoryUpdated]) > 0
	mem := e.memory[key]
	var updates []MemoryUpdate
	for _, name := range slices.Sorted(maps.Keys(writes)) {
		if strings.HasPrefix(name, ttlPrefix) {
			continue
		}
		v := writes[name]
		old, had := mem[name]
		if v == nil {
			delete(mem, name)
		} else {
			if mem == nil {
				mem = map[string]json.RawMessage{}
			}
			mem[name] = v
		}
		if listen && (had || v != nil) && !(had && v != nil && bytes.Equal(old, v)) {
			u := MemoryUpdate{Key: key, Name: name, New: v}
			if had {
				u.Old = old
			}
			updates = append(updates, u)
		}
	}
	e.memory[key] = mem
	return updates
}

// The Evaluator is its runs' host: no store, budgets, metrics or tracing.
func (e *Evaluator) agentDef() *compiled               { return e.def }
func (e *Evaluator) encodeKey(key any) ([]byte, error) { return []byte(fmt.Sprint(key)), nil }
func (e *Evaluator) log() *slog.Logger                 { return e.logger }
func (e *Evaluator) nonDurableCalls() bool             { return true }
func (e *Evaluator) callStat(string) *callStat         { return nil }
func (e *Evaluator) modelUsage(string) *modelUsage     { return nil }
func (e *Evaluator) now() time.Time                    { return e.clk.Now() }
func (e *Evaluator) budgetLedger() *budgets            { return nil }

// CanonicalJSON returns v's canonical JSON (what the durable calls'
// argument digests are made of: object keys sorted, numbers as written,
// strings re-encoded), so that two values that are the same JSON compare
// equal as bytes.
func CanonicalJSON(v any) ([]byte, error) { return canonicalJSON(v) }
