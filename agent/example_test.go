package agent_test

import (
	"context"
	"fmt"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/watermark"
)

type question struct {
	User string `json:"user"`
	Text string `json:"text"`
}

// An agent answering questions with a model, remembering per user how many
// it has answered (short-term memory).
func Example() {
	a := &agent.Agent{
		Models: map[string]model.ChatModel{"llm": &model.Offline{Seed: 1}},
		Actions: []agent.Action{agent.NewAction("answer", func(c *agent.RunnerContext, ev agent.Event) error {
			q, err := agent.Input[question](ev)
			if err != nil {
				return err
			}
			n, _, err := agent.Recall[int](c.ShortTerm(), "answered")
			if err != nil {
				return err
			}
			if err := c.ShortTerm().Set("answered", n+1); err != nil {
				return err
			}
			resp, err := c.Chat("llm", model.Request{Messages: []model.Message{model.User(q.Text)}})
			if err != nil {
				return err
			}
			c.Output(fmt.Sprintf("%s #%d (input %d): %.30s", q.User, n+1, c.Seq(), resp.Message.Content))
			return nil
		}, agent.TypeInput)},
	}
	env := weir.NewEnvironment(weir.Config{})
	questions := weir.FromSlice(env, "questions", []question{
		{"ann", "what is a weir?"}, {"ann", "and a watermark?"}, {"ann", "thanks"},
	}, watermark.ForMonotonous[question]().WithTimestamp(func(question, int64) (int64, bool) { return 1, true }))
	answers := agent.Apply[string, question, string](weir.KeyBy(questions, func(q question) string { return q.User }), "answer", a, agent.Options{})
	out := weir.Collect(answers)
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range out.Values() {
		fmt.Println(v)
	}
	// Output:
	// ann #1 (input 0): answer 113e3db9553169b6 to "wh
	// ann #2 (input 1): answer e19de8285f12044c to "an
	// ann #3 (input 2): answer 9db81d0cc4d03890 to "th
}
