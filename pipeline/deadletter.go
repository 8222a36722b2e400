package pipeline

import (
	"fmt"
	"math"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/runtime"
)

// Dead letters of steps (P7). A filter or map expression that fails on a
// record (a field of the wrong type, a missing field the expression needs,
// an integer division by zero, a result JSON cannot hold), an agent's
// prompt template that does not render for it, or, with continueOnError,
// an agent action that fails on it (agentFailedOp), does not fail the job:
// the record becomes a dead letter of the step,
//
//	{"step": OPERATOR, "at": FILE:LINE:COL, "reason": "...", "value": RECORD}
//
// sent with the record's timestamp to the step's deadLetters output, by
// default the source's deadLetters output. With neither, it is dropped.
// Either way the step's counter deadLetters counts it (and
// deadLettersDropped when dropped), and the first reasons of each subtask
// are logged and kept as notes for the dashboard.

// failsPerRecord reports whether a step of this kind can fail on one
// record (and so takes a deadLetters output).
func failsPerRecord(kind string) bool {
	return kind == "filter" || kind == "map" || kind == "agent"
}

// DeadLettersOf returns the output receiving the dead letters of step st
// of the steps of output in ("" for the main steps): the step's own
// deadLetters, else the source's deadLetters (except inside that output's
// own steps, which would feed themselves), else "" (dropped).
func DeadLettersOf(s *Spec, in string, st *StepSpec) string {
	if !failsPerRecord(st.Kind) {
		return ""
	}
	if st.DeadLetters != "" {
		return st.DeadLetters
	}
	if d := s.Source.DeadLetters; d != "" && d != in {
		return d
	}
	return ""
}

// feeders returns, for every output, the outputs whose steps or Kafka
// sink feed it ("" for the source and the main steps), once per feeding
// reference.
func feeders(s *Spec) map[string][]string {
	out := stepFeeders(s)
	rejectingSinkFeeds(s, func(to, from string) {
		if to != "" && to != from {
			out[to] = append(out[to], from)
		}
	})
	return out
}

// stepFeeders is feeders without the dead letters sinks send to the
// source's deadLetters (rejectingSinkFeeds).
func stepFeeders(s *Spec) map[string][]string {
	out := map[string][]string{}
	add := func(to, from string) {
		if to != "" && to != from { // an output feeding itself: check reports it
			out[to] = append(out[to], from)
		}
	}
	add(s.Source.DeadLetters, "")
	add(sinkOutput(s.Sink), "")
	steps := func(from string, sts []StepSpec) {
		for i := range sts {
			st := &sts[i]
			add(st.Tee, from)
			if st.Sort != nil {
				add(st.Sort.Violations, from)
			}
			if st.Window != nil {
				add(st.Window.Late, from)
			}
			add(DeadLettersOf(s, from, st), from)
		}
	}
	steps("", s.Steps)
	for _, name := range sortedKeys(s.Outputs) {
		steps(name, s.Outputs[name].Steps)
		add(sinkOutput(s.Outputs[name].Sink), name)
	}
	return out
}

// outputOrder returns the order in which outputs can be built: an output
// once every output feeding it is built. stuck are the outputs fed (also)
// through a cycle of outputs, which can never be built.
func outputOrder(s *Spec) (order, stuck []string) {
	feed := feeders(s)
	built := map[string]bool{"": true}
	for progress := true; progress; {
		progress = false
		for _, name := range sortedKeys(feed) {
			if built[name] || s.Outputs[name] == nil {
				continue
			}
			ready := true
			for _, f := range feed[name] {
				ready = ready && built[f]
			}
			if ready {
				built[name], progress = true, true
				order = append(order, name)
			}
		}
	}
	for _, name := range sortedKeys(feed) {
		if !built[name] && s.Outputs[name] != nil {
			stuck = append(stuck, name)
		}
	}
	return order, stuck
}

// maxLoggedDeadLetters is how many dead letters of a step subtask are
// logged (and noted); later ones are counted only, with a note every
// noteEveryDeadLetters.
const (
	maxLoggedDeadLetters = 5
	noteEveryDeadLetters = 1000
)

