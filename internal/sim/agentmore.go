package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/tool"
)

// Several calls and actions per input (issue 29): a draw of its own, made
// after every other draw of Generate, so that every seed keeps its
// workload, its fault schedule and its agent script.
//
// Notify (half the agent seeds, agentNotifyStream): an input whose
// AgentInput.Notify is 1 or 2 makes more durable calls, in a second
// action: the action "decide" makes the model call and the "apply" tool
// call, then sends a "decided" event instead of its output; the action
// "notify", listening to it, makes Notify calls of the tool "notify"
// (each a side effect of its own in the external system, under its own
// idempotency key) and outputs the decision. So an input runs two
// actions (agent/doc.go G2: one after the other) and makes three or four
// calls; S11 holds per call, and a committed decision's every call took
// effect.

// agentNotifyStream is the constant of the stream the notify calls are
// drawn from.
const agentNotifyStream = 0xa6ea

// generateAgentMore draws the notify calls of s's agent branch (half the
// agent seeds).
func generateAgentMore(s *Spec) {
	a := s.Agent
	if a == nil {
		return
	}
	nrng := rand.New(rand.NewPCG(s.Seed, agentNotifyStream))
	if nrng.IntN(2) == 0 {
		for i := range a.Inputs {
			a.Inputs[i].Notify = nrng.IntN(3)
		}
	}
}

// moreShape describes the notify calls for Shape.
func (a *AgentSpec) moreShape() string {
	notify := 0
	for id, in := range a.Inputs {
		if a.takes(int64(id)) {
			notify += in.Notify
		}
	}
	if notify == 0 {
		return ""
	}
	return fmt.Sprintf(", %d notify calls in a second action", notify)
}

// notifyRef names input id's k-th notify call (1-based).
func notifyRef(id int64, k int) callRef { return callRef{id, fmt.Sprintf("notify%d", k)} }

// effectOf is the effect a decision line names: the apply call's, then
// each notify call's.
func effectOf(id int64, verdict string, notify int) string {
	s := fmt.Sprintf("applied-%d-%s", id, verdict)
	for k := 1; k <= notify; k++ {
		s += fmt.Sprintf("+notified-%d-%d", id, k)
	}
	return s
}

// eventDecided is the event type the action "decide" sends to the action
// "notify" with the decision.
const eventDecided = "decided"

type notifyArgs struct {
	ID   int64 `json:"id"`
	Step int   `json:"step"`
}

// notifyAction is the second action of attempt n's agent: for the
// decision ev carries, the input's notify calls, one after the other,
// then the decision as output, its effect naming every call's.
func notifyAction(w *agentWorld, n int, c *agent.RunnerContext, ev agent.Event) error {
	w.time.actionStarted()
	defer w.time.actionEnded()
	d, err := agent.ValueAs[decision](ev)
	if err != nil {
		return err
	}
	if d.ID < 0 || d.ID >= int64(len(w.spec.Inputs)) {
		return fmt.Errorf("sim-action: a decision for no input: %+v", d)
	}
	w.started(n, d.ID)
	for k := 1; k <= w.spec.Inputs[d.ID].Notify; k++ {
		args, err := json.Marshal(notifyArgs{ID: d.ID, Step: k})
		if err != nil {
			return err
		}
		res, err := c.CallTool("notify", args)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s", res.Content)
		}
		if err != nil {
			if isDeadline(c.Context()) {
				w.expire(d.ID)
				return fmt.Errorf("sim-action: timeout in the notify call %d: %w", k, err)
			}
			return fmt.Errorf("sim-action: the notify call %d failed: %w", k, err)
		}
		d.Effect += "+" + res.Content
	}
	c.Output(d)
	return nil
}

// notify is the tool "notify" of attempt n: a side effect of its own in
// the external system, recorded with its idempotency key.
func (t *simTool) notify(ctx context.Context, raw json.RawMessage) (tool.Result, error) {
	var args notifyArgs
	if err := json.Unmarshal(raw, &args); err != nil || args.ID < 0 || args.ID >= int64(len(t.w.spec.Inputs)) {
		return tool.Result{}, fmt.Errorf("sim-tool: bad arguments %s", raw)
	}
	key, _ := tool.IdempotencyKey(ctx)
	ref := notifyRef(args.ID, args.Step)
	if ctx.Err() != nil {
		t.w.request(t.attempt, ref, key, false, false)
		return tool.Result{}, ctx.Err()
	}
	if !t.w.request(t.attempt, ref, key, true, true) {
		return tool.Result{}, deadCall(ctx)
	}
	s, _ := json.Marshal("key=" + key)
	return tool.Result{Content: fmt.Sprintf("notified-%d-%d", args.ID, args.Step), Structured: s}, nil
}
