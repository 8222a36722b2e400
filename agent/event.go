package agent

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/tool"
)

// The built-in event types. Actions may listen to any type but TypeOutput;
// only the operator creates TypeInput events.
const (
	// TypeInput is the event of one input record; its Value is the
	// record's value (read it with Input).
	TypeInput = "input"
	// TypeOutput events leave the operator as output records, stamped with
	// the timestamp of their input; the Value is the output.
	TypeOutput = "output"
	// TypeChatRequest asks for a chat completion (see NewChatRequest).
	TypeChatRequest = "chat_request"
	// TypeChatResponse carries a model's reply (see NewChatResponse).
	TypeChatResponse = "chat_response"
	// TypeToolRequest asks for a tool call (see NewToolRequest).
	TypeToolRequest = "tool_request"
	// TypeToolResponse carries a tool's result (see NewToolResponse).
	TypeToolResponse = "tool_response"
	// TypeMemoryUpdated is sent by the operator for every short-term
	// memory entry an action's committed writes change, when some action
	// listens to it; the Value is a MemoryUpdate (read it with
	// MemoryUpdateOf). The events belong to the input whose action wrote,
	// after the events that action sent, in the order of the names.
	TypeMemoryUpdated = "memory_updated"
)

// MemoryUpdate is the payload of a TypeMemoryUpdated event: the key, the
// entry's name, and its JSON before and after the write (Old nil: it was
// not set, or had expired; New nil: it was deleted).
type MemoryUpdate struct {
	Key  any             `json:"key"`
	Name string          `json:"name"`
	Old  json.RawMessage `json:"old,omitempty"`
	New  json.RawMessage `json:"new,omitempty"`
}

// MemoryUpdateOf returns the payload of a memory-updated event.
func MemoryUpdateOf(ev Event) (MemoryUpdate, error) { return ValueAs[MemoryUpdate](ev) }

// Event is what actions receive and send: a type, a payload (Value) and
// further named attributes (Attrs), and its lineage. Value and attributes
// must be JSON-serialisable: unfinished work is checkpointed as JSON, and
// after a restore they are what encoding/json decodes (maps, slices,
// float64, ...). Read them with ValueAs, Input or Attr, which accept both
// the original Go value and its decoded JSON form, so actions behave the
// same before and after a restore.
//
// Once sent, an event belongs to the operator: neither the sender nor the
// actions that receive it may modify it, its value or its attributes.
type Event struct {
	// Type selects the actions the event triggers.
	Type string `json:"type"`
	// Value is the event's payload: the input of an input event, the
	// output of an output event, the ChatRequest, ChatResponse,
	// ToolRequest or ToolResponse of the built-in events.
	Value any `json:"value,omitempty"`
	// Attrs are further named attributes (nil when there are none).
	Attrs map[string]any `json:"attrs,omitempty"`
	// ID numbers the event within its input's execution tree: 0 is the
	// input event, later events get 1, 2, ... in the order the operator
	// accepted them. With the key and the input's sequence number it
	// identifies the event. Set by the operator.
	ID int64 `json:"id"`
	// Parent is the ID of the event whose action sent this one (-1 for the
	// input event). Set by the operator.
	Parent int64 `json:"parent"`
	// Action is the name of the action that sent the event ("" for the
	// input event). Set by the operator.
	Action string `json:"action,omitempty"`
}

// NewEvent returns an event of type typ with payload value and the given
// attributes (the map becomes the event's; nil for none).
func NewEvent(typ string, value any, attrs map[string]any) Event {
	return Event{Type: typ, Value: value, Attrs: attrs}
}

// OutputEvent returns an output event carrying v.
func OutputEvent(v any) Event {
	return Event{Type: TypeOutput, Value: v}
}

// ValueAs returns the event's Value as a T: the value itself when it is a
// T, and otherwise the value converted through JSON (as after a restore).
func ValueAs[T any](ev Event) (T, error) {
	return convert[T](ev.Value, "the value", "", ev.Type)
}

