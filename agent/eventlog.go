package agent

import (
	"encoding/json"
	"fmt"
	"time"
)

// The kinds of log entries (LogEntry.Kind).
const (
	// LogActionStart: an action run starts (Data: the triggering event).
	LogActionStart = "action_start"
	// LogActionEnd: it returned without error (DurationMicros set).
	LogActionEnd = "action_end"
	// LogActionError: it returned an error or panicked (Error set). The
	// operator then fails the job, or with Options.ContinueOnError skips
	// the action.
	LogActionError = "action_error"
	// LogActionReplayed: after a restore, a completed run was found in the
	// action-state store; its effects are applied from there and the
	// action is not called (Replayed is true).
	LogActionReplayed = "action_replayed"
	// LogModelCall and LogModelResult: a call through RunnerContext.Chat
	// (Name: the model; Data: the request, then the response) and its
	// result or error.
	LogModelCall   = "model_call"
	LogModelResult = "model_result"
	// LogToolCall and LogToolResult: a call through RunnerContext.CallTool
	// (Name: the tool; Data: the arguments, then the result).
	LogToolCall   = "tool_call"
	LogToolResult = "tool_result"
	// LogOutput: an output event left the operator (Data: its value).
	LogOutput = "output"
	// LogMemory: an action's writes to short-term memory were committed
	// (Name: "short-term"; Data: the names written, with their new JSON
	// values, null for a deleted name).
	LogMemory = "memory_update"
)

// LogEntry is one entry of an agent's event log: what happened to one
// action run of one key. Key, Seq, EventID and Action identify the run (as
// RunID does), so a reader can follow a key's execution trees and tell
// repeated entries apart.
//
// Entries are made on the goroutine where the thing happened (the action's
// for starts, ends, calls and results; the subtask's for outputs, memory
// updates and replays) and handed to the listeners there; Data and the
// entry belong to the listener once given (it must not modify them, the
// operator does not either).
type LogEntry struct {
	// TimeMs is the job clock's time of the entry, Unix milliseconds.
	TimeMs int64 `json:"timeMs"`
	// Operator and Subtask name the agent operator's subtask.
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
	// Key is the key, as fmt.Sprint prints it.
	Key string `json:"key"`
	// Seq is the input's sequence number within its key.
	Seq int64 `json:"seq"`
	// EventID and EventType are the triggering event's ID within the
	// input's execution tree and its type.
	EventID   int64  `json:"eventId"`
	EventType string `json:"eventType,omitempty"`
	// Action is the action's name.
	Action string `json:"action"`
	// Kind is one of the Log... constants.
	Kind string `json:"kind"`
	// Name is the model or tool of a call or result, the memory of a
	// memory update.
	Name string `json:"name,omitempty"`
	// Data is the entry's payload (see the kinds); any JSON-serialisable
	// value.
	Data any `json:"data,omitempty"`
	// Error is the error's text of a failed action or call.
	Error string `json:"error,omitempty"`
	// DurationMicros is the run's or call's duration on the job's clock
	// (ends, errors and results).
	DurationMicros int64 `json:"durationMicros,omitempty"`
	// Replayed says the entry's result was taken from the action-state
	// store after a restore, not produced again: a completed action
	// replayed, the outputs it re-emits, a call of a re-run action
	// answered with its recorded result.
	Replayed bool `json:"replayed,omitempty"`
}

// String is a one-line summary of the entry.
func (e LogEntry) String() string {
	s := fmt.Sprintf("%s %s[%d] key=%s seq=%d event=%d(%s) action=%s %s",
		time.UnixMilli(e.TimeMs).UTC().Format("2006-01-02T15:04:05.000Z"), e.Operator, e.Subtask, e.Key, e.Seq, e.EventID, e.EventType, e.Action, e.Kind)
	if e.Name != "" {
		s += " " + e.Name
	}
	if e.Replayed {
		s += " (replayed)"
	}
	if e.DurationMicros > 0 {
		s += fmt.Sprintf(" %dµs", e.DurationMicros)
	}
	if e.Error != "" {
		s += " error: " + e.Error
	}
	if e.Data != nil {
		if b, err := json.Marshal(e.Data); err == nil {
			if len(b) > 200 {
				b = append(b[:200:200], "..."...)
			}
			s += " " + string(b)
		}
	}
	return s
}

// Listener receives the entries of an agent's event log
// (Options.Listeners). OnEntry is called for every entry, from the action
// goroutines and the subtask goroutine concurrently: it must be safe for
// concurrent use, and it should be quick (it runs inside the action or
// between records; a slow listener slows the operator). It cannot fail
// the job: a listener that can fail keeps its error and reports it from
// Flush.
//
// A listener that also implements Flusher is flushed when the operator
// takes a checkpoint, finishes its input and closes, so that a log file
// holds, at every completed checkpoint, the entries of everything the
// checkpoint covers.
type Listener interface {
	OnEntry(e *LogEntry)
}

// Flusher is implemented by listeners that buffer: Flush writes what they
// hold and returns the first write error they met (which the operator
// logs as a warning; the log is an observation, not part of the job's
// output).
type Flusher interface {
	Flush() error
}

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(e *LogEntry)

// OnEntry calls f.
func (f ListenerFunc) OnEntry(e *LogEntry) { f(e) }

// eventLog is the operator's side of the event log: the listeners, and
// what every entry of the subtask shares. Nil when there are none (every
// method is then a nil check).
type eventLog struct {
	listeners []Listener
	operator  string
	subtask   int
	now       func() time.Time
}

func (l *eventLog) emit(e *LogEntry) {
	e.TimeMs = l.now().UnixMilli()
	e.Operator, e.Subtask = l.operator, l.subtask
	for _, x := range l.listeners {
		x.OnEntry(e)
	}
}

// flush flushes every listener that buffers and returns the first error.
func (l *eventLog) flush() error {
	if l == nil {
		return nil
	}
	var first error
	for _, x := range l.listeners {
		if f, ok := x.(Flusher); ok {
			if err := f.Flush(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// entry returns an entry for the run of c, of the given kind.
func (c *RunnerContext) entry(kind string) *LogEntry {
	return &LogEntry{Key: fmt.Sprint(c.key), Seq: c.seq, EventID: c.ev.ID, EventType: c.ev.Type, Action: c.action.Name, Kind: kind}
}
