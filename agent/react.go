package agent

import (
	"encoding/json"
	"fmt"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
)

// ChatAction returns an action named name that answers chat-request
// events: it calls the model the request names and sends a chat-response
// event. A call that fails (after the model's retries) sends a response
// whose Error says why, so the agent decides what to do.
func ChatAction(name string) Action {
	return NewAction(name, func(c *RunnerContext, ev Event) error {
		cr, err := ChatRequestOf(ev)
		if err != nil {
			return err
		}
		out := ChatResponse{Model: cr.Model}
		resp, err := c.Chat(cr.Model, cr.Request)
		if err != nil {
			if c.Context().Err() != nil {
				return err // the operator is closing: nothing to report
			}
			out.Error = err.Error()
		} else {
			out.Response = *resp
		}
		return c.Send(NewChatResponse(out))
	}, TypeChatRequest)
}

// ToolAction returns an action named name that answers tool-request
// events: it calls the tool and sends a tool-response event (with Error
// set when the call itself failed).
func ToolAction(name string) Action {
	return NewAction(name, func(c *RunnerContext, ev Event) error {
		tr, err := ToolRequestOf(ev)
		if err != nil {
			return err
		}
		out := ToolResponse{Tool: tr.Tool, CallID: tr.CallID}
		res, err := c.CallTool(tr.Tool, tr.Arguments)
		if err != nil {
			if c.Context().Err() != nil {
				return err
			}
			out.Error = err.Error()
		} else {
			out.Result = res
		}
		return c.Send(NewToolResponse(out))
	}, TypeToolRequest)
}

// ReActOptions configure ReAct.
type ReActOptions struct {
	// System is the system prompt ("" for none).
	System string
	// MaxSteps bounds the model calls per input; 0 means 8.
	MaxSteps int
	// Prompt turns an input value into the user message; nil means the
	// value itself when it is a string, else its JSON.
	Prompt func(input any) (string, error)
	// Output, when set, asks for the final answer as structured output
	// (model.SchemaFor builds one from a Go type): every model call offers
	// it (OpenAI's response_format, Anthropic's output tool), the final
	// answer is validated against it and, if it does not conform, the
	// model is asked again with the validation error (Output.Attempts
	// calls in all; RunnerContext.Chat). The answer's Output holds the
	// validated JSON value.
	Output *model.ResponseFormat
}

// ReActAnswer is the output of a ReAct agent for one input.
type ReActAnswer struct {
	// Answer is the model's final text (its last text when incomplete).
	Answer string `json:"answer"`
	// Steps is the number of model calls made; ToolCalls the number of
	// tool calls.
	Steps     int `json:"steps"`
	ToolCalls int `json:"tool_calls"`
	// Complete is false when the step limit was reached, or a model call
	// failed (Error then says why).
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
	// Output is the final answer as a JSON value conforming to
	// ReActOptions.Output, when that is set and the answer is complete.
	Output json.RawMessage `json:"output,omitempty"`
}

// Decode unmarshals the answer's structured Output into v.
func (a ReActAnswer) Decode(v any) error {
	if len(a.Output) == 0 {
		return fmt.Errorf("agent: ReAct answer has no structured output (complete %v, error %q); set ReActOptions.Output", a.Complete, a.Error)
	}
	return json.Unmarshal(a.Output, v)
}

// The sensory memory of a ReAct run.
const (
	reactMessages  = "react.messages"
	reactSteps     = "react.steps"
	reactPending   = "react.pending"
	reactToolCalls = "react.tool_calls"
	reactModel     = "react"
)

