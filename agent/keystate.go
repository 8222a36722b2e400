package agent

import (
	"encoding/json"
	"fmt"

	"github.com/weirproject/weir/state"

	"go.opentelemetry.io/otel/trace"
)

// keyState is everything the operator keeps per key, in one value state:
// the sequence number of the key's next input, its short-term memory, the
// input in progress (if any) and the inputs waiting behind it. The fields
// without JSON names are runtime bookkeeping, rebuilt after a restore.
type keyState[K comparable, IN any] struct {
	nextSeq int64
	memory  map[string]json.RawMessage
	// expiry holds the deadlines (processing time, ms) of the short-term
	// entries that have a TTL; each has a processing-time timer.
	expiry  map[string]int64
	run     *runState
	pending []pendingInput[IN] // pending[head:] wait, oldest first
	head    int

	key    K
	boxed  any // key as an interface value, made once
	kg     int
	queued bool
	// purgeDue says a TTL timer fired while an action of the key was
	// running: expired entries go when the input finishes.
	purgeDue bool
	// inbox holds the answers (ApplyWithAnswers) the key has received and
	// not used up: untaken ones, and those the input in progress took
	// (dropped when it finishes). Checkpointed.
	inbox []storedAnswer
	// ended holds the IDs of the key's last waits that ended, answered or
	// timed out (at most maxEndedWaits, oldest first). An answer naming
	// one of them comes too late or again (after a restore the answers
	// source reads again what followed the checkpoint, and an action's
	// re-run takes its wait's recorded outcome, not the answer), so no
	// wait will take it: it is dropped when it arrives instead of taking
	// a place in inbox, where it would push out answers still to be
	// taken. Checkpointed.
	ended []string
	// waiter is the wait of the key's running action, registered by Await
	// (nil: none).
	waiter *waiter
}

func (ks *keyState[K, IN]) hasPending() bool { return ks.head < len(ks.pending) }

func (ks *keyState[K, IN]) popPending() pendingInput[IN] {
	p := ks.pending[ks.head]
	ks.pending[ks.head] = pendingInput[IN]{}
	ks.head++
	if ks.head == len(ks.pending) {
		ks.pending, ks.head = ks.pending[:0], 0
	} else if ks.head > 64 && ks.head*2 > len(ks.pending) {
		n := copy(ks.pending, ks.pending[ks.head:])
		clear(ks.pending[n:])
		ks.pending, ks.head = ks.pending[:n], 0
	}
	return p
}

type pendingInput[IN any] struct {
	value IN
	ts    int64
}

// runState is the input in progress: its sequence number and timestamp,
// the queue of (event, action) tasks not finished yet (the first may be
// running), the next event ID and the sensory memory.
type runState struct {
	seq     int64
	ts      int64
	nextID  int64
	tasks   []task // tasks[thead:] are unfinished
	thead   int
	sensory map[string]json.RawMessage
	input   Event   // the input event (so that it needs no allocation of its own)
	first   [2]task // initial storage of tasks
	// span is the input's span (tracing on only), ended in finish.
	span trace.Span
	// known says the store was found holding a run of this input in this
	// attempt (recall): its sequence number is this input's, so a run of
	// it the store does not know is a new branch of its execution tree
	// (an action that failed before succeeds now and sends events), not
	// another input under its sequence number, and discards nothing.
	// Written by the input's action goroutines, one at a time (G2), each
	// started after the previous one's completion was applied.
	known bool
}

type task struct {
	ev     *Event
	action int
}

func (r *runState) popTask() {
	r.tasks[r.thead] = task{}
	r.thead++
}

// The checkpoint form of a keyState (JSON).
type keyStateJSON struct {
	NextSeq int64                      `json:"next_seq"`
	Memory  map[string]json.RawMessage `json:"memory,omitempty"`
	Expiry  map[string]int64           `json:"expiry,omitempty"`
	Run     *runJSON                   `json:"run,omitempty"`
	Pending []pendingJSON              `json:"pending,omitempty"`
	Answers []storedAnswer             `json:"answers,omitempty"`
	Ended   []string                   `json:"ended_waits,omitempty"`
}

type runJSON struct {
	// Input is the input's value (IN's codec). Checkpoints written before
	// it was added lack it; their restored input is taken from its
	// unfinished task, if one is the input event.
	Input   json.RawMessage            `json:"input,omitempty"`
	Seq     int64                      `json:"seq"`
	TS      int64                      `json:"ts"`
	NextID  int64                      `json:"next_id"`
	Tasks   []taskJSON                 `json:"tasks"`
	Sensory map[string]json.RawMessage `json:"sensory,omitempty"`
}

