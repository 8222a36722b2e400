package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/eventlog"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/kafkasec"
)

// Run is one recorded input: what the event log says the job did with it.
type Run struct {
	// Operator names the agent operator (a log may hold several); Key
	// (as the log prints it) and Seq identify the input within it.
	Operator string
	Key      string
	Seq      int64
	// TimeMs is the time of the input's first entry (Unix ms).
	TimeMs int64
	// Input is the input's value (decoded JSON); HasInput says the log
	// recorded it (the first action_start of the input event).
	Input    any
	HasInput bool
	// NoRecord says no event log recorded what the job did with the
	// input (a run read from the input topic, ReadInputs, that Recorded
	// found no record for): it has no old decision to compare with.
	NoRecord bool
	// Outputs are the values of the output entries, in log order.
	Outputs []any
	// Errors are the action errors' texts.
	Errors []string
	// ToolCalls are the recorded tool calls, in order, with their results.
	ToolCalls []ToolCall
	// ModelCalls and Tokens count the recorded model calls and the token
	// usage of their responses.
	ModelCalls int
	Tokens     Tokens
}

// ToolCall is one tool call: the tool, its arguments, and (recorded) its
// result.
type ToolCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
	// Result is the result the call returned; Error the text of a call
	// that failed (no result).
	Result tool.Result `json:"result"`
	Error  string      `json:"error,omitempty"`
	// Matched says a replayed call got a recorded result; Stubbed that it
	// got Options.StubContent (only in reports).
	Matched bool `json:"matched"`
	Stubbed bool `json:"stubbed,omitempty"`
}

// Tokens is model usage, and with a price table (Options.Pricing) its
// cost.
type Tokens struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	// Cost is what the tokens cost under Options.Pricing, in its
	// currency (nil without a table); Unpriced names the models whose
	// calls it could not price (left out of Cost).
	Cost     *float64 `json:"cost,omitempty"`
	Unpriced []string `json:"unpriced,omitempty"`
	// byModel is the usage per model (the one that answered, and the
	// agent's name for it): what Cost prices.
	byModel map[modelID]model.Usage
}

// modelID names a model for pricing: the one that answered
// (Response.Model) and the agent's name for it (the log entry's name).
type modelID struct{ answered, name string }

// Total is Prompt + Completion.
func (t Tokens) Total() int64 { return t.Prompt + t.Completion }

func (t *Tokens) add(id modelID, u model.Usage) {
	t.Prompt += int64(u.PromptTokens)
	t.Completion += int64(u.CompletionTokens)
	if t.byModel == nil {
		t.byModel = map[modelID]model.Usage{}
	}
	m := t.byModel[id]
	m.PromptTokens += u.PromptTokens
	m.CompletionTokens += u.CompletionTokens
	t.byModel[id] = m
}

// merge adds o's usage to t.
func (t *Tokens) merge(o Tokens) {
	if len(o.byModel) == 0 {
		t.Prompt += o.Prompt
		t.Completion += o.Completion
		return
	}
	for id, u := range o.byModel {
		t.add(id, u)
	}
}

// price sets Cost and Unpriced under p (nothing without a table).
func (t *Tokens) price(p model.Pricing) {
	if p == nil {
		return
	}
	var cost float64
	t.Unpriced = nil
	for id, u := range t.byModel {
		if pr, ok := p.Of(id.answered, id.name); ok {
			cost += pr.Cost(u)
		} else {
			n := id.answered
			if n == "" {
				n = id.name
			}
			if !slices.Contains(t.Unpriced, n) {
				t.Unpriced = append(t.Unpriced, n)
			}
		}
	}
	slices.Sort(t.Unpriced)
	t.Cost = &cost
}

// actionRun is one action run of an input, as logged: a repeated start of
// the same (event, action) after a restore replaces it.
type actionRun struct {
	tools   []ToolCall
	outputs []any
	errs    []string
	calls   int
	tokens  Tokens
	// replayed says the run was taken from the store: the outputs it
	// re-emits are the logged attempt's, already kept, unless the log
	// has only the replay.
	replayed bool
	// live says an attempt of the run was logged (action_start).
	live bool
}

// runKey identifies an input: the operator (a log may hold several agent
// operators' entries), the key and the sequence number.
type runKey struct {
	operator string
	key      string
	seq      int64
}

type actionKey struct {
	event  int64
	action string
}

type pending struct {
	run     *Run
	order   []actionKey
	actions map[actionKey]*actionRun
}

// Collector gathers log entries into runs; the zero value is ready. Not
// safe for concurrent use.
type Collector struct {
	order []runKey
	runs  map[runKey]*pending
}