// ReAct returns an agent that answers each input by running model m and
// the tools in turn (reason, act, observe): the model sees the
// conversation and the tools; each tool call it asks for runs as a tool
// action, its result goes back to the model, until the model answers
// without calling tools or MaxSteps model calls have been made. Its output
// is a ReActAnswer. The conversation lives in sensory memory; every model
// and tool call is its own action, so a restore resumes at the step that
// was running, and, with a store, a durable call (RunnerContext.Chat and
// CallTool), so a step whose call returned before a crash is not called
// again.
func ReAct(m model.ChatModel, tools []tool.Tool, opts ReActOptions) *Agent {
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = 8
	}
	var specs []model.ToolSpec
	if ts, err := tool.NewSet(tools...); err == nil {
		specs = ts.Specs()
	}
	request := func(msgs []model.Message) model.Request {
		return model.Request{Messages: msgs, Tools: specs, ResponseFormat: opts.Output}
	}
	start := func(c *RunnerContext, ev Event) error {
		v := ev.Value
		var prompt string
		if opts.Prompt != nil {
			p, err := opts.Prompt(v)
			if err != nil {
				return err
			}
			prompt = p
		} else if s, ok := v.(string); ok {
			prompt = s
		} else {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("agent: ReAct input is not JSON-serialisable: %w", err)
			}
			prompt = string(b)
		}
		var msgs []model.Message
		if opts.System != "" {
			msgs = append(msgs, model.System(opts.System))
		}
		msgs = append(msgs, model.User(prompt))
		if err := c.Sensory().Set(reactMessages, msgs); err != nil {
			return err
		}
		if err := c.Sensory().Set(reactSteps, 1); err != nil {
			return err
		}
		return c.Send(NewChatRequest(reactModel, request(msgs)))
	}
	step := func(c *RunnerContext, ev Event) error {
		cr, err := ChatResponseOf(ev)
		if err != nil {
			return err
		}
		msgs, _, err := Recall[[]model.Message](c.Sensory(), reactMessages)
		if err != nil {
			return err
		}
		steps, _, _ := Recall[int](c.Sensory(), reactSteps)
		calls, _, _ := Recall[int](c.Sensory(), reactToolCalls)
		answer := ReActAnswer{Steps: steps, ToolCalls: calls}
		if cr.Error != "" {
			answer.Error = cr.Error
			c.Output(answer)
			return nil
		}
		reply := cr.Response.Message
		answer.Answer = reply.Content
		if len(reply.ToolCalls) == 0 {
			answer.Complete = true
			if opts.Output != nil {
				// Validated by Chat; kept compact, as recorded.
				answer.Output = json.RawMessage(reply.Content)
			}
			c.Output(answer)
			return nil
		}
		if steps >= opts.MaxSteps {
			answer.Error = fmt.Sprintf("step limit of %d model calls reached with tool calls pending", opts.MaxSteps)
			c.Output(answer)
			return nil
		}
		reply.Role = model.RoleAssistant
		msgs = append(msgs, reply)
		if err := c.Sensory().Set(reactMessages, msgs); err != nil {
			return err
		}
		if err := c.Sensory().Set(reactPending, len(reply.ToolCalls)); err != nil {
			return err
		}
		if err := c.Sensory().Set(reactToolCalls, calls+len(reply.ToolCalls)); err != nil {
			return err
		}
		for _, tc := range reply.ToolCalls {
			if err := c.Send(NewToolRequest(ToolRequest{Tool: tc.Name, CallID: tc.ID, Arguments: tc.Arguments})); err != nil {
				return err
			}
		}
		return nil
	}
	observe := func(c *RunnerContext, ev Event) error {
		tr, err := ToolResponseOf(ev)
		if err != nil {
			return err
		}
		msgs, _, err := Recall[[]model.Message](c.Sensory(), reactMessages)
		if err != nil {
			return err
		}
		content := tr.Result.Content
		switch {
		case tr.Error != "":
			content = "error: " + tr.Error
		case tr.Result.IsError:
			content = "error: " + content
		}
		msgs = append(msgs, model.ToolResult(tr.CallID, content))
		if err := c.Sensory().Set(reactMessages, msgs); err != nil {
			return err
		}
		pending, _, _ := Recall[int](c.Sensory(), reactPending)
		pending--
		if err := c.Sensory().Set(reactPending, pending); err != nil {
			return err
		}
		if pending > 0 {
			return nil
		}
		steps, _, _ := Recall[int](c.Sensory(), reactSteps)
		if err := c.Sensory().Set(reactSteps, steps+1); err != nil {
			return err
		}
		return c.Send(NewChatRequest(reactModel, request(msgs)))
	}
	return &Agent{
		Models: map[string]model.ChatModel{reactModel: m},
		Tools:  tools,
		Actions: []Action{
			NewAction("react.start", start, TypeInput),
			ChatAction("react.chat"),
			NewAction("react.step", step, TypeChatResponse),
			ToolAction("react.tool"),
			NewAction("react.observe", observe, TypeToolResponse),
		},
	}
}
