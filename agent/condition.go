package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Trigger conditions are CEL expressions (https://cel.dev) over the event,
// the variable event, of type weir.agent.Event with the fields
//
//	event.type    string  the event type
//	event.value   dyn     the payload, as JSON (maps, lists, numbers, ...)
//	event.attrs   map     the attributes, as JSON
//	event.id      int     the event's ID within its input
//	event.parent  int     the ID of the event whose action sent it
//	event.action  string  the action that sent it ("" for the input event)
//
// for example `event.type == "Order" && event.value.amount > 100`. The
// payload and attributes are seen in their JSON form (a struct as the map
// it encodes to), the form they have after a restore, so a condition
// selects the same events before and after one. An unknown field of
// event, a syntax error or a result that is not a bool are errors when
// the agent is applied; a field the payload lacks is an error when the
// condition runs (test it first with has(event.value.field)).

// eventTypeName is the CEL type of the variable event.
const eventTypeName = "weir.agent.Event"

// ConditionError is a trigger condition that does not compile: Line and
// Column (1-based) locate the first problem inside the expression.
type ConditionError struct {
	Line, Column int
	// Msg is CEL's message for the first problem.
	Msg string
	// Err is CEL's full report (every problem, with snippets).
	Err error
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("condition: %s (at %d:%d of the expression)", e.Msg, e.Line, e.Column)
}

func (e *ConditionError) Unwrap() error { return e.Err }

// condition is a compiled trigger condition; its program is safe for
// concurrent use.
type condition struct {
	src string
	prg cel.Program
}

// CheckCondition compiles and type-checks the trigger condition src (see
// Action.When) and returns the error it has, a *ConditionError, or nil.
func CheckCondition(src string) error {
	_, err := compileCondition(src)
	return err
}

var (
	condEnv    *cel.Env
	condEnvErr error
)

func init() {
	reg, err := types.NewRegistry()
	if err != nil {
		condEnvErr = err
		return
	}
	condEnv, condEnvErr = cel.NewEnv(
		cel.CustomTypeProvider(&eventProvider{Provider: reg}),
		cel.CustomTypeAdapter(reg),
		cel.Variable("event", types.NewObjectType(eventTypeName)),
	)
}

func compileCondition(src string) (*condition, error) {
	if condEnvErr != nil {
		return nil, fmt.Errorf("agent: the CEL environment: %w", condEnvErr)
	}
	if strings.TrimSpace(src) == "" {
		return nil, &ConditionError{Line: 1, Column: 1, Msg: "empty expression; write a CEL condition such as event.value.amount > 100, or leave When unset"}
	}
	ast, iss := condEnv.Compile(src)
	if iss != nil && iss.Err() != nil {
		ce := &ConditionError{Line: 1, Column: 1, Msg: iss.Err().Error(), Err: iss.Err()}
		if errs := iss.Errors(); len(errs) > 0 {
			ce.Msg = errs[0].Message
			if loc := errs[0].Location; loc != nil && loc.Line() > 0 {
				ce.Line, ce.Column = loc.Line(), loc.Column()+1
			}
		}
		return nil, ce
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, &ConditionError{Line: 1, Column: 1, Msg: fmt.Sprintf("the condition is a %s, not a bool; compare it (e.g. == or >) or combine it with && and ||", t)}
	}
	prg, err := condEnv.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, &ConditionError{Line: 1, Column: 1, Msg: err.Error(), Err: err}
	}
	return &condition{src: src, prg: prg}, nil
}

// eventActivation resolves the variable event to the event being tested.
// The operator keeps one per subtask, so that a test allocates nothing of
// its own.
type eventActivation struct{ ev *Event }

func (a *eventActivation) ResolveName(name string) (any, bool) {
	if name == "event" {
		return a.ev, true
	}
	return nil, false
}

func (a *eventActivation) Parent() interpreter.Activation { return nil }

