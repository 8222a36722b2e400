package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/agent/wal"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/weirtest"
)

// The agent branch's invariants (the package documentation numbers them).
const (
	InvAgentOnce      = "S10 every agent input ends exactly once"
	InvAgentEffects   = "S11 side effects under one idempotency key, repeated only in the window"
	InvAgentWatermark = "S12 the agent emits nothing behind a watermark it forwarded"
	InvAgentStore     = "S17 a state the action-state store reported durable is there until discarded or pruned"
)

// decision is the agent's output for one input.
type decision struct {
	Key     string `json:"key"`
	ID      int64  `json:"id"`
	Verdict string `json:"verdict"`
	Tokens  int    `json:"tokens"`
	Effect  string `json:"effect"`
}

// decisionLine and deadLetterLine are the agent branch's committed lines:
// an input's decision, or the input dead-lettered with the reason.
func decisionLine(key string, id int64, verdict string, tokens int, effect string) string {
	return fmt.Sprintf("A %s id=%d verdict=%s tokens=%d effect=%s", key, id, verdict, tokens, effect)
}

func deadLetterLine(key string, id int64, reason string) string {
	return fmt.Sprintf("D %s id=%d reason=%s", key, id, reason)
}

// The reasons of dead-letter lines.
const (
	reasonTimeout   = "timeout"
	reasonPermanent = "model-permanent"
	reasonRejected  = "tool-rejected"
)

// reasonOf classifies a failed input's error by the markers the action,
// the model and the tool put into their errors (a replayed call's error
// keeps its text, not its type).
func reasonOf(err error) string {
	msg := fmt.Sprint(err)
	switch {
	case strings.Contains(msg, "sim-action: timeout"):
		return reasonTimeout
	case strings.Contains(msg, "sim-model: permanent"):
		return reasonPermanent
	case strings.Contains(msg, "sim-tool: rejected"):
		return reasonRejected
	}
	first, _, _ := strings.Cut(msg, "\n")
	return "other(" + strings.ReplaceAll(first, " ", "_") + ")"
}

// agentObserved is what one attempt's observers saw right behind the
// agent operator (chained: one channel per subtask), on its main output and
// on its failed-inputs output (S12).
type agentObserved struct {
	out    *weirtest.Observation[decision]
	failed *weirtest.Observation[agent.FailedInput]
}

