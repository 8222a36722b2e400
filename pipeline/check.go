package pipeline

import (
	"errors"
	"fmt"
	"text/template"

	"github.com/weirproject/weir/agent"
)

// check runs the checks that need the whole spec: expressions compile,
// templates parse, keyed steps follow a keyBy, named outputs are declared
// and used once, Kafka parts have a cluster, and topics of an in-memory
// embedded broker exist.
func (d *dec) check(s *Spec) {
	d.checkFormats(s)
	compile := func(p Pos, what, src string, kind exprKind) {
		if _, err := compileExpr(src, kind); err != nil {
			line, col := exprErrorColumn(err)
			q := p
			if line > 1 {
				q.Line += line - 1
				q.Col = col
			} else if col > 0 {
				q.Col += col - 1
			}
			want := "an expression (expr-lang syntax, https://expr-lang.org)"
			if kind == exprBool {
				want = "an expression returning a bool, such as kind == \"order\" && qty > 0"
			}
			d.errAt(q, "%s: bad expression: %s; want %s", what, exprMessage(err), want)
		}
	}
	// outputs: how each output is fed, "dead" (dead letters, which any
	// number of steps and the source may share) or "step".
	outputs := map[string]string{}
	feed := func(name string, p Pos, what, how string) {
		if name == "" {
			return
		}
		o := s.Outputs[name]
		if o == nil {
			d.errAt(p, "%s: unknown output %q; declare it under outputs (declared: %s)", what, name, listOrNone(sortedKeys(s.Outputs)))
			return
		}
		if prev := outputs[name]; prev != "" && (prev != "dead" || how != "dead") {
			d.errAt(p, "%s: output %q is already fed by another step; give each its own output (only dead letters may share one)", what, name)
			return
		}
		outputs[name] = how
		o.used = true
	}
	use := func(name string, p Pos, what string) { feed(name, p, what, "step") }
	needKafka := func(p Pos, what string) {
		if s.Kafka == nil {
			d.errAt(p, "%s needs the Kafka cluster: add a top-level kafka section with brokers or embedded", what)
		}
	}
	// Topics an in-memory embedded broker will have: only those declared.
	var known map[string]bool
	if s.Kafka != nil && s.Kafka.Embedded != nil && s.Kafka.Embedded.Dir == "" {
		known = map[string]bool{}
		for t := range s.Kafka.Embedded.Topics {
			known[t] = true
		}
	}
	topic := func(name string, p Pos, what string) {
		if known != nil && !known[name] {
			d.errAt(p, "%s: unknown topic %q: the in-memory embedded broker has only the topics under kafka.embedded.topics (%s)",
				what, name, listOrNone(sortedKeys(known)))
		}
	}

	src := &s.Source
	if src.Kafka != nil {
		needKafka(src.Kafka.Pos, "source.kafka")
		for i, t := range src.Kafka.Topics {
			topic(t, src.Kafka.TopicPos[i], "source.kafka.topics")
		}
	}
	if g := src.Generate; g != nil {
		for _, name := range sortedKeys(g.Fields) {
			compile(g.FieldPos[name], "source.generate.fields."+name, g.Fields[name], exprAny)
		}
	}
	feed(src.DeadLetters, src.DeadLettersPos, "source.deadLetters", "dead")

	checkSteps := func(steps []StepSpec, prefix string) {
		keyed := false
		var keyPos Pos
		for i, st := range steps {
			what := fmt.Sprintf("%s[%d].%s", prefix, i, st.Kind)
			needsKey := st.Kind == "sort" || st.Kind == "window" || st.Kind == "agent"
			if needsKey && !keyed {
				d.errAt(st.Pos, "%s: needs a keyBy step right before it (sort, window and agent work per key)", what)
			}
			if keyed && !needsKey {
				d.errAt(keyPos, "%s[%d].keyBy: must be followed by sort, window or agent (got %s)", prefix, i-1, st.Kind)
			}
			keyed = st.Kind == "keyBy"
			keyPos = st.Pos
			if st.DeadLetters != "" {
				if prefix != "steps" && "outputs."+st.DeadLetters+".steps" == prefix {
					d.errAt(st.DeadLettersPos, "%s.deadLetters: output %q would feed itself; name another output", what, st.DeadLetters)
				} else {
					feed(st.DeadLetters, st.DeadLettersPos, what+".deadLetters", "dead")
				}
			}
			switch st.Kind {
			case "filter":
				compile(st.FilterPos, what, st.Filter, exprBool)
			case "map":
				for _, f := range sortedKeys(st.Map.Set) {
					compile(st.Map.SetPos[f], what+".set."+f, st.Map.Set[f], exprAny)
				}
			case "tee":
				use(st.Tee, st.Pos, what)
			case "sort":
				for j, e := range st.Sort.Tiebreak {
					compile(st.Sort.TiebreakPos[j], fmt.Sprintf("%s.tiebreak[%d]", what, j), e, exprAny)
				}
				use(st.Sort.Violations, st.Sort.ViolationsPos, what+".violations")
			case "window":
				use(st.Window.Late, st.Window.LatePos, what+".late")
			case "agent":
				if _, err := template.New("prompt").Option("missingkey=zero").Parse(st.Agent.Prompt); err != nil {
					d.errAt(st.Agent.PromptPos, "%s.prompt: bad template: %v; want a Go text/template such as 'Review order {{.id}}'", what, err)
				}
				if a := st.Agent; a.When != "" {
					if err := agent.CheckCondition(a.When); err != nil {
						q := a.WhenPos
						var ce *agent.ConditionError
						msg := err.Error()
						if errors.As(err, &ce) {
							msg = ce.Msg
							if ce.Line > 1 {
								q.Line += ce.Line - 1
								q.Col = ce.Column
							} else {
								q.Col += ce.Column - 1
							}
						}
						d.errAt(q, "%s.when: bad condition: %s; want a CEL condition over the record such as event.value.amount > 100 (fields under event.value)", what, msg)
					}
				}
				if st.Agent.Store != nil && st.Agent.Store.Topic != "" {
					needKafka(st.Agent.Store.Pos, what+".store.kafka")
				}
				if ap := st.Agent.Approvals; ap != nil {
					needKafka(ap.Pos, what+".approvals")
					topic(ap.Topic, ap.TopicPos, what+".approvals.topic")
					if ap.Requests != "" {
						topic(ap.Requests, ap.RequestsPos, what+".approvals.requests")
					}
				}
			}
		}
		if keyed {
			d.errAt(keyPos, "%s[%d].keyBy: must be followed by sort, window or agent (it is the last step)", prefix, len(steps)-1)
		}
	}
	checkSteps(s.Steps, "steps")
	for _, name := range sortedKeys(s.Outputs) {
		checkSteps(s.Outputs[name].Steps, "outputs."+name+".steps")
	}
	if s.Kafka != nil && s.Kafka.Embedded != nil {
		for i, p := range s.Kafka.Embedded.Produce {
			topic(p.Topic, p.TopicPos, fmt.Sprintf("kafka.embedded.produce[%d].topic", i))
		}
	}
	checkSinkDeadLetters(d, s, feed)
	sinks := map[string]*SinkSpec{"sink": s.Sink}
	for name, o := range s.Outputs {
		sinks["outputs."+name] = o.Sink
		if !o.used {
			d.errAt(o.Pos, "outputs.%s: not used; name it in source.deadLetters, a step's or a sink's deadLetters, a tee step, a sort's violations or a window's late, or remove it", name)
		}
	}
	for _, what := range sortedKeys(sinks) {
		if k := sinks[what].Kafka; k != nil {
			needKafka(sinks[what].Pos, what+".kafka")
			topic(k.Topic, k.TopicPos, what+".kafka.topic")
		}
	}
	if _, stuck := outputOrder(s); len(stuck) > 0 {
		for _, name := range stuck {
			d.errAt(s.Outputs[name].Pos, "outputs.%s: fed only through a cycle of outputs (a step of an output it feeds, directly or not, feeds it); break the cycle", name)
		}
	}
	j := s.Job
	if j.ApprovalsAddr != "" && len(approvalsOf(s)) == 0 {
		d.errAt(j.ApprovalsAddrPos, "job.approvals.httpAddr: no agent step has approvals; give one agent.approvals.topic (and a tool an approval), or drop job.approvals")
	}
	if j.MaxParallelism > 0 && j.Parallelism > j.MaxParallelism {
		d.errAt(j.Pos, "job: parallelism %d is above maxParallelism %d; want parallelism <= maxParallelism", j.Parallelism, j.MaxParallelism)
	}
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
