package pipeline

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/eventlog"
	"github.com/weirproject/weir/agent/model"
)

// The agent step's limits in YAML: budgets (agent.Budget), a rate limit
// per model (model.RateLimit) and the event log (agent/eventlog), which Go
// configures through agent.Options and the model clients.

// agentFallbackModel is the name of the agent step's fallbackModel in
// agent.Agent.Models.
const agentFallbackModel = "fallback"

// BudgetSpec is one of an agent step's budgets (agent.Budget).
type BudgetSpec struct {
	Pos      Pos
	Name     string
	Scope    string // key, model or job
	Models   []string
	Tokens   int64
	Requests int64
	Window   time.Duration
	OnLimit  string // fail, wait or fallback
}

// RateLimitSpec is a model's rate limit (model.RateLimit).
type RateLimitSpec struct {
	Requests      int
	Tokens        int
	Interval      time.Duration
	MaxConcurrent int
}

// EventLogSpec is where an agent step writes its event log: a JSON-lines
// file or a Kafka topic of the pipeline's cluster.
type EventLogSpec struct {
	Pos   Pos
	File  string
	Topic string
}

// budgets decodes agent.budgets: a list of {name, scope, models, tokens,
// requests, window, onLimit}.
func (d *dec) budgets(n ast.Node, what string, a *AgentSpec) {
	seen := map[string]bool{}
	d.list(n, what, false, func(i int, bn ast.Node) {
		at := fmt.Sprintf("%s[%d]", what, i)
		b := BudgetSpec{Pos: d.pos(bn), Scope: "key", OnLimit: "fail"}
		d.object(bn, at,
			field{name: "name", required: true, accepts: "a name for metrics and checkpoints such as per-user", doc: "the budget's name, in metrics and checkpoints",
				fn: func(at string, _, v ast.Node) {
					if d.nonEmpty(v, at, "a name for metrics and checkpoints such as per-user", &b.Name) {
						if seen[b.Name] {
							d.errf(v, "%s: %q is used twice; want unique budget names", at, b.Name)
						}
						seen[b.Name] = true
					}
				}},
			field{name: "scope", accepts: "`key`, `model`, `job`", def: "`key`", doc: "what is counted apart: each key, each model, or the whole job",
				fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &b.Scope, "key", "model", "job") }},
			field{name: "models", accepts: "a list of `model`, `fallback`", def: "both", doc: "the calls counted", fn: func(at string, _, v ast.Node) {
				var ps []Pos
				d.strings(v, at, &b.Models, &ps)
				for j, m := range b.Models {
					if m != agentModel && m != agentFallbackModel {
						d.errAt(ps[j], "%s[%d]: %q: want model or fallback (the step's model and fallbackModel)", at, j, m)
					}
				}
			}},
			field{name: "tokens", accepts: "an integer from 1 to 2^50", def: "none", doc: "the most tokens (prompt plus completion) per window; tokens, requests or both",
				fn: func(at string, _, v ast.Node) { d.integer(v, at, 1, 1<<50, &b.Tokens) }},
			field{name: "requests", accepts: "an integer from 1 to 2^40", def: "none", doc: "the most model calls per window",
				fn: func(at string, _, v ast.Node) { d.integer(v, at, 1, 1<<40, &b.Requests) }},
			field{name: "window", required: true, accepts: "a duration > 0", doc: "a tumbling window of processing time aligned to the Unix epoch (`24h` is a UTC day)",
				fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &b.Window) }},
			field{name: "onLimit", accepts: "`fail`, `wait`, `fallback`", def: "`fail`", doc: "at the limit: fail the call (needs `continueOnError`: a dead letter), wait for the next window, or call `fallbackModel`",
				fn: func(at string, _, v ast.Node) { d.oneOf(v, at, &b.OnLimit, "fail", "wait", "fallback") }},
		)
		if b.Tokens == 0 && b.Requests == 0 {
			d.errAt(b.Pos, "%s: want tokens, requests or both (the most per window)", at)
		}
		a.Budgets = append(a.Budgets, b)
	})
}

// checkBudgets checks what needs the whole agent step: a fallback needs
// fallbackModel, a failing budget needs continueOnError (the refused input
// then goes to the step's dead letters).
func (d *dec) checkBudgets(what string, a *AgentSpec) {
	for i, b := range a.Budgets {
		at := fmt.Sprintf("%s.budgets[%d]", what, i)
		switch b.OnLimit {
		case "fallback":
			if a.FallbackModel == nil {
				d.errAt(b.Pos, "%s: onLimit fallback needs %s.fallbackModel (the model called past the budget)", at, what)
			}
			for _, m := range b.Models {
				if m == agentFallbackModel {
					d.errAt(b.Pos, "%s: onLimit fallback on a budget of the fallback model itself; want models: [model]", at)
				}
			}
		case "fail":
			if !a.ContinueOnError {
				d.errAt(b.Pos, "%s: onLimit fail needs %s.continueOnError: true (a refused input then goes to the step's dead letters); or use onLimit wait", at, what)
			}
		}
		for _, m := range b.Models {
			if m == agentFallbackModel && a.FallbackModel == nil {
				d.errAt(b.Pos, "%s: models names fallback, but %s has no fallbackModel", at, what)
			}
		}
	}
}