// match reports whether ev meets the condition; act is the caller's
// activation (one per goroutine).
func (c *condition) match(act *eventActivation, ev *Event) (bool, error) {
	act.ev = ev
	out, _, err := c.prg.Eval(act)
	act.ev = nil
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the condition returned %v (a %s), not a bool", out, out.Type())
	}
	return bool(b), nil
}

// eventProvider adds the type of the variable event to CEL's registry.
type eventProvider struct{ types.Provider }

type eventField struct {
	t   *types.Type
	get func(*Event) (any, error)
}

var eventFields = map[string]eventField{
	"type":   {types.StringType, func(e *Event) (any, error) { return e.Type, nil }},
	"value":  {types.DynType, func(e *Event) (any, error) { return jsonForm(e.Value, "the value") }},
	"attrs":  {types.NewMapType(types.StringType, types.DynType), func(e *Event) (any, error) { return attrsForm(e.Attrs) }},
	"id":     {types.IntType, func(e *Event) (any, error) { return e.ID, nil }},
	"parent": {types.IntType, func(e *Event) (any, error) { return e.Parent, nil }},
	"action": {types.StringType, func(e *Event) (any, error) { return e.Action, nil }},
}

var eventFieldNames = []string{"action", "attrs", "id", "parent", "type", "value"}

func (p *eventProvider) FindStructType(name string) (*types.Type, bool) {
	if name == eventTypeName {
		return types.NewTypeTypeWithParam(types.NewObjectType(eventTypeName)), true
	}
	return p.Provider.FindStructType(name)
}

func (p *eventProvider) FindStructFieldNames(name string) ([]string, bool) {
	if name == eventTypeName {
		return eventFieldNames, true
	}
	return p.Provider.FindStructFieldNames(name)
}

func (p *eventProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if name != eventTypeName {
		return p.Provider.FindStructFieldType(name, field)
	}
	f, ok := eventFields[field]
	if !ok {
		return nil, false
	}
	return &types.FieldType{
		Type: f.t,
		IsSet: func(target any) bool {
			_, ok := target.(*Event)
			return ok
		},
		GetFrom: func(target any) (any, error) {
			e, ok := target.(*Event)
			if !ok {
				return nil, fmt.Errorf("agent: condition: %T is not an event", target)
			}
			return f.get(e)
		},
	}, true
}

func (p *eventProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if name == eventTypeName {
		return types.NewErr("agent: condition: events cannot be created in a condition")
	}
	return p.Provider.NewValue(name, fields)
}

// jsonForm returns v as encoding/json would decode it (numbers as they
// are: CEL compares ints and doubles by value): v itself when it is made
// of JSON types already (no allocation), else v through JSON. what names
// v in errors.
func jsonForm(v any, what string) (any, error) {
	if isJSONForm(v, 0) {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s (%T) is not JSON-serialisable: %w", what, v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// noAttrs stands for nil attributes (read only).
var noAttrs = map[string]any{}

func attrsForm(m map[string]any) (any, error) {
	if m == nil {
		return noAttrs, nil
	}
	return jsonForm(m, "the attributes")
}

// isJSONForm reports whether v consists of the types CEL reads directly:
// those encoding/json decodes into, and Go's integers.
func isJSONForm(v any, depth int) bool {
	if depth > 32 {
		return false
	}
	switch x := v.(type) {
	case nil, bool, string, float64, float32, int, int64, int32, uint, uint64, uint32:
		return true
	case map[string]any:
		for _, e := range x {
			if !isJSONForm(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !isJSONForm(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// conditionFailed wraps an error of a condition at run time.
func conditionFailed(act *Action, ev *Event, err error) error {
	return fmt.Errorf("agent: the condition of action %q (%s) failed on event %d %q: %w; guard fields the event may lack with has(), e.g. has(event.value.amount) && event.value.amount > 100",
		act.Name, act.When, ev.ID, ev.Type, err)
}
