package agent

import (
	"context"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/runtime"
)

// modelUsage holds the counters of one model of an agent, labelled with
// the model's name (Agent.Models): calls that returned a reply
// (modelCalls), calls that failed after the model's own retries
// (modelErrors), and the tokens the replies reported (modelInputTokens,
// modelOutputTokens). Only calls made to the model count: a call whose
// recorded reply is replayed from the action-state store after a restore
// counts nothing, so a restored job does not count its tokens twice.
type modelUsage struct {
	calls, errors, input, output *runtime.Counter
}

func newModelUsage(ctx *runtime.Context, name string) *modelUsage {
	l := runtime.Label{Name: "model", Value: name}
	return &modelUsage{
		calls:  ctx.LabeledCounter("modelCalls", l),
		errors: ctx.LabeledCounter("modelErrors", l),
		input:  ctx.LabeledCounter("modelInputTokens", l),
		output: ctx.LabeledCounter("modelOutputTokens", l),
	}
}

// counted returns m with every call counted in u (m itself when u is nil).
func (u *modelUsage) counted(m model.ChatModel) model.ChatModel {
	if u == nil {
		return m
	}
	return model.Func(func(ctx context.Context, req model.Request) (*model.Response, error) {
		resp, err := m.Chat(ctx, req)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				u.errors.Inc()
			}
		case resp != nil:
			u.calls.Inc()
			u.input.Add(int64(resp.Usage.PromptTokens))
			u.output.Add(int64(resp.Usage.CompletionTokens))
		}
		return resp, err
	})
}

// modelUsage implements host.
func (o *operator[K, IN, OUT]) modelUsage(name string) *modelUsage { return o.usage[name] }
