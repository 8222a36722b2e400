package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/kafkastore"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/ordering"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/window"
)

// steps builds the steps of output from ("" for the main steps) on in.
func (b *builder) steps(ctx context.Context, from string, steps []StepSpec, in weir.Stream[Record]) (weir.Stream[Record], error) {
	var err error
	for i := range steps {
		if in, err = b.step(ctx, from, steps, i, in); err != nil {
			return in, err
		}
	}
	return in, nil
}

func (b *builder) step(ctx context.Context, from string, steps []StepSpec, i int, in weir.Stream[Record]) (weir.Stream[Record], error) {
	st := &steps[i]
	at := st.Pos.String()
	switch st.Kind {
	case "tee":
		b.output(st.Tee, in)
		return in, nil
	case "filter":
		prog, err := compileExpr(st.Filter, exprBool)
		if err != nil {
			return in, fmt.Errorf("%s: %v", st.FilterPos, err)
		}
		name := b.opName(st.Name, "filter")
		tag, route := b.deadLetters(from, st, name)
		src := st.Filter
		out := weir.Transform(in, name, func() runtime.OneInputOperator[Record, Record] {
			return &filterOp{prog: prog, src: src, at: at, tag: tag}
		})
		route(out)
		return out, nil
	case "map":
		var fields []mapField
		for _, f := range sortedKeys(st.Map.Set) {
			prog, err := compileExpr(st.Map.Set[f], exprAny)
			if err != nil {
				return in, fmt.Errorf("%s: %v", st.Map.SetPos[f], err)
			}
			fields = append(fields, mapField{f, prog})
		}
		drop := st.Map.Drop
		name := b.opName(st.Name, "map")
		tag, route := b.deadLetters(from, st, name)
		out := weir.Transform(in, name, func() runtime.OneInputOperator[Record, Record] {
			return &mapOp{fields: fields, drop: drop, at: at, tag: tag}
		})
		route(out)
		return out, nil
	case "keyBy":
		return in, nil // the keyed step that follows keys the stream
	}
	// A keyed step: the step before it is its keyBy (checked by Parse).
	kp, _ := parseFieldPath(steps[i-1].KeyBy)
	return b.keyedStep(ctx, from, st, kp, weir.KeyBy(in, recordKey(kp)))
}

// recordKey is the key of a keyBy on the field path kp.
func recordKey(kp fieldPath) func(Record) string {
	return func(r Record) string { return keyString(kp.get(r)) }
}