// stepDeadLetters sends the records a step subtask fails on to its
// dead-letter output (or drops them), counts them and logs the first
// reasons. It is used on the failure path only: the good path of a step
// touches none of it.
type stepDeadLetters struct {
	step    string // the operator's name
	at      string // the step's position
	ctx     *runtime.Context
	out     runtime.Output[Record] // nil: dropped
	count   *runtime.Counter
	dropped *runtime.Counter
	n       int64
}

// open prepares the output of tag (nil: none, the letters are dropped).
func (d *stepDeadLetters) open(ctx *runtime.Context, tag *runtime.OutputTag[Record], at string) {
	d.ctx, d.step, d.at = ctx, ctx.Name, at
	if tag != nil {
		d.out = runtime.SideOutput(ctx, tag)
	}
	d.count = ctx.Counter("deadLetters")
	d.dropped = ctx.Counter("deadLettersDropped")
}

// fail makes r a dead letter with reason (which names the step's kind and
// position and what went wrong).
func (d *stepDeadLetters) fail(r runtime.Record[Record], reason string) {
	d.letter(Record{"step": d.step, "at": d.at, "reason": reason, "value": r.Value}, r.Timestamp, reason)
}

// letter counts, logs and sends (or drops) the dead letter rec, with
// timestamp ts, of a record the step failed on for reason.
func (d *stepDeadLetters) letter(rec Record, ts int64, reason string) {
	d.count.Inc()
	d.n++
	if d.out == nil {
		d.dropped.Inc()
	}
	if d.n <= maxLoggedDeadLetters {
		where := "dropped: the step has no deadLetters output"
		if d.out != nil {
			where = "sent to the dead-letter output"
		}
		d.ctx.Logger.Warn("pipeline: dead letter: "+reason, "dropped", d.out == nil)
		if d.n == maxLoggedDeadLetters {
			d.ctx.Logger.Warn("pipeline: further dead letters of this step are counted (weir_dead_letters) and not logged")
		}
		d.ctx.Note(runtime.NoteKindDeadLetter, reason+" ("+where+")")
	} else if d.n%noteEveryDeadLetters == 0 {
		d.ctx.Note(runtime.NoteKindDeadLetter, fmt.Sprintf("%s (%d dead letters so far)", reason, d.n))
	}
	if d.out != nil {
		d.out.Collect(runtime.Record[Record]{Value: rec, Timestamp: ts})
	}
}

// agentFailedOp turns the inputs an agent step's actions failed on
// (agent.Options.FailedInputs, with continueOnError) into dead letters of
// the step: its input is the agent's side output of failed inputs, its
// output (when the step has a dead-letter output) the dead letters
//
//	{"step", "at", "reason", "value": INPUT, "action", "key", "input": SEQ, "runId"}
//
// so that an input whose model call failed is never lost without a trace.
type agentFailedOp struct {
	runtime.Base[Record]
	step, at string
	routed   bool // false: the step has no dead-letter output
	dead     stepDeadLetters
}

func (o *agentFailedOp) Open(ctx *runtime.Context, out runtime.Output[Record]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	o.dead.open(ctx, nil, o.at)
	o.dead.step = o.step
	if o.routed {
		o.dead.out = out
	}
	return nil
}

func (o *agentFailedOp) ProcessRecord(r runtime.Record[agent.FailedInput]) error {
	f := r.Value
	reason := fmt.Sprintf("agent at %s: %s", o.at, f.Reason())
	o.dead.letter(Record{"step": o.step, "at": o.at, "reason": reason, "value": f.Input,
		"action": f.Action, "key": f.Key, "input": float64(f.Seq), "runId": f.RunID}, r.Timestamp, reason)
	return nil
}

// jsonable reports whether JSON can hold v: every float in it is finite
// (sinks write records as JSON, which has no NaN or infinity). It
// allocates nothing.
func jsonable(v any) bool {
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
	case []any:
		for _, e := range x {
			if !jsonable(e) {
				return false
			}
		}
	case map[string]any:
		for _, e := range x {
			if !jsonable(e) {
				return false
			}
		}
	}
	return true
}

// sinkOutput is the output the records sink s cannot write feed ("": none).
func sinkOutput(s *SinkSpec) string {
	to, _, _ := sinkDeadLetters(s)
	return to
}
