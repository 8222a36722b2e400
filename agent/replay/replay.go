package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
	"github.com/weirproject/weir/clock"
)

// Unmatched is what a tool call without a recorded result gets.
type Unmatched string

const (
	// Refuse (the default): an IsError result saying the call was not
	// recorded; the action (and the model) see it.
	Refuse Unmatched = "refuse"
	// Stub: a result whose content is Options.StubContent.
	Stub Unmatched = "stub"
)

// Options configures Evaluate. The zero value refuses unmatched calls.
type Options struct {
	// Unmatched is what a tool call without a recorded result gets: Refuse
	// ("" means Refuse) or Stub.
	Unmatched Unmatched
	// StubContent is a stubbed result's content; "" means "{}".
	StubContent string
	// Clock is the evaluator's clock (log times); nil: the system clock.
	Clock clock.Clock
	// Logger gets what actions log; nil: a logger that drops everything.
	Logger *slog.Logger
	// Pricing, when set, prices the tokens before and after (Tokens.Cost,
	// per input and in the summary), each reply by the model that
	// answered, else by the agent's name for it (model.Pricing). nil: no
	// cost in the report.
	Pricing model.Pricing
}

func (o Options) validate() error {
	switch o.Unmatched {
	case "", Refuse, Stub:
	default:
		return fmt.Errorf("replay: Options.Unmatched %q: want %q or %q", o.Unmatched, Refuse, Stub)
	}
	if err := o.Pricing.Validate(); err != nil {
		return fmt.Errorf("replay: Options.Pricing: %w", err)
	}
	return nil
}

// Input is the evaluation of one recorded input.
type Input struct {
	Operator string `json:"operator"`
	Key      string `json:"key"`
	Seq      int64  `json:"seq"`
	// Skipped is why the input was not evaluated ("" when it was).
	Skipped string `json:"skipped,omitempty"`
	// OldOutputs and OldErrors are the recorded decision; NewOutputs and
	// NewError the new agent's.
	OldOutputs []any    `json:"oldOutputs"`
	OldErrors  []string `json:"oldErrors,omitempty"`
	NewOutputs []any    `json:"newOutputs"`
	NewError   string   `json:"newError,omitempty"`
	// Changed says the decisions differ (R3); Failed that the
	// new agent failed on the input; NoRecord that no event log recorded
	// the old decision (an input read from the input topic), so there is
	// nothing to compare.
	Changed  bool `json:"changed"`
	Failed   bool `json:"failed"`
	NoRecord bool `json:"noRecord,omitempty"`
	// ToolCalls are the new agent's tool calls, each Matched (answered
	// with a recorded result) or new (refused or stubbed).
	ToolCalls    []ToolCall `json:"toolCalls,omitempty"`
	MatchedCalls int        `json:"matchedToolCalls"`
	NewCalls     int        `json:"newToolCalls"`
	// Model calls and tokens before (recorded) and after (the new agent).
	ModelCallsBefore int    `json:"modelCallsBefore"`
	ModelCallsAfter  int    `json:"modelCallsAfter"`
	TokensBefore     Tokens `json:"tokensBefore"`
	TokensAfter      Tokens `json:"tokensAfter"`
}

