package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/weirtest"
)

// splitAgentLines separates the agent branch's committed lines (decisions
// "A ...", dead letters "D ...") from the others.
func splitAgentLines(lines []string) (others, agentLines []string) {
	for _, l := range lines {
		if strings.HasPrefix(l, "A ") || strings.HasPrefix(l, "D ") {
			agentLines = append(agentLines, l)
		} else {
			others = append(others, l)
		}
	}
	return others, agentLines
}

// allowedAgentLines returns, per input of the workload, the committed
// lines S10 allows for it: exactly one of them must be there. The decision
// line follows from the script alone; a time-out dead letter is allowed
// for a hung or late model call, and for any input whose action saw its
// deadline pass (expired: a time-out the load caused, seen by the action
// and recorded by the world).
func allowedAgentLines(spec *Spec, expired map[int64]bool) map[int64][]string {
	allowed := map[int64][]string{}
	for _, st := range spec.Steps {
		if st.Kind != StepRecord || !spec.Agent.takes(st.ID) {
			continue
		}
		in := spec.Agent.Inputs[st.ID]
		dec := decisionLine(st.Key, st.ID, in.Verdict, in.Prompt+in.Completion, effectOf(st.ID, in.Verdict, in.Notify))
		var a []string
		switch in.Fault {
		case AgentOK:
			a = []string{dec}
		case AgentPermanent:
			a = []string{deadLetterLine(st.Key, st.ID, reasonPermanent)}
		case AgentToolRejected:
			a = []string{deadLetterLine(st.Key, st.ID, reasonRejected)}
		case AgentHang:
			a = []string{deadLetterLine(st.Key, st.ID, reasonTimeout)}
		case AgentLate:
			a = []string{dec, deadLetterLine(st.Key, st.ID, reasonTimeout)}
		}
		if expired[st.ID] && !slices.Contains(a, deadLetterLine(st.Key, st.ID, reasonTimeout)) {
			a = append(a, deadLetterLine(st.Key, st.ID, reasonTimeout))
		}
		allowed[st.ID] = a
	}
	return allowed
}

// checkAgentOutput checks S10 on the agent branch's committed lines: every
// input ends exactly once, as its decision or as a dead letter naming the
// reason; and, with S11, that every committed decision's side effect took
// place in the external system, and no dead letter's of a call refused.
func checkAgentOutput(spec *Spec, w *agentWorld, lines []string) *Failure {
	allowed := allowedAgentLines(spec, w.expiredInputs())
	w.allowAwaits(spec, allowed)
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	for id := int64(0); id < int64(len(spec.Agent.Inputs)); id++ {
		if !spec.Agent.takes(id) {
			continue
		}
		var got []string
		for _, l := range allowed[id] {
			for range seen[l] {
				got = append(got, l)
			}
			delete(seen, l)
		}
		if len(got) != 1 {
			in := spec.Agent.Inputs[id]
			return &Failure{Invariant: InvAgentOnce,
				Detail:  fmt.Sprintf("input %d (fault %q, %d retries) ends %d times in the committed output; allowed once, one of %q", id, in.Fault, in.Retries, len(got), allowed[id]),
				Records: append(append(got, agentLinesOf(lines, id)...), w.traceOf(id)...)}
		}
	}
	if len(seen) > 0 {
		var extra []string
		for l := range seen {
			extra = append(extra, l)
		}
		slices.Sort(extra)
		return &Failure{Invariant: InvAgentOnce, Detail: fmt.Sprintf("%d committed agent lines are none an input allows", len(extra)), Records: extra[:min(4, len(extra))]}
	}
	effects := w.effects()
	for _, l := range lines {
		var key string
		var id int64
		if _, err := fmt.Sscanf(l, "A %s id=%d", &key, &id); err != nil || id < 0 || id >= int64(len(spec.Agent.Inputs)) {
			continue
		}
		calls := []callRef{{id, "tool"}}
		for k := 1; k <= spec.Agent.Inputs[id].Notify; k++ {
			calls = append(calls, notifyRef(id, k))
		}
		for _, c := range calls {
			if !effects[c] {
				return &Failure{Invariant: InvAgentEffects, Detail: fmt.Sprintf("input %d's decision is committed, but its %s call never took effect", id, c.call), Records: []string{l}}
			}
		}
	}
	return nil
}

// agentLinesOf returns the agent lines of input id (for a failure's
// records).
func agentLinesOf(lines []string, id int64) []string {
	var out []string
	tag := fmt.Sprintf(" id=%d ", id)
	for _, l := range lines {
		if strings.Contains(l+" ", tag) {
			out = append(out, "committed: "+l)
		}
	}
	return out
}

// arrivalWatermarks returns, per record id, the watermark the agent
// operator had received when the record reached it: the source's combined
// watermark (the minimum of its splits') at the record's position in the
// script, which a restored source re-establishes before its first record.
func arrivalWatermarks(spec *Spec) []int64 {
	splitWM := make([]int64, spec.Splits)
	for i := range splitWM {
		splitWM[i] = minWM
	}
	wm := int64(minWM)
	at := make([]int64, spec.Records)
	for _, st := range spec.Steps {
		switch st.Kind {
		case StepWatermark:
			splitWM[st.Split] = max(splitWM[st.Split], st.TS)
			wm = max(wm, slices.Min(splitWM))
		case StepRecord:
			at[st.ID] = wm
		}
	}
	return at
}

// checkAgentObserved checks S12 on what the observers right behind the
// agent operator received in one attempt (chained: one channel per
// subtask, for the main output and for the failed inputs): watermarks
// rise, and an output at or behind the last watermark forwarded is
// allowed only for an input that arrived after that watermark (it was
// late on arrival): the operator holds a watermark until every input that
// arrived before it has finished (agent/doc.go, G5).
func checkAgentObserved(spec *Spec, o agentObserved) *Failure {
	if spec.Agent == nil || o.out == nil {
		return nil
	}
	at := arrivalWatermarks(spec)
	if f := checkAgentChannel("output", o.out, at, func(d decision) (int64, string) {
		return d.ID, decisionLine(d.Key, d.ID, d.Verdict, d.Tokens, d.Effect)
	}); f != nil {
		return f
	}
	return checkAgentChannel("failed-inputs output", o.failed, at, func(f agent.FailedInput) (int64, string) {
		e, _ := f.Input.(event)
		return e.ID, fmt.Sprintf("failed input %s id=%d: %v", e.Key, e.ID, f.Err)
	})
}

func checkAgentChannel[T any](what string, obs *weirtest.Observation[T], at []int64, id func(T) (int64, string)) *Failure {
	for sub := range obs.Subtasks() {
		last, have := int64(minWM), false
		for i, e := range obs.Events(sub) {
			switch e.Kind {
			case weirtest.WatermarkEvent:
				if have && e.TS <= last {
					return &Failure{Invariant: InvAgentWatermark,
						Detail: fmt.Sprintf("agent subtask %d, %s, event %d: watermark %d after %d", sub, what, i, e.TS, last)}
				}
				last, have = e.TS, true
			case weirtest.RecordEvent:
				n, line := id(e.Value)
				if have && e.TS <= last && (n < 0 || n >= int64(len(at)) || at[n] < last) {
					return &Failure{Invariant: InvAgentWatermark,
						Detail: fmt.Sprintf("agent subtask %d, %s, event %d: the output of input %d at %d after watermark %d, which reached the operator after the input (the input arrived at watermark %d)",
							sub, what, i, n, e.TS, last, at[min(max(n, 0), int64(len(at))-1)]),
						Records: []string{line}}
				}
			}
		}
	}
	return nil
}
