package agent

import (
	"context"

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
)

// modelUsage holds the token counters of one model of an agent.
type modelUsage struct {
	input, output *runtime.Counter
}

func newModelUsage(ctx *runtime.Context, name string) *modelUsage {
	l := runtime.Label{Name: "model", Value: name}
	return &modelUsage{
		input:  ctx.LabeledCounter(MetricModelInputTokens, l),
		output: ctx.LabeledCounter(MetricModelOutputTokens, l),
	}
}

// counted returns m with every call counted in st (calls, errors) and its
// tokens in u: each attempt of a structured call is a call. m itself when
// both are nil.
func (u *modelUsage) counted(m model.ChatModel, st *callStat) model.ChatModel {
	if u == nil && st == nil {
		return m
	}
	return model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
		resp, err := m.Chat(ctx, req)
		st.record(err != nil)
		if err == nil && resp != nil && u != nil {
			u.input.Add(int64(resp.Usage.PromptTokens))
			u.output.Add(int64(resp.Usage.CompletionTokens))
		}
		return resp, err
	})
}

// modelUsage implements host.
func (o *operator[K, IN, OUT]) modelUsage(name string) *modelUsage { return o.usage[name] }