// Add takes one entry.
func (c *Collector) Add(e agent.LogEntry) error {
	if c.runs == nil {
		c.runs = map[runKey]*pending{}
	}
	rk := runKey{e.Operator, e.Key, e.Seq}
	p := c.runs[rk]
	if p == nil {
		p = &pending{run: &Run{Operator: e.Operator, Key: e.Key, Seq: e.Seq, TimeMs: e.TimeMs}, actions: map[actionKey]*actionRun{}}
		c.runs[rk] = p
		c.order = append(c.order, rk)
	}
	ak := actionKey{e.EventID, e.Action}
	a := p.actions[ak]
	switch e.Kind {
	case agent.LogActionStart, agent.LogActionReplayed:
		if e.Kind == agent.LogActionReplayed && a != nil {
			// Completed before the restore and logged then: the replay
			// re-emits the same outputs; keep the first attempt's.
			a.replayed = true
			return nil
		}
		// A new attempt of the run (after a restore) replaces the earlier.
		if a == nil {
			p.order = append(p.order, ak)
		}
		a = &actionRun{replayed: e.Kind == agent.LogActionReplayed, live: e.Kind == agent.LogActionStart}
		p.actions[ak] = a
		if e.Kind == agent.LogActionStart && e.EventID == 0 && !p.run.HasInput {
			v, err := inputOf(e.Data)
			if err != nil {
				return fmt.Errorf("replay: key %s input %d: the recorded input event: %w", e.Key, e.Seq, err)
			}
			p.run.Input, p.run.HasInput = v, true
		}
		return nil
	}
	if a == nil {
		a = &actionRun{}
		p.actions[ak] = a
		p.order = append(p.order, ak)
	}
	switch e.Kind {
	case agent.LogActionError:
		a.errs = append(a.errs, e.Error)
	case agent.LogToolCall:
		args, err := rawOf(e.Data)
		if err != nil {
			return fmt.Errorf("replay: key %s input %d: tool call %s: %w", e.Key, e.Seq, e.Name, err)
		}
		a.tools = append(a.tools, ToolCall{Name: e.Name, Args: args})
	case agent.LogToolResult:
		if n := len(a.tools); n > 0 && a.tools[n-1].Name == e.Name {
			tc := &a.tools[n-1]
			if e.Data != nil {
				if err := decodeAs(e.Data, &tc.Result); err != nil {
					return fmt.Errorf("replay: key %s input %d: tool result %s: %w", e.Key, e.Seq, e.Name, err)
				}
			} else {
				tc.Error = e.Error
			}
		}
	case agent.LogModelResult:
		a.calls++
		if e.Data != nil {
			var resp model.Response
			if err := decodeAs(e.Data, &resp); err == nil {
				a.tokens.add(modelID{resp.Model, e.Name}, resp.Usage)
			}
		}
	case agent.LogOutput:
		if e.Replayed && a.live {
			return nil
		}
		a.outputs = append(a.outputs, e.Data)
	}
	return nil
}

// Runs returns the runs gathered, in the order of their first entries.
// Tool results that were errors (no result) are kept with Error set; they
// match like any other recorded call.
func (c *Collector) Runs() []*Run {
	out := make([]*Run, 0, len(c.order))
	for _, rk := range c.order {
		p := c.runs[rk]
		r := p.run
		r.Outputs, r.Errors, r.ToolCalls, r.ModelCalls, r.Tokens = nil, nil, nil, 0, Tokens{}
		for _, ak := range p.order {
			a := p.actions[ak]
			r.Outputs = append(r.Outputs, a.outputs...)
			r.Errors = append(r.Errors, a.errs...)
			r.ToolCalls = append(r.ToolCalls, a.tools...)
			r.ModelCalls += a.calls
			r.Tokens.merge(a.tokens)
		}
		out = append(out, r)
	}
	return out
}

// ReadFile reads the runs of an event log file (eventlog.CreateFile).
func ReadFile(path string) ([]*Run, error) {
	var c Collector
	if err := eventlog.ReadFile(path, "", c.Add); err != nil {
		return nil, err
	}
	return c.Runs(), nil
}

// ReadTopic reads the runs of an event log topic (eventlog.NewKafkaWriter)
// from its start to the end offsets it has when ReadTopic starts.
func ReadTopic(ctx context.Context, brokers []string, sec kafkasec.Security, topic string) ([]*Run, error) {
	var c Collector
	if err := eventlog.ReadTopic(ctx, brokers, sec, topic, "", c.Add); err != nil {
		return nil, err
	}
	return c.Runs(), nil
}

// inputOf returns the value of a logged input event (an agent.Event as
// JSON: the entry's Data).
func inputOf(data any) (any, error) {
	var ev struct {
		Value any `json:"value"`
	}
	if err := decodeAs(data, &ev); err != nil {
		return nil, err
	}
	return ev.Value, nil
}

// decodeAs decodes a logged value (decoded JSON, or the original value
// when the entries did not go through JSON) into dst.
func decodeAs(data any, dst any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

// rawOf returns a logged value as JSON.
func rawOf(data any) (json.RawMessage, error) {
	if data == nil {
		return nil, nil
	}
	if r, ok := data.(json.RawMessage); ok {
		return r, nil
	}
	return json.Marshal(data)
}
