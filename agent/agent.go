package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
)

// Agent is a set of actions with the models, tools and configuration they
// use. One Agent value may be applied to several streams; it must not be
// modified once applied.
type Agent struct {
	// Actions, in the order in which actions listening to the same event
	// type run.
	Actions []Action
	// Models by name, for RunnerContext.Chat and chat-request events.
	Models map[string]model.ChatModel
	// Tools, for RunnerContext.CallTool and tool-request events; names must
	// be unique.
	Tools []tool.Tool
	// Config is read-only configuration the actions read with
	// RunnerContext.Config.
	Config Config
}

// Action is a named function run for every event of the types it listens
// to. Run gets the event and a context through which it sends events,
// reads and writes memory, and calls models and tools. It runs on its own
// goroutine, never on the subtask goroutine; a returned error (or panic)
// fails the job unless Options.ContinueOnError is set.
type Action struct {
	// Name identifies the action; it is part of action-run identities and
	// of checkpoints of unfinished inputs, so keep it stable.
	Name string
	// On lists the event types the action listens to.
	On []string
	// When, if set, is a CEL condition over the event (see CheckCondition
	// and docs/agents.md): the action runs only for the events of its On
	// types for which it is true, e.g. `event.value.amount > 100`. It is
	// compiled and type-checked when the agent is applied, and evaluated
	// on the subtask goroutine for every event of those types.
	When string
	// Run is the action's code.
	Run func(ctx *RunnerContext, ev Event) error
}

// NewAction returns an action named name running run for events of the
// given types.
func NewAction(name string, run func(ctx *RunnerContext, ev Event) error, on ...string) Action {
	return Action{Name: name, On: on, Run: run}
}

// WithCondition returns a copy of a with the trigger condition cond (see
// Action.When).
func (a Action) WithCondition(cond string) Action {
	a.When = cond
	return a
}

// Config is an agent's read-only configuration.
type Config map[string]any

// Value returns the value of name.
func (c Config) Value(name string) (any, bool) {
	v, ok := c[name]
	return v, ok
}

// String returns the value of name if it is a string, else def.
func (c Config) String(name, def string) string {
	if s, ok := c[name].(string); ok {
		return s
	}
	return def
}

// Int returns the value of name if it is a number, else def.
func (c Config) Int(name string, def int) int {
	switch v := c[name].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return int(n)
		}
	}
	return def
}

// Decode converts the value of name into dst (a pointer) through JSON and
// reports whether name is set.
func (c Config) Decode(name string, dst any) (bool, error) {
	v, ok := c[name]
	if !ok {
		return false, nil
	}
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, dst)
	}
	if err != nil {
		return true, fmt.Errorf("agent: config %q (%T) does not decode into %T: %w", name, v, dst, err)
	}
	return true, nil
}

// compiled is an Agent checked and indexed for the operator.
type compiled struct {
	actions []*Action
	// conds holds the compiled condition of each action (nil: none).
	conds    []*condition
	byName   map[string]int
	byType   map[string][]int
	models   map[string]model.ChatModel
	tools    *tool.Set
	config   Config
	listened map[string]bool
}

func compile(a *Agent) (*compiled, error) {
	if a == nil {
		return nil, fmt.Errorf("agent: nil agent")
	}
	c := &compiled{byName: map[string]int{}, byType: map[string][]int{}, models: a.Models, config: a.Config}
	if len(a.Actions) == 0 {
		return nil, fmt.Errorf("agent: the agent has no actions; add at least one listening to %q", TypeInput)
	}
	for i := range a.Actions {
		act := &a.Actions[i]
		if act.Name == "" {
			return nil, fmt.Errorf("agent: action %d has no name", i)
		}
		if _, dup := c.byName[act.Name]; dup {
			return nil, fmt.Errorf("agent: two actions are named %q; action names must be unique", act.Name)
		}
		if act.Run == nil {
			return nil, fmt.Errorf("agent: action %q has no Run function", act.Name)
		}
		if len(act.On) == 0 {
			return nil, fmt.Errorf("agent: action %q listens to no event type; set On (e.g. %q)", act.Name, TypeInput)
		}
		var cond *condition
		if act.When != "" {
			var err error
			if cond, err = compileCondition(act.When); err != nil {
				return nil, fmt.Errorf("agent: action %q: %w", act.Name, err)
			}
		}
		c.byName[act.Name] = len(c.actions)
		for _, t := range act.On {
			if t == TypeOutput {
				return nil, fmt.Errorf("agent: action %q listens to %q, but output events leave the operator; listen to another type", act.Name, TypeOutput)
			}
			if t == "" {
				return nil, fmt.Errorf("agent: action %q listens to an empty event type", act.Name)
			}
			if !slices.Contains(c.byType[t], len(c.actions)) {
				c.byType[t] = append(c.byType[t], len(c.actions))
			}
		}
		c.actions = append(c.actions, act)
		c.conds = append(c.conds, cond)
	}
	ts, err := tool.NewSet(a.Tools...)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	c.tools = ts
	for name, m := range a.Models {
		if m == nil {
			return nil, fmt.Errorf("agent: model %q is nil", name)
		}
	}
	return c, nil
}

func (c *compiled) modelNames() []string { return slices.Sorted(maps.Keys(c.models)) }