// Attr returns attribute name of ev as a T: the value itself when it is a
// T, and otherwise the value converted through JSON (as after a restore).
// A missing attribute is an error naming the attributes there are.
func Attr[T any](ev Event, name string) (T, error) {
	var zero T
	v, ok := ev.Attrs[name]
	if !ok {
		keys := make([]string, 0, len(ev.Attrs))
		for k := range ev.Attrs {
			keys = append(keys, k)
		}
		return zero, fmt.Errorf("agent: event %q has no attribute %q (it has %v)", ev.Type, name, keys)
	}
	return convert[T](v, "attribute", name, ev.Type)
}

// convert returns v as a T, directly or through JSON. what, name and typ
// describe v in errors ("attribute", "text", "chat_request").
func convert[T any](v any, what, name, typ string) (T, error) {
	if t, ok := v.(T); ok {
		return t, nil
	}
	var zero T
	if v == nil {
		if reflect.TypeFor[T]().Kind() == reflect.Interface {
			return zero, nil
		}
	}
	desc := func() string {
		switch {
		case typ == "":
			return what
		case name == "":
			return fmt.Sprintf("%s of event %q", what, typ)
		}
		return fmt.Sprintf("%s %q of event %q", what, name, typ)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("agent: %s is not JSON-serialisable: %w", desc(), err)
	}
	var t T
	if err := json.Unmarshal(b, &t); err != nil {
		return zero, fmt.Errorf("agent: %s (%T) cannot be read as %v: %w", desc(), v, reflect.TypeFor[T](), err)
	}
	return t, nil
}

// Input returns the input value of an input event as an IN.
func Input[IN any](ev Event) (IN, error) { return ValueAs[IN](ev) }

// ChatRequest is the payload of a TypeChatRequest event.
type ChatRequest struct {
	// Model names the model in Agent.Models.
	Model   string        `json:"model"`
	Request model.Request `json:"request"`
}

// ChatResponse is the payload of a TypeChatResponse event.
type ChatResponse struct {
	Model    string         `json:"model"`
	Response model.Response `json:"response"`
	// Error is the call's error text when it failed (Response is then
	// empty).
	Error string `json:"error,omitempty"`
}

// ToolRequest is the payload of a TypeToolRequest event.
type ToolRequest struct {
	Tool      string          `json:"tool"`
	CallID    string          `json:"call_id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolResponse is the payload of a TypeToolResponse event.
type ToolResponse struct {
	Tool   string      `json:"tool"`
	CallID string      `json:"call_id,omitempty"`
	Result tool.Result `json:"result"`
	// Error is the call's error text when the call itself failed.
	Error string `json:"error,omitempty"`
}

// NewChatRequest returns a chat-request event for the model named
// modelName in Agent.Models.
func NewChatRequest(modelName string, req model.Request) Event {
	return Event{Type: TypeChatRequest, Value: ChatRequest{Model: modelName, Request: req}}
}

// NewChatResponse returns a chat-response event.
func NewChatResponse(r ChatResponse) Event {
	return Event{Type: TypeChatResponse, Value: r}
}

// NewToolRequest returns a tool-request event.
func NewToolRequest(r ToolRequest) Event {
	return Event{Type: TypeToolRequest, Value: r}
}

// NewToolResponse returns a tool-response event.
func NewToolResponse(r ToolResponse) Event {
	return Event{Type: TypeToolResponse, Value: r}
}

// ChatRequestOf returns the payload of a chat-request event.
func ChatRequestOf(ev Event) (ChatRequest, error) { return ValueAs[ChatRequest](ev) }

// ChatResponseOf returns the payload of a chat-response event.
func ChatResponseOf(ev Event) (ChatResponse, error) { return ValueAs[ChatResponse](ev) }

// ToolRequestOf returns the payload of a tool-request event.
func ToolRequestOf(ev Event) (ToolRequest, error) { return ValueAs[ToolRequest](ev) }

// ToolResponseOf returns the payload of a tool-response event.
func ToolResponseOf(ev Event) (ToolResponse, error) { return ValueAs[ToolResponse](ev) }