// rateLimit decodes model.rateLimit.
func (d *dec) rateLimit(n ast.Node, what string) *RateLimitSpec {
	r := &RateLimitSpec{}
	d.object(n, what,
		field{name: "requests", accepts: "an integer from 1 to 2^20", def: "none", doc: "the most calls per `interval`",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1<<20, &r.Requests) }},
		field{name: "tokens", accepts: "an integer from 1 to 2^40", def: "none", doc: "the most tokens per `interval`",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1<<40, &r.Tokens) }},
		field{name: "interval", accepts: "a duration > 0", def: "1m", doc: "the limiter's period",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.Interval) }},
		field{name: "maxConcurrent", accepts: "an integer from 1 to 2^20", def: "none", doc: "the most calls in flight; calls wait in the limiter (back-pressure), they do not fail",
			fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1<<20, &r.MaxConcurrent) }},
	)
	if r.Requests == 0 && r.Tokens == 0 && r.MaxConcurrent == 0 {
		d.errf(n, "%s: want at least one of requests, tokens (per interval, default 1m) or maxConcurrent", what)
	}
	return r
}

// eventLog decodes agent.eventLog: {file: path} or {kafka: {topic}}.
func (d *dec) eventLog(k, n ast.Node, what string) *EventLogSpec {
	l := &EventLogSpec{Pos: d.pos(k)}
	kinds := 0
	d.object(n, what,
		field{name: "file", accepts: "a JSON-lines file such as /var/log/weir/agent.jsonl", def: "none", doc: "write the agent's event log as JSON lines to this file (`weir agent log` reads it)",
			fn: func(at string, _, v ast.Node) {
				kinds++
				d.nonEmpty(v, at, "a JSON-lines file such as /var/log/weir/agent.jsonl", &l.File)
			}},
		field{name: "kafka", accepts: "a mapping", def: "none", doc: "write the event log to a topic of the pipeline's cluster",
			fn: func(at string, _, v ast.Node) {
				kinds++
				d.object(v, at,
					field{name: "topic", required: true, accepts: "a topic name", doc: "the event log's topic",
						fn: func(at string, _, v ast.Node) { d.nonEmpty(v, at, "a topic name", &l.Topic) }},
				)
			}},
	)
	if kinds != 1 {
		d.errf(k, "%s: want exactly one of file (a path) or kafka ({topic})", what)
	}
	return l
}

// agentBudgets turns the step's budgets into agent.Budgets.
func agentBudgets(a *AgentSpec) []agent.Budget {
	var bs []agent.Budget
	for _, b := range a.Budgets {
		ab := agent.Budget{Name: b.Name, Scope: agent.BudgetScope(b.Scope), Models: b.Models, Tokens: b.Tokens, Requests: b.Requests,
			Window: b.Window, OnLimit: agent.BudgetOnLimit(b.OnLimit)}
		if ab.OnLimit == agent.BudgetFallback {
			ab.Fallback = agentFallbackModel
		}
		bs = append(bs, ab)
	}
	return bs
}

// rateLimited wraps m in the limiter of its rate limit (nil: m).
func rateLimited(m model.ChatModel, r *RateLimitSpec) (model.ChatModel, error) {
	if r == nil {
		return m, nil
	}
	l, err := model.NewLimiter(model.RateLimit{Requests: r.Requests, Tokens: r.Tokens, Interval: r.Interval, MaxConcurrent: r.MaxConcurrent})
	if err != nil {
		return nil, err
	}
	return model.WithRateLimit(m, l), nil
}

// agentEventLog opens the step's event log; the closer flushes and closes
// it.
func (b *builder) agentEventLog(l *EventLogSpec) (agent.Listener, func() error, error) {
	if l.File != "" {
		w, err := eventlog.CreateFile(l.File)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: eventLog.file: %w", l.Pos, err)
		}
		return w, w.Close, nil
	}
	if len(b.j.Brokers) == 0 {
		return nil, nil, fmt.Errorf("%s: eventLog.kafka: the pipeline has no Kafka cluster (job.kafka)", l.Pos)
	}
	opts, err := b.j.Security.Opts()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: eventLog.kafka: %w", l.Pos, err)
	}
	w, err := eventlog.NewKafkaWriter(b.j.Brokers, l.Topic, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: eventLog.kafka: %w", l.Pos, err)
	}
	return w, w.Close, nil
}

// pricing decodes agent.pricing: {MODEL: {input, output}}, currency per
// million prompt and completion tokens, by the name of the model that
// answers (the server's, such as gpt-4o-mini; "offline" for the offline
// model), else the step's name for it (model, fallback).
func (d *dec) pricing(n ast.Node, what string) model.Pricing {
	kvs, ok := d.entries(n, what)
	if !ok {
		return nil
	}
	p := model.Pricing{}
	for _, kv := range kvs {
		name, kn, ok := d.keyOf(kv)
		if !ok {
			continue
		}
		if _, dup := p[name]; dup {
			d.errf(kn, "%s: model %q given twice", what, name)
			continue
		}
		at := what + "." + name
		var pr model.Price
		d.object(kv.Value, at,
			field{name: "input", required: true, accepts: "a price, 0 or more", doc: "price per million prompt tokens",
				fn: func(at string, _, v ast.Node) { pr.Input = d.price(v, at) }},
			field{name: "output", required: true, accepts: "a price, 0 or more", doc: "price per million completion tokens",
				fn: func(at string, _, v ast.Node) { pr.Output = d.price(v, at) }},
		)
		p[name] = pr
	}
	if len(p) == 0 {
		d.errf(n, "%s: want a price per model, such as {gpt-4o-mini: {input: 0.15, output: 0.60}} (currency per million tokens)", what)
	}
	return p
}

// price reads a price per million tokens: a number, 0 or more.
func (d *dec) price(n ast.Node, what string) float64 {
	s, ok := scalarText(n)
	f, err := strconv.ParseFloat(s, 64)
	if _, isStr := n.(*ast.StringNode); !ok || isStr || err != nil {
		d.errf(n, "%s: got %s, want a price per million tokens, 0 or more, such as 0.15", what, describe(n))
		return 0
	}
	if f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		d.errf(n, "%s: %s: want a price per million tokens, 0 or more, such as 0.15", what, s)
		return 0
	}
	return f
}