// Summary totals a Report.
type Summary struct {
	Inputs    int `json:"inputs"`
	Evaluated int `json:"evaluated"`
	Skipped   int `json:"skipped"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	Failed    int `json:"failed"`
	// NoRecord counts the inputs without a recorded decision.
	NoRecord int `json:"noRecord,omitempty"`
	// MatchedCalls and NewCalls count the new agent's tool calls.
	MatchedCalls     int    `json:"matchedToolCalls"`
	NewCalls         int    `json:"newToolCalls"`
	ModelCallsBefore int    `json:"modelCallsBefore"`
	ModelCallsAfter  int    `json:"modelCallsAfter"`
	TokensBefore     Tokens `json:"tokensBefore"`
	TokensAfter      Tokens `json:"tokensAfter"`
}

// Report is what Evaluate returns: an Input per recorded run, in the
// runs' order, and their Summary. It is JSON (what `weir agent replay
// --json` prints).
type Report struct {
	Inputs  []Input `json:"inputs"`
	Summary Summary `json:"summary"`
}

// answerer is the tools' side of an evaluation: the recorded calls of the
// input being evaluated, and the calls the new agent makes.
type answerer struct {
	opts     Options
	recorded map[string]ToolCall // by callKey
	calls    []ToolCall
	tokens   Tokens
	model    int
}

// callKey is a tool call's identity: its name and canonical arguments.
func callKey(name string, args json.RawMessage) string {
	var v any = nil
	if len(bytes.TrimSpace(args)) > 0 {
		if json.Valid(args) {
			v = args
		} else {
			v = map[string]string{"invalidJSON": string(args)}
		}
	}
	b, err := agent.CanonicalJSON(v)
	if err != nil {
		b = args
	}
	return name + "\x00" + string(b)
}

// OnEntry implements agent.Listener: it lists the new agent's tool calls
// and counts its model calls and tokens.
func (a *answerer) OnEntry(e *agent.LogEntry) {
	switch e.Kind {
	case agent.LogToolCall:
		args, _ := e.Data.(json.RawMessage)
		a.calls = append(a.calls, ToolCall{Name: e.Name, Args: args})
	case agent.LogToolResult:
		if n := len(a.calls); n > 0 {
			if r, ok := e.Data.(tool.Result); ok {
				a.calls[n-1].Result = r
			} else {
				a.calls[n-1].Error = e.Error
			}
		}
	case agent.LogModelResult:
		a.model++
		if r, ok := e.Data.(*model.Response); ok && r != nil {
			a.tokens.add(modelID{r.Model, e.Name}, r.Usage)
		}
	}
}

// call answers a call of the tool name: the recorded result, or a refusal
// or stub.
func (a *answerer) call(name string, args json.RawMessage) (tool.Result, error) {
	n := len(a.calls)
	if rc, ok := a.recorded[callKey(name, args)]; ok {
		if n > 0 {
			a.calls[n-1].Matched = true
		}
		if rc.Error != "" {
			return tool.Result{}, &RecordedError{Msg: rc.Error}
		}
		return rc.Result, nil
	}
	if a.opts.Unmatched == Stub {
		if n > 0 {
			a.calls[n-1].Stubbed = true
		}
		c := a.opts.StubContent
		if c == "" {
			c = "{}"
		}
		return tool.Result{Content: c}, nil
	}
	return tool.Errorf("replay: the call of tool %q with these arguments was not recorded; it is refused during replay evaluation", name), nil
}

// RecordedError is the recorded failure of a tool call, returned again
// when the call matches.
type RecordedError struct{ Msg string }

func (e *RecordedError) Error() string { return e.Msg }

// Evaluate runs every recorded run's input through a (the new agent) and
// compares its decisions with the recorded ones. a's tools never run
// (R1): Evaluate works on a copy of a whose tools answer from
// the record. Runs whose input was not recorded are skipped. The error is
// a's (it does not compile) or ctx's.
func Evaluate(ctx context.Context, runs []*Run, a *agent.Agent, opts Options) (*Report, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fmt.Errorf("replay: nil agent")
	}
	ans := &answerer{opts: opts}
	b := *a
	b.Tools = make([]tool.Tool, len(a.Tools))
	for i, t := range a.Tools {
		spec := t.Spec()
		name := spec.Name
		b.Tools[i] = tool.Raw{ToolSpec: spec, Fn: func(_ context.Context, args json.RawMessage) (tool.Result, error) {
			return ans.call(name, args)
		}}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ev, err := agent.NewEvaluator(&b, agent.EvalOptions{Listeners: []agent.Listener{ans}, Clock: opts.Clock, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("replay: the new agent: %w", err)
	}
	rep := &Report{Inputs: make([]Input, 0, len(runs))}
	s := &rep.Summary
	for _, r := range runs {
		in := Input{Operator: r.Operator, Key: r.Key, Seq: r.Seq, OldOutputs: orEmpty(r.Outputs), OldErrors: r.Errors,
			ModelCallsBefore: r.ModelCalls, TokensBefore: r.Tokens, NewOutputs: []any{}}
		in.TokensBefore.price(opts.Pricing)
		s.Inputs++
		s.ModelCallsBefore += r.ModelCalls
		s.TokensBefore.merge(r.Tokens)
		if !r.HasInput {
			in.Skipped = "the log has no action_start entry of the input event (the log began after the input started, or was written before inputs were logged)"
			s.Skipped++
			rep.Inputs = append(rep.Inputs, in)
			continue
		}
		ans.recorded = make(map[string]ToolCall, len(r.ToolCalls))
		for _, tc := range r.ToolCalls {
			k := callKey(tc.Name, tc.Args)
			if _, dup := ans.recorded[k]; !dup {
				ans.recorded[k] = tc
			}
		}
		ans.calls, ans.tokens, ans.model = nil, Tokens{}, 0
		res, err := ev.Evaluate(ctx, r.Key, r.Seq, r.Input)
		if err != nil {
			return nil, err
		}
		in.NewOutputs = orEmpty(res.Outputs)
		if res.Err != nil {
			in.NewError, in.Failed = res.Err.Error(), true
		}
		in.ToolCalls = ans.calls
		for _, c := range ans.calls {
			if c.Matched {
				in.MatchedCalls++
			} else {
				in.NewCalls++
			}
		}
		in.ModelCallsAfter, in.TokensAfter = ans.model, ans.tokens
		in.TokensAfter.price(opts.Pricing)
		s.Evaluated++
		switch {
		case in.Failed:
			s.Failed++
		case r.NoRecord:
			in.NoRecord = true
			s.NoRecord++
		case (len(r.Errors) > 0) != in.Failed || !sameJSON(in.OldOutputs, in.NewOutputs):
			in.Changed = true
			s.Changed++
		default:
			s.Unchanged++
		}
		s.MatchedCalls += in.MatchedCalls
		s.NewCalls += in.NewCalls
		s.ModelCallsAfter += in.ModelCallsAfter
		s.TokensAfter.merge(in.TokensAfter)
		rep.Inputs = append(rep.Inputs, in)
	}
	s.TokensBefore.price(opts.Pricing)
	s.TokensAfter.price(opts.Pricing)
	return rep, nil
}

func orEmpty(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

// sameJSON reports whether a and b are the same JSON (canonical form).
func sameJSON(a, b []any) bool {
	x, err1 := agent.CanonicalJSON(a)
	y, err2 := agent.CanonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