type taskJSON struct {
	Event  Event  `json:"event"`
	Action string `json:"action"`
}

type pendingJSON struct {
	Value json.RawMessage `json:"value"`
	TS    int64           `json:"ts"`
}

// keyStateCodec encodes keyStates for checkpoints. Actions are stored by
// name, so a restore finds them even if the agent's actions were
// reordered.
type keyStateCodec[K comparable, IN any] struct {
	def *compiled
	in  state.Codec[IN]
}

func (c keyStateCodec[K, IN]) Append(dst []byte, ks *keyState[K, IN]) ([]byte, error) {
	j := keyStateJSON{NextSeq: ks.nextSeq, Memory: ks.memory, Expiry: ks.expiry, Answers: ks.inbox, Ended: ks.ended}
	for _, p := range ks.pending[ks.head:] {
		b, err := c.in.Append(nil, p.value)
		if err != nil {
			return dst, fmt.Errorf("agent: cannot checkpoint a pending input of key %v: %w", ks.key, err)
		}
		j.Pending = append(j.Pending, pendingJSON{Value: b, TS: p.ts})
	}
	if r := ks.run; r != nil {
		rj := &runJSON{Seq: r.seq, TS: r.ts, NextID: r.nextID, Sensory: r.sensory}
		// The input itself, so that a restored input that fails is sent to
		// FailedInputs with its value (G8), not nil.
		if v, ok := r.input.Value.(IN); ok {
			b, err := c.in.Append(nil, v)
			if err != nil {
				return dst, fmt.Errorf("agent: cannot checkpoint the input in progress of key %v: %w", ks.key, err)
			}
			rj.Input = b
		}
		for _, t := range r.tasks[r.thead:] {
			rj.Tasks = append(rj.Tasks, taskJSON{Event: *t.ev, Action: c.def.actions[t.action].Name})
		}
		j.Run = rj
	}
	b, err := json.Marshal(j)
	if err != nil {
		return dst, fmt.Errorf("agent: cannot checkpoint the unfinished work of key %v: %w (event attributes and memory values must be JSON-serialisable)", ks.key, err)
	}
	return append(dst, b...), nil
}

func (c keyStateCodec[K, IN]) Decode(src []byte) (*keyState[K, IN], error) {
	var j keyStateJSON
	if err := json.Unmarshal(src, &j); err != nil {
		return nil, fmt.Errorf("agent: corrupt checkpointed key state: %w", err)
	}
	ks := &keyState[K, IN]{nextSeq: j.NextSeq, memory: j.Memory, expiry: j.Expiry, inbox: j.Answers, ended: j.Ended}
	for _, p := range j.Pending {
		v, err := c.in.Decode(p.Value)
		if err != nil {
			return nil, fmt.Errorf("agent: checkpointed pending input does not decode: %w", err)
		}
		ks.pending = append(ks.pending, pendingInput[IN]{value: v, ts: p.TS})
	}
	if rj := j.Run; rj != nil {
		r := &runState{seq: rj.Seq, ts: rj.TS, nextID: rj.NextID, sensory: rj.Sensory}
		r.input = Event{Type: TypeInput, Parent: -1}
		if len(rj.Input) > 0 {
			v, err := c.in.Decode(rj.Input)
			if err != nil {
				return nil, fmt.Errorf("agent: checkpointed input in progress does not decode: %w", err)
			}
			r.input.Value = v
		} else {
			for _, t := range rj.Tasks {
				if t.Event.Type == TypeInput && t.Event.Parent < 0 {
					if v, err := ValueAs[IN](t.Event); err == nil {
						r.input.Value = v
					}
					break
				}
			}
		}
		evs := map[int64]*Event{}
		for _, t := range rj.Tasks {
			ai, ok := c.def.byName[t.Action]
			if !ok {
				return nil, fmt.Errorf("agent: the checkpoint has unfinished work for action %q, which the agent no longer has; restore with an agent that has it, or drain the job before removing it", t.Action)
			}
			ev := evs[t.Event.ID]
			if ev == nil {
				e := t.Event
				ev = &e
				evs[e.ID] = ev
			}
			r.tasks = append(r.tasks, task{ev: ev, action: ai})
		}
		ks.run = r
	}
	return ks, nil
}