// keyedStep adds a keyed step (sort, window, agent) on ks, the stream keyed
// by the field path kp.
func (b *builder) keyedStep(ctx context.Context, from string, st *StepSpec, kp fieldPath, ks weir.KeyedStream[string, Record]) (weir.Stream[Record], error) {
	in := ks.Stream
	at := st.Pos.String()
	switch st.Kind {
	case "sort":
		name := b.opName(st.Name, "sort")
		opts := ordering.SortOptions[Record]{}
		var tag *weir.OutputTag[Record]
		if st.Sort.Violations != "" {
			tag = weir.NewOutputTag[Record](st.Sort.Violations)
			opts.Violations = tag
		}
		if len(st.Sort.Tiebreak) > 0 {
			var progs []*progRef
			for j, e := range st.Sort.Tiebreak {
				p, err := compileExpr(e, exprAny)
				if err != nil {
					return in, fmt.Errorf("%s: %v", st.Sort.TiebreakPos[j], err)
				}
				progs = append(progs, &progRef{&vmProgram{prog: p}})
			}
			opts.Tiebreak = func(r Record) (int64, int64) {
				var t [2]int64
				for j, p := range progs {
					v, err := p.run(r)
					if err == nil {
						f, _ := number(v)
						t[j] = int64(f)
					}
				}
				return t[0], t[1]
			}
		}
		out := ordering.Sort(ks, name, opts).UID(name)
		if tag != nil {
			b.output(st.Sort.Violations, weir.SideOutput(out, tag))
		}
		return out, nil
	case "window":
		w := st.Window
		name := b.opName(st.Name, "window")
		var a window.Assigner
		switch w.Type {
		case "tumbling":
			a = window.TumblingWithOffset(w.Size, w.Offset)
		case "sliding":
			a = window.SlidingWithOffset(w.Size, w.Slide, w.Offset)
		case "session":
			a = window.Session(w.Gap)
		}
		var wopts []window.Option
		if w.AllowedLateness > 0 {
			wopts = append(wopts, window.AllowedLateness(w.AllowedLateness))
		}
		var tag *weir.OutputTag[Record]
		if w.Late != "" {
			tag = weir.NewOutputTag[Record](w.Late)
			wopts = append(wopts, window.LateOutput(tag))
		}
		keyField := kp.last()
		b.j.windows = append(b.j.windows, name)
		res := window.AggregateKeyed(ks, name, a, window.AggregateFunction[Record, *aggAcc, Record](newAggregator(w.Aggregates)), wopts...).UID(name)
		out := weir.Map(res, name+"-result", func(r window.Result[string, Record]) Record {
			rec := r.Value
			rec[keyField] = r.Key
			rec["windowStart"] = r.Window.Start
			rec["windowEnd"] = r.Window.End
			return rec
		})
		if tag != nil {
			b.output(w.Late, weir.SideOutput(res, tag))
		}
		return out, nil
	case "agent":
		name := b.opName(st.Name, "agent")
		b.j.agentOps = append(b.j.agentOps, name)
		ap, apClose, err := b.approvalRuntimeOf(name, st.Agent)
		if err != nil {
			return in, err
		}
		if apClose != nil {
			b.j.closers = append(b.j.closers, apClose)
		}
		a, tmpl, closers, err := buildAgent(ctx, st.Agent, ap)
		b.j.closers = append(b.j.closers, closers...)
		if err != nil {
			return in, err
		}
		// The prompt is rendered once before the keyBy: a record it does
		// not render for is a dead letter there, and never reaches the
		// agent (whose action renders it again, and then cannot fail).
		tag, route := b.deadLetters(from, st, name+"-prompt")
		checked := weir.Transform(in, name+"-prompt", func() runtime.OneInputOperator[Record, Record] {
			return &promptCheckOp{tmpl: tmpl, at: at, tag: tag}
		})
		route(checked)
		ks = weir.KeyBy(checked, ks.Key())
		o := agent.Options{MaxConcurrentKeys: st.Agent.MaxConcurrent, ActionTimeout: st.Agent.ActionTimeout, ContinueOnError: st.Agent.ContinueOnError,
			Budgets: agentBudgets(st.Agent), Pricing: st.Agent.Pricing}
		if l := st.Agent.EventLog; l != nil {
			w, closer, err := b.agentEventLog(l)
			if err != nil {
				return in, err
			}
			b.j.closers = append(b.j.closers, closer)
			o.Listeners = []agent.Listener{w}
		}
		if err := b.traceAgent(ctx, &o); err != nil {
			return in, err
		}
		if k := b.j.Spec.Source.Kafka; k != nil && k.Metadata != "" && o.TracerProvider != nil {
			o.TraceContextOf = traceContextIn(k.Metadata)
		}
		if s := st.Agent.Store; s != nil {
			if s.WALDir != "" {
				o.Store = wal.Factory(s.WALDir, wal.Options{NoSync: s.NoSync})
			} else {
				o.Store = kafkastore.Factory(kafkastore.Options{Brokers: b.j.Brokers, Security: b.j.Security, Topic: s.Topic})
			}
		}
		var failed *weir.OutputTag[agent.FailedInput]
		if o.ContinueOnError {
			// Every input an action fails on becomes a dead letter of the
			// step (or is dropped and counted): none is lost silently.
			failed = weir.NewOutputTag[agent.FailedInput](name + "-failed")
			o.FailedInputs = failed
		}
		var out weir.Stream[Record]
		if ap != nil {
			// The answers: a second input, keyed like the agent's by the
			// answer's key; stopped once the input and its waits have
			// ended, so that a bounded source ends the job.
			stop := make(chan struct{})
			var once sync.Once
			o.EndAnswers = func() { once.Do(func() { close(stop) }) }
			o.MaxAnswersPerKey = st.Agent.Approvals.MaxAnswersPerKey
			answersIn, err := b.answersStream(b.opName("", name+"-answers-source"), st.Agent.Approvals, stop)
			if err != nil {
				return in, err
			}
			out = agent.ApplyWithAnswers[string, Record, Record](ks, answersIn, func(a agent.Answer) string { return a.Key }, name, a, o).UID(name)
		} else {
			out = agent.Apply[string, Record, Record](ks, name, a, o).UID(name)
		}
		if failed != nil {
			b.agentDeadLetters(from, st, name, at, weir.SideOutput(out, failed))
		}
		return out, nil
	}
	return in, fmt.Errorf("%s: unknown step kind %q", st.Pos, st.Kind)
}

// progRef runs a compiled program from several goroutines (generator and
// sort tiebreak functions are shared by subtasks): each run takes a VM
// from a pool, so no VM is allocated per record once the pool is warm.
type progRef struct{ p *vmProgram }
