package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
)

// host is what a RunnerContext needs from its operator.
type host interface {
	agentDef() *compiled
	encodeKey(key any) ([]byte, error)
	log() *slog.Logger
	// nonDurableCalls reports Options.NonDurableCalls.
	nonDurableCalls() bool
	// callStat returns the counters of the model or tool call named name
	// (chatCallPrefix or toolCallPrefix, then the model's or tool's name);
	// nil for a name the agent does not have.
	callStat(name string) *callStat
	// modelUsage returns the counters of the model named name (nil if
	// there are none).
	modelUsage(name string) *modelUsage
	// now is the job's clock.
	now() time.Time
	// budgetLedger is the ledger of Options.Budgets (nil: none).
	budgetLedger() *budgets
}

// RunnerContext is what an action gets besides its event: the key and
// input it works on, the means to send events, memory, models, tools and
// configuration. It belongs to one action run and is used from that run's
// goroutine only (a goroutine the action starts must not use it after the
// action returns).
type RunnerContext struct {
	// ctx carries the job's clock (the Evaluator's), set once where the
	// run starts (clock.NewContext): model and tool calls take their
	// contexts from it, so their clients' retry waits (model.RetryPolicy,
	// tool.MCPRetry) are on that clock, and so does what the action
	// calls through Context() directly.
	ctx    context.Context
	host   host
	key    any
	seq    int64
	ev     *Event
	action *Action
	// actionIdx is action's index in the agent.
	actionIdx int
	short     Memory
	sensory   Memory
	sent      []Event
	runID     *RunID
	durable   *durableRun
	// plainCalls counts the durable calls of a run without a store (their
	// positions, for the idempotency keys).
	plainCalls int
	// elog is the operator's event log (nil without listeners);
	// replayedCall says the last durable call returned its recorded
	// result.
	elog         *eventLog
	replayedCall bool
	// tr makes the run's model and tool call spans (nil: tracing off).
	tr *tracing
	// kg is the key's key group; bkey the encoded key, made on the first
	// call a per-key budget counts.
	kg   int
	bkey []byte
	// kstate is the key's *keyState, for Await (nil: the operator takes
	// no answers).
	kstate any
	// waits are the IDs of the waits the run has ended (Await returned
	// their outcome, taken now or recorded before), for the key's ended
	// waits once the run is applied.
	waits []string
}

// Context returns the run's context: cancelled when the operator closes
// (the job ends, fails or is cancelled) and when Options.ActionTimeout
// passes. It carries the job's clock (clock.FromContext). Pass it to
// everything the action waits for.
func (c *RunnerContext) Context() context.Context { return c.ctx }

// Key returns the key whose input the action works on (a K).
func (c *RunnerContext) Key() any { return c.key }

// Seq returns the input's sequence number within its key (0 for the
// key's first input).
func (c *RunnerContext) Seq() int64 { return c.seq }

// ActionName returns the name of the running action.
func (c *RunnerContext) ActionName() string { return c.action.Name }

// Send sends ev when the action finishes successfully: it then triggers
// the actions listening to its type (after the actions already queued for
// this input), or, for an output event, leaves the operator. Events are
// delivered in the order sent. Sending an input event, or one without a
// type, is an error.
func (c *RunnerContext) Send(ev Event) error {
	switch ev.Type {
	case "":
		return fmt.Errorf("agent: action %q sent an event without a type", c.action.Name)
	case TypeInput:
		return fmt.Errorf("agent: action %q sent an input event; only the operator creates those (use another type)", c.action.Name)
	}
	c.sent = append(c.sent, ev)
	return nil
}

// Output sends an output event carrying v: when the action finishes, v
// leaves the operator as an output record with the input's timestamp. v is
// an OUT, or a value that converts to one through JSON.
func (c *RunnerContext) Output(v any) {
	c.sent = append(c.sent, OutputEvent(v))
}

// ShortTerm returns the key's short-term memory: kept across the key's
// inputs and checkpointed.
func (c *RunnerContext) ShortTerm() *Memory { return &c.short }

// Sensory returns the input's sensory memory: shared by the actions of
// this input only, dropped when the input has finished.
func (c *RunnerContext) Sensory() *Memory { return &c.sensory }

