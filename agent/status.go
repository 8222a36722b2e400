package agent

import (
	"context"
	"sort"
	"sync"

	"github.com/weirproject/weir/runtime"
)

// SubtaskStatus describes one subtask of an agent operator: its work in
// progress and the watermarks it holds back, with the keys holding the
// oldest (what a dashboard shows, and what to look at when event time
// stalls).
type SubtaskStatus struct {
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
	// HeldWatermarks is the number of watermarks (and idle-status changes)
	// waiting for earlier inputs to finish.
	HeldWatermarks int `json:"heldWatermarks"`
	// OldestHeldWatermark is the oldest held watermark's value (when
	// OldestHeldIsStatus is false) and OldestHeldAgeMs how long it has
	// waited.
	OldestHeldWatermark int64 `json:"oldestHeldWatermark,omitempty"`
	OldestHeldIsStatus  bool  `json:"oldestHeldIsStatus,omitempty"`
	OldestHeldAgeMs     int64 `json:"oldestHeldAgeMs,omitempty"`
	// OldestHeldBy lists up to 20 keys whose unfinished inputs hold the
	// oldest watermark back (sorted by key), and OldestHeldByCount how many
	// keys there are in all.
	OldestHeldBy      []HeldKey `json:"oldestHeldBy,omitempty"`
	OldestHeldByCount int       `json:"oldestHeldByCount,omitempty"`
	// RunningKeys is the number of keys with an input in progress,
	// WaitingInputs the inputs accepted but not started, InFlightInputs
	// the inputs accepted but not finished.
	RunningKeys    int `json:"runningKeys"`
	WaitingInputs  int `json:"waitingInputs"`
	InFlightInputs int `json:"inFlightInputs"`
	// PendingWaits lists the waits of actions (Await) not answered yet,
	// soonest deadline first: what a dashboard shows as pending approvals.
	PendingWaits []PendingWait `json:"pendingWaits,omitempty"`
}

// HeldKey is a key holding a watermark back, with its number of unfinished
// inputs from before the watermark.
type HeldKey struct {
	Key    string `json:"key"`
	Inputs int    `json:"inputs"`
}

func sortHeld(h []HeldKey) { sort.Slice(h, func(i, j int) bool { return h[i].Key < h[j].Key }) }

// registration is one running subtask in the status registry.
type registration struct {
	name    string
	subtask int
	mb      *runtime.Mailbox
	status  func() SubtaskStatus
}

var registry struct {
	sync.Mutex
	m map[*registration]struct{}
}

func register(name string, subtask int, mb *runtime.Mailbox, status func() SubtaskStatus) *registration {
	r := &registration{name: name, subtask: subtask, mb: mb, status: status}
	registry.Lock()
	defer registry.Unlock()
	if registry.m == nil {
		registry.m = map[*registration]struct{}{}
	}
	registry.m[r] = struct{}{}
	return r
}

func (r *registration) unregister() {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.m, r)
}

// Status returns the status of every running subtask of the agent
// operators named operator in this process (all agent operators when
// operator is ""), sorted by operator and subtask. Each subtask computes
// its status on its own goroutine, between records; Status waits for the
// answers until ctx is done, and leaves out the subtasks that did not
// answer by then (a subtask stuck in a blocking action, say).
func Status(ctx context.Context, operator string) []SubtaskStatus {
	registry.Lock()
	var regs []*registration
	for r := range registry.m {
		if operator == "" || r.name == operator {
			regs = append(regs, r)
		}
	}
	registry.Unlock()
	ch := make(chan SubtaskStatus, len(regs))
	for _, r := range regs {
		r.mb.Post(func() { ch <- r.status() })
	}
	var out []SubtaskStatus
wait:
	for range regs {
		select {
		case s := <-ch:
			out = append(out, s)
		case <-ctx.Done():
			break wait
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Operator != out[j].Operator {
			return out[i].Operator < out[j].Operator
		}
		return out[i].Subtask < out[j].Subtask
	})
	return out
}
