package agent

import (
	"context"
	"time"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/runtime"
)

// Metric names of the agent operator's token counters.
const (
	// MetricModelInputTokens and MetricModelOutputTokens add up the
	// prompt and completion tokens the replies of a model reported,
	// labelled model (the name in Agent.Models), for the calls counted in
	// MetricModelCalls: a reply replayed from the action-state store after
	// a restore counts nothing, so a restored job does not count its
	// tokens twice.
	MetricModelInputTokens  = "modelInputTokens"
	MetricModelOutputTokens = "modelOutputTokens"
	// MetricModelSpendMicros adds up, with Options.Pricing, what those
	// tokens cost, in millionths of the price table's currency, labelled
	// model like the token counters.
	MetricModelSpendMicros = "modelSpendMicros"
)

// modelUsage holds the token counters, latency histogram and retry
// counters of one model of an agent.
type modelUsage struct {
	input, output *runtime.Counter
	latency       *runtime.Histogram
	// spend counts the cost of the tokens (nil without a price table);
	// name is the model's name in Agent.Models, pricing the table.
	spend                *runtime.Counter
	name                 string
	pricing              model.Pricing
	retries, rateLimited *runtime.Counter
	now                  func() time.Time
	// observe counts the retries the client reports (made once, so that
	// a call allocates only its context).
	observe model.RetryObserver
}

func newModelUsage(ctx *runtime.Context, name string, now func() time.Time, pricing model.Pricing) *modelUsage {
	l := runtime.Label{Name: "model", Value: name}
	u := &modelUsage{
		input:       ctx.LabeledCounter(MetricModelInputTokens, l),
		output:      ctx.LabeledCounter(MetricModelOutputTokens, l),
		latency:     latencyHistogram(ctx, MetricModelLatency, l),
		retries:     ctx.LabeledCounter(MetricModelRetries, l),
		rateLimited: ctx.LabeledCounter(MetricModelRateLimited, l),
		now:         now,
		name:        name,
	}
	if len(pricing) > 0 {
		u.spend, u.pricing = ctx.LabeledCounter(MetricModelSpendMicros, l), pricing
	}
	u.observe = func(_ error, _ time.Duration, rateLimited bool) {
		u.retries.Inc()
		if rateLimited {
			u.rateLimited.Inc()
		}
	}
	return u
}

// counted returns m with every call counted in st (calls, errors) and u
// (tokens, latency, the client's retries): each attempt of a structured
// call is a call. m itself when both are nil. With traced, the client's
// retries are also events of the call's span (retryEvents).
func (u *modelUsage) counted(m model.ChatModel, st *callStat, traced bool) model.ChatModel {
	if u == nil && st == nil {
		return m
	}
	return model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
		if u == nil {
			resp, err := m.Chat(ctx, req)
			st.record(err != nil, 0)
			return resp, err
		}
		start := u.now()
		obs := u.observe
		if traced {
			obs = retryEvents(ctx, obs)
		}
		resp, err := m.Chat(model.WithRetryObserver(ctx, obs), req)
		u.latency.Observe(u.now().Sub(start).Microseconds())
		st.record(err != nil, 0)
		if err == nil && resp != nil {
			u.input.Add(int64(resp.Usage.PromptTokens))
			u.output.Add(int64(resp.Usage.CompletionTokens))
			if u.spend != nil {
				if pr, ok := u.pricing.Of(resp.Model, u.name); ok {
					u.spend.Add(pr.Micros(resp.Usage))
				}
			}
		}
		return resp, err
	})
}

// modelUsage implements host.
func (o *operator[K, IN, OUT]) modelUsage(name string) *modelUsage { return o.usage[name] }

// now implements host.
func (o *operator[K, IN, OUT]) now() time.Time { return o.timer.now() }

// budgetLedger implements host.
func (o *operator[K, IN, OUT]) budgetLedger() *budgets { return o.budgets }