// Config returns the agent's configuration.
func (c *RunnerContext) Config() Config { return c.host.agentDef().config }

// Logger returns a logger naming the operator, key, input and action.
func (c *RunnerContext) Logger() *slog.Logger {
	return c.host.log().With("key", c.key, "seq", c.seq, "action", c.action.Name)
}

// Model returns the model named name in Agent.Models.
func (c *RunnerContext) Model(name string) (model.ChatModel, error) {
	a := c.host.agentDef()
	m, ok := a.models[name]
	if !ok {
		return nil, fmt.Errorf("agent: no model named %q; the agent's models are [%s] (add it to Agent.Models)", name, strings.Join(a.modelNames(), ", "))
	}
	return m, nil
}

// Chat calls the model named name with req under the run's context. A
// model's errors (after the model's own retries) come back to the action.
//
// When req asks for structured output (req.ResponseFormat; see
// model.SchemaFor), the reply is validated against the schema and, if it
// does not conform, the model is asked again with the validation error,
// up to ResponseFormat.Attempts calls (model.ChatStructured); the result
// is the first conforming reply (its usage the sum of the calls'), or a
// *model.SchemaError. A reply with tool calls is not validated.
//
// The call is durable (see Durable), named "chat:" + name with req as its
// arguments: with an action-state store its reply (or error) is recorded,
// after validation, and after a restore the re-run of an unfinished action
// gets the recorded reply without calling the model again; a different
// request at the same position is a divergence. The model gets the call's
// idempotency key through model.IdempotencyKey (OpenAIClient and
// AnthropicClient send it as the Idempotency-Key header). Without a store,
// or with Options.NonDurableCalls, it is a plain call without a key;
// calling the model from c.Model directly makes one such call.
//
// Calls made to the model are counted per model name (counters
// modelCalls and modelCallErrors, every attempt of a structured call
// included, and modelInputTokens and modelOutputTokens, label model);
// replayed replies are not counted again.
func (c *RunnerContext) Chat(name string, req model.Request) (*model.Response, error) {
	m, err := c.Model(name)
	if err != nil {
		return nil, err
	}
	m = c.host.modelUsage(name).counted(m, c.host.callStat(chatCallPrefix+name), c.tr != nil)
	if b := c.host.budgetLedger(); b != nil {
		m = b.guard(c, name, m, func(fallback string) (model.ChatModel, error) {
			fm, err := c.Model(fallback)
			if err != nil {
				return nil, err
			}
			return c.host.modelUsage(fallback).counted(fm, c.host.callStat(chatCallPrefix+fallback), c.tr != nil), nil
		})
	}
	if c.tr != nil {
		return c.tr.chat(c, name, req, func() (*model.Response, error) { return c.chatLogged(name, m, req) })
	}
	return c.chatLogged(name, m, req)
}

// chatLogged is Chat's call, logged when the operator has an event log.
func (c *RunnerContext) chatLogged(name string, m model.ChatModel, req model.Request) (*model.Response, error) {
	if c.elog == nil {
		return c.chat(name, m, req)
	}
	e := c.entry(LogModelCall)
	e.Name, e.Data = name, req
	c.elog.emit(e)
	start := c.elog.now()
	resp, err := c.chat(name, m, req)
	e = c.entry(LogModelResult)
	e.Name, e.Replayed, e.DurationMicros = name, c.replayedCall, c.elog.now().Sub(start).Microseconds()
	if err != nil {
		e.Error = err.Error()
	} else {
		e.Data = resp
	}
	c.elog.emit(e)
	return resp, err
}

func (c *RunnerContext) chat(name string, m model.ChatModel, req model.Request) (*model.Response, error) {
	c.replayedCall = false
	if !c.durableCalls() {
		return model.ChatStructured(c.ctx, m, req)
	}
	return Durable(c, chatCallPrefix+name, req, func(ctx context.Context, key string) (*model.Response, error) {
		return model.ChatStructured(model.WithIdempotencyKey(ctx, key), m, req)
	})
}

// Tools returns the agent's tools.
func (c *RunnerContext) Tools() *tool.Set { return c.host.agentDef().tools }