// agentBranch adds the agent branch to attempt n's job: keyBy -> the agent
// operator (the seed's store: the WAL on the machine's disk, or the
// memory store of the world; ContinueOnError, failed inputs to a side
// output) -> decision and dead-letter lines for the sink.
func agentBranch(w *agentWorld, n int, disk vfs.FS, passed weir.Stream[event], obs *agentObserved) []weir.Stream[string] {
	spec := w.spec
	// The client retries transient failures at once (its waits would only
	// cost real time; the retries are what matters).
	m := model.WithRetry(&simModel{w: w, attempt: n}, model.RetryPolicy{Attempts: 4,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	apply := tool.Raw{ToolSpec: model.ToolSpec{Name: "apply", Description: "applies a decision in the external system",
		Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"},"verdict":{"type":"string"}}}`)},
		Fn: (&simTool{w: w, attempt: n}).call}
	a := &agent.Agent{
		Models: map[string]model.ChatModel{"sim": m},
		Tools: []tool.Tool{apply, tool.Raw{ToolSpec: model.ToolSpec{Name: "notify", Description: "notifies the external system of a decision",
			Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"},"step":{"type":"integer"}}}`)},
			Fn: (&simTool{w: w, attempt: n}).notify}},
		Actions: []agent.Action{agent.NewAction("decide", func(c *agent.RunnerContext, ev agent.Event) error {
			w.time.actionStarted()
			defer w.time.actionEnded()
			e, err := agent.Input[event](ev)
			if err != nil {
				return err
			}
			w.started(n, e.ID)
			fail := func(stage string, err error) error {
				if isDeadline(c.Context()) {
					w.expire(e.ID)
					return fmt.Errorf("sim-action: timeout in the %s call: %w", stage, err)
				}
				return fmt.Errorf("sim-action: the %s call failed: %w", stage, err)
			}
			resp, err := c.Chat("sim", model.Request{Messages: []model.Message{model.User("input id=" + strconv.FormatInt(e.ID, 10))}})
			if err != nil {
				return fail("model", err)
			}
			verdict, err := awaitStep(w, n, c, e, resp.Message.Content) // agentawait.go
			if err != nil {
				return fail("await", err)
			}
			args, err := json.Marshal(toolArgs{ID: e.ID, Verdict: verdict})
			if err != nil {
				return err
			}
			res, err := c.CallTool("apply", args)
			if err != nil {
				return fail("tool", err)
			}
			if res.IsError {
				return fail("tool", fmt.Errorf("%s", res.Content))
			}
			d := decision{Key: e.Key, ID: e.ID, Verdict: verdict,
				Tokens: resp.Usage.PromptTokens + resp.Usage.CompletionTokens, Effect: res.Content}
			if spec.Inputs[e.ID].Notify > 0 {
				// The second action makes the notify calls and outputs
				// the decision (agentmore.go).
				return c.Send(agent.NewEvent(eventDecided, d, nil))
			}
			c.Output(d)
			return nil
		}, agent.TypeInput),
			agent.NewAction("notify", func(c *agent.RunnerContext, ev agent.Event) error {
				return notifyAction(w, n, c, ev)
			}, eventDecided)},
	}
	failedTag := weir.NewOutputTag[agent.FailedInput]("agent-failed")
	walFactory := wal.Factory(walDir, wal.Options{FS: disk})
	// Chained to the source's one subtask, so that every agent subtask
	// receives its keys' records and the watermarks on one channel, in the
	// source's order (S12 and the per-key sequence numbers depend on it).
	taken := weir.Filter(passed, "agent-inputs", func(e event) bool { return spec.takes(e.ID) }).UID("agent-inputs").Parallelism(1)
	decisions := applyAgent(w, n, weir.KeyBy(taken, func(e event) string { return e.Key }), a, agent.Options{
		MaxConcurrentKeys: spec.MaxConcurrentKeys,
		ActionTimeout:     spec.timeout(),
		ContinueOnError:   true,
		FailedInputs:      failedTag,
		StallWarning:      -1,
		Store: func(ctx *runtime.Context) (agent.ActionStateStore, error) {
			var s agent.ActionStateStore
			var err error
			switch spec.Store {
			case StoreMemory:
				s, err = w.memory.Factory()(ctx)
			case StoreKafka:
				s, err = w.kafka.factory()(ctx)
			default:
				s, err = walFactory(ctx)
			}
			if err != nil {
				return nil, err
			}
			return observe(s, w, n), nil
		},
	}).UID("agent")
	failed := weir.SideOutput(decisions, failedTag)
	obs.out = weirtest.ObserveWith(decisions, weirtest.Options{Name: "observe-agent"})
	obs.failed = weirtest.ObserveWith(failed, weirtest.Options{Name: "observe-agent-failed"})
	lines := weir.Map(decisions, "decision-lines", func(d decision) string {
		return decisionLine(d.Key, d.ID, d.Verdict, d.Tokens, d.Effect)
	}).UID("decision-lines")
	dead := weir.Map(failed, "dead-letter-lines", func(f agent.FailedInput) string {
		e, ok := f.Input.(event)
		if !ok {
			// Not the input's type: say so in the line (S10 then fails).
			return deadLetterLine(f.Key, -1, fmt.Sprintf("input-of-type-%T", f.Input))
		}
		return deadLetterLine(e.Key, e.ID, reasonOf(f.Err))
	}).UID("dead-letter-lines")
	return []weir.Stream[string]{lines, dead}
}

type toolArgs struct {
	ID      int64  `json:"id"`
	Verdict string `json:"verdict"`
}

// simModel is the scripted model of attempt n: its answers, token counts,
// transient and permanent failures, hangs, late answers and latencies are
// the seed's, per input (AgentInput), whatever the attempt.
type simModel struct {
	w       *agentWorld
	attempt int
}

func (m *simModel) Chat(ctx context.Context, req model.Request) (*model.Response, error) {
	var id int64
	if n := len(req.Messages); n == 0 {
		return nil, fmt.Errorf("sim-model: an empty request")
	} else if _, err := fmt.Sscanf(req.Messages[n-1].Content, "input id=%d", &id); err != nil || id < 0 || id >= int64(len(m.w.spec.Inputs)) {
		return nil, fmt.Errorf("sim-model: a request for no input: %q", req.Messages[n-1].Content)
	}
	in := m.w.spec.Inputs[id]
	key, _ := model.IdempotencyKey(ctx)
	ref := callRef{id, "model"}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	switch in.Fault {
	case AgentHang:
		if !m.w.request(m.attempt, ref, key, false, false) {
			return nil, deadCall(ctx)
		}
		m.w.time.waitDeadline(ctx, m.w.spec.timeout())
		return nil, ctx.Err()
	case AgentLate:
		// The answer comes after the action's time-out (or its
		// cancellation), in virtual time.
		m.w.time.waitDeadline(ctx, m.w.spec.timeout())
	default:
		if in.DelayMicros > 0 {
			t := time.NewTimer(time.Duration(in.DelayMicros) * time.Microsecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
	}
	if in.Retries > 0 && m.w.transient(ref, key, in.Retries) {
		if !m.w.request(m.attempt, ref, key, false, false) {
			return nil, deadCall(ctx)
		}
		return nil, &model.APIError{StatusCode: 503, Message: "sim-model: transient key=" + key, Endpoint: "sim"}
	}
	if in.Fault == AgentPermanent {
		if !m.w.request(m.attempt, ref, key, true, false) {
			return nil, deadCall(ctx)
		}
		return nil, &model.APIError{StatusCode: 400, Message: "sim-model: permanent key=" + key, Endpoint: "sim"}
	}
	if !m.w.request(m.attempt, ref, key, true, true) {
		return nil, deadCall(ctx)
	}
	return &model.Response{Message: model.Assistant(in.Verdict), FinishReason: "stop",
		Usage: model.Usage{PromptTokens: in.Prompt, CompletionTokens: in.Completion}, Model: "sim key=" + key}, nil
}

// transient reports whether the next request of ref under key must fail
// transiently: the first retries requests of the call fail, whichever
// attempt makes them.
func (w *agentWorld) transient(ref callRef, key string, retries int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.mu.keys[key]
	return k == nil || k.requests < retries
}

// simTool is the tool of attempt n: its call is a side effect in the
// external system (agentWorld), which records every request with its
// idempotency key.
type simTool struct {
	w       *agentWorld
	attempt int
}

func (t *simTool) call(ctx context.Context, raw json.RawMessage) (tool.Result, error) {
	var args toolArgs
	if err := json.Unmarshal(raw, &args); err != nil || args.ID < 0 || args.ID >= int64(len(t.w.spec.Inputs)) {
		return tool.Result{}, fmt.Errorf("sim-tool: bad arguments %s", raw)
	}
	key, _ := tool.IdempotencyKey(ctx)
	ref := callRef{args.ID, "tool"}
	if ctx.Err() != nil {
		// A service does nothing for a request whose caller has given up
		// (an HTTP client's context ends the request); its key is noted.
		t.w.request(t.attempt, ref, key, false, false)
		return tool.Result{}, ctx.Err()
	}
	in := t.w.spec.Inputs[args.ID]
	if in.Fault == AgentToolRejected {
		if !t.w.request(t.attempt, ref, key, true, false) {
			return tool.Result{}, deadCall(ctx)
		}
		return tool.Result{}, fmt.Errorf("sim-tool: rejected id=%d key=%s", args.ID, key)
	}
	if !t.w.request(t.attempt, ref, key, true, true) {
		return tool.Result{}, deadCall(ctx)
	}
	s, _ := json.Marshal("key=" + key)
	return tool.Result{Content: fmt.Sprintf("applied-%d-%s", args.ID, args.Verdict), Structured: s}, nil
}
