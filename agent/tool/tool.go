package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/weirproject/weir/agent/model"
)

// Tool is something a model (or an action) can call with JSON arguments.
// Call must be safe for concurrent use.
type Tool interface {
	// Spec describes the tool to models: name, description and the JSON
	// Schema of its arguments.
	Spec() model.ToolSpec
	// Call runs the tool. A failure the model should see and react to (bad
	// arguments, "not found") is a Result with IsError; an error return is
	// for failures of the call itself (the server is down).
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is what a tool call returned.
type Result struct {
	// Content is the text shown to the model.
	Content string `json:"content"`
	// Structured is the result as a JSON value, when the tool has one.
	Structured json.RawMessage `json:"structured,omitempty"`
	// IsError says the call failed in a way the model should see.
	IsError bool `json:"is_error,omitempty"`
}

// Errorf returns a Result with IsError set and the formatted message.
func Errorf(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// FuncTool is a Go function exposed as a tool, with the JSON Schema of its
// argument type A inferred (github.com/google/jsonschema-go: exported fields
// by their json names, `jsonschema:"..."` tags as descriptions, fields
// without omitempty required). Arguments are validated against the schema
// before the function runs; invalid arguments give an IsError result that
// says what is wrong, so a model can correct itself.
type FuncTool[A, R any] struct {
	spec     model.ToolSpec
	resolved *jsonschema.Resolved
	f        func(ctx context.Context, args A) (R, error)
}

// Func returns a tool named name that calls f. The result R becomes the
// Result's Content (a string as is, anything else as JSON) and, unless R is
// a string, its Structured value. An error from f becomes an IsError
// result with the error's text: the model sees it. A is typically a struct;
// its schema must be an object schema.
func Func[A, R any](name, description string, f func(ctx context.Context, args A) (R, error)) (*FuncTool[A, R], error) {
	if name == "" {
		return nil, fmt.Errorf("tool: a tool needs a name")
	}
	s, err := jsonschema.For[A](nil)
	if err != nil {
		return nil, fmt.Errorf("tool %q: cannot infer the JSON Schema of %v: %w (use a struct of JSON-serialisable fields, or New with a hand-written schema)", name, reflect.TypeFor[A](), err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("tool %q: arguments must be a JSON object, but %v has schema type %q; wrap it in a struct", name, reflect.TypeFor[A](), s.Type)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", name, err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", name, err)
	}
	return &FuncTool[A, R]{spec: model.ToolSpec{Name: name, Description: description, Parameters: raw}, resolved: rs, f: f}, nil
}

// MustFunc is Func that panics on error, for package-level tool variables.
func MustFunc[A, R any](name, description string, f func(ctx context.Context, args A) (R, error)) *FuncTool[A, R] {
	t, err := Func(name, description, f)
	if err != nil {
		panic(err)
	}
	return t
}

// Spec implements Tool.
func (t *FuncTool[A, R]) Spec() model.ToolSpec { return t.spec }

// Call implements Tool.
func (t *FuncTool[A, R]) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var generic any
	if err := json.Unmarshal(args, &generic); err != nil {
		return Errorf("invalid arguments for %s: not JSON: %v", t.spec.Name, err), nil
	}
	if err := t.resolved.Validate(generic); err != nil {
		return Errorf("invalid arguments for %s: %v", t.spec.Name, err), nil
	}
	var a A
	if err := json.Unmarshal(args, &a); err != nil {
		return Errorf("invalid arguments for %s: %v", t.spec.Name, err), nil
	}
	r, err := t.f(ctx, a)
	if err != nil {
		return Result{Content: err.Error(), IsError: true}, nil
	}
	if s, ok := any(r).(string); ok {
		return Result{Content: s}, nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return Result{}, fmt.Errorf("tool %q: result is not JSON-serialisable: %w", t.spec.Name, err)
	}
	return Result{Content: string(b), Structured: b}, nil
}

// Raw is a tool with a hand-written spec and a function of raw JSON
// arguments.
type Raw struct {
	ToolSpec model.ToolSpec
	Fn       func(ctx context.Context, args json.RawMessage) (Result, error)
}

// Spec implements Tool.
func (r Raw) Spec() model.ToolSpec { return r.ToolSpec }

// Call implements Tool.
func (r Raw) Call(ctx context.Context, args json.RawMessage) (Result, error) { return r.Fn(ctx, args) }

// Set is a set of tools by name.
type Set struct {
	byName map[string]Tool
	names  []string
}

// NewSet returns the set of tools; names must be unique and non-empty.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{byName: map[string]Tool{}}
	for _, t := range tools {
		if err := s.Add(t); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add adds t; a duplicate or empty name is an error.
func (s *Set) Add(t Tool) error {
	name := t.Spec().Name
	if name == "" {
		return fmt.Errorf("tool: a tool without a name (%T)", t)
	}
	if _, dup := s.byName[name]; dup {
		return fmt.Errorf("tool: two tools are named %q; tool names must be unique", name)
	}
	if s.byName == nil {
		s.byName = map[string]Tool{}
	}
	s.byName[name] = t
	s.names = append(s.names, name)
	sort.Strings(s.names)
	return nil
}

// Get returns the tool named name.
func (s *Set) Get(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.byName[name]
	return t, ok
}

// Names returns the tool names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.names...)
}

// Specs returns the specs of every tool, sorted by name (what a chat
// request lists).
func (s *Set) Specs() []model.ToolSpec {
	if s == nil {
		return nil
	}
	out := make([]model.ToolSpec, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.byName[n].Spec())
	}
	return out
}

// Call calls the tool named name; an unknown name is an IsError result
// listing the tools there are (the model asked for something that does not
// exist and should be told).
func (s *Set) Call(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	t, ok := s.Get(name)
	if !ok {
		return Errorf("no tool named %q; the tools are: %s", name, strings.Join(s.Names(), ", ")), nil
	}
	return t.Call(ctx, args)
}