// CallTool calls the tool named name with JSON arguments under the run's
// context. An unknown tool is an IsError result listing the tools there
// are.
//
// The call is durable (see Durable), named "tool:" + name with args as its
// arguments: with an action-state store its result (or error) is recorded,
// and after a restore the re-run of an unfinished action gets the recorded
// result without calling the tool again. The tool gets the call's
// idempotency key through tool.IdempotencyKey (MCP tools send it in the
// request's _meta, tool.MCPIdempotencyMetaKey). Without a store, or with
// Options.NonDurableCalls, it is a plain call without a key; calling
// through c.Tools().Call makes one such call. The tool's context carries
// c (RunnerOf).
func (c *RunnerContext) CallTool(name string, args json.RawMessage) (tool.Result, error) {
	if c.tr != nil {
		return c.tr.callTool(c, name, args, func() (tool.Result, error) { return c.callToolLogged(name, args) })
	}
	return c.callToolLogged(name, args)
}

// callToolLogged is CallTool's call, logged when the operator has an event
// log.
func (c *RunnerContext) callToolLogged(name string, args json.RawMessage) (tool.Result, error) {
	if c.elog == nil {
		return c.callTool(name, args)
	}
	e := c.entry(LogToolCall)
	e.Name, e.Data = name, args
	c.elog.emit(e)
	start := c.elog.now()
	res, err := c.callTool(name, args)
	e = c.entry(LogToolResult)
	e.Name, e.Replayed, e.DurationMicros = name, c.replayedCall, c.elog.now().Sub(start).Microseconds()
	if err != nil {
		e.Error = err.Error()
	} else {
		e.Data = res
		if res.IsError {
			e.Error = res.Content
		}
	}
	c.elog.emit(e)
	return res, err
}

func (c *RunnerContext) callTool(name string, args json.RawMessage) (tool.Result, error) {
	c.replayedCall = false
	tools := c.host.agentDef().tools
	st := c.host.callStat(toolCallPrefix + name)
	if !c.durableCalls() {
		start := c.host.now()
		res, err := tools.Call(withRunner(c.ctx, c), name, args)
		st.record(err != nil || res.IsError, c.host.now().Sub(start))
		return res, err
	}
	return Durable(c, toolCallPrefix+name, toolArgs(args), func(ctx context.Context, key string) (tool.Result, error) {
		start := c.host.now()
		res, err := tools.Call(tool.WithIdempotencyKey(withRunner(ctx, c), key), name, args)
		st.record(err != nil || res.IsError, c.host.now().Sub(start))
		return res, err
	})
}

// durableCalls reports whether Chat and CallTool make durable calls: with a
// store, unless Options.NonDurableCalls. Without a store they are plain
// calls, as cheap as before (no digest, no key).
func (c *RunnerContext) durableCalls() bool {
	return c.durable != nil && !c.host.nonDurableCalls()
}

// The names of the durable calls Chat and CallTool make: the prefix, then
// the model's or tool's name.
const (
	chatCallPrefix = "chat:"
	toolCallPrefix = "tool:"
)

// toolArgs is what identifies a tool call's arguments in its digest:
// the arguments themselves when they are JSON, nothing when empty, and the
// text when it is not JSON (a model wrote it; the tool reports it).
func toolArgs(args json.RawMessage) any {
	switch {
	case len(args) == 0:
		return nil
	case json.Valid(args):
		return args
	default:
		return map[string]string{"invalidJSON": string(args)}
	}
}

// RunID returns the identity of this action run (see RunID). It fails only
// when the event's attributes are not JSON-serialisable or the key cannot
// be encoded.
func (c *RunnerContext) RunID() (RunID, error) {
	if c.runID != nil {
		return *c.runID, nil
	}
	kb, err := c.host.encodeKey(c.key)
	if err != nil {
		return RunID{}, err
	}
	d, err := EventDigest(*c.ev)
	if err != nil {
		return RunID{}, err
	}
	id := RunID{Key: kb, Seq: c.seq, EventID: c.ev.ID, EventType: c.ev.Type, EventDigest: d, Action: c.action.Name}
	c.runID = &id
	return id, nil
}
