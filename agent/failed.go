package agent

import (
	"fmt"
	"strings"

	"github.com/weirproject/weir/runtime"
)

// FailedInput is an input one of whose actions failed under
// Options.ContinueOnError (an error, a panic, a time-out, or its trigger
// condition failing), sent to Options.FailedInputs with the input's
// timestamp so that the job can route it (to a dead-letter topic, a file)
// instead of losing it. One is sent per failed action run: an input whose
// two actions fail is reported twice, each with its action. The input goes
// on with its remaining actions all the same (I8).
type FailedInput struct {
	// Operator and Subtask name the agent operator's subtask.
	Operator string
	Subtask  int
	// Key is the input's key, as fmt.Sprint prints it.
	Key string
	// Seq is the input's sequence number within its key; with Key it
	// identifies the input (the event log's entries carry both).
	Seq int64
	// Action is the failed action's name; EventID and EventType name the
	// event that triggered it within the input's execution tree.
	Action    string
	EventID   int64
	EventType string
	// RunID is the failed run's identity (RunID.String), the trace id of
	// its entries in the event log and of its idempotency keys; "" when it
	// cannot be computed (a key the codec cannot encode).
	RunID string
	// Input is the input's value (an IN of Apply; the receiver owns it
	// and must not modify it: the operator may still hold it).
	Input any
	// Err is the failure.
	Err error
}

// Reason is the failure as one line: the action, the key and input, the
// event, and the error's first line (a panic's stack is left out).
func (f FailedInput) Reason() string {
	msg := "<nil>"
	if f.Err != nil {
		msg, _, _ = strings.Cut(f.Err.Error(), "\n")
	}
	return fmt.Sprintf("agent: action %q failed for key %s (input %d, event %d %q): %s", f.Action, f.Key, f.Seq, f.EventID, f.EventType, msg)
}

// failedInputs sends the failed inputs of a subtask to
// Options.FailedInputs and counts them (counter failedInputs); with no
// tag they are counted only.
type failedInputs struct {
	out      runtime.Output[FailedInput] // nil: not routed
	count    *runtime.Counter
	operator string
	subtask  int
}

func (f *failedInputs) open(ctx *runtime.Context, tag *runtime.OutputTag[FailedInput]) {
	if tag != nil {
		f.out = runtime.SideOutput(ctx, tag)
	}
	f.count = ctx.Counter("failedInputs")
	f.operator, f.subtask = ctx.Name, ctx.Subtask
}

// send reports that action a failed with err on ev of the key's running
// input r (on the subtask goroutine).
func (o *operator[K, IN, OUT]) sendFailed(key K, r *runState, a *Action, ev *Event, err error) {
	f := &o.failed
	f.count.Inc()
	if f.out == nil {
		return
	}
	fi := FailedInput{Operator: f.operator, Subtask: f.subtask, Key: fmt.Sprint(key), Seq: r.seq,
		Action: a.Name, EventID: ev.ID, EventType: ev.Type, Input: r.input.Value, Err: err}
	if kb, kerr := o.kc.Append(nil, key); kerr == nil {
		if d, derr := EventDigest(*ev); derr == nil {
			fi.RunID = RunID{Key: kb, Seq: r.seq, EventID: ev.ID, EventType: ev.Type, EventDigest: d, Action: a.Name}.String()
		}
	}
	f.out.Collect(runtime.Record[FailedInput]{Value: fi, Timestamp: r.ts})
}
