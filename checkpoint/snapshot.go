package checkpoint

import (
	"fmt"
	"sort"
)

// FormatVersion is the newest version of the snapshot format: 2 adds
// native keyed state (SubtaskState.Native). Write writes version 1 when a
// snapshot has no native state, so savepoints stay readable by older
// builds; Read accepts versions 1 to FormatVersion.
const FormatVersion = 2

// Kind tells checkpoints and savepoints apart.
type Kind string

const (
	// KindCheckpoint is a periodic snapshot the runtime owns and retires.
	KindCheckpoint Kind = "checkpoint"
	// KindSavepoint is a snapshot taken on request and owned by the user.
	KindSavepoint Kind = "savepoint"
)

// Redistribution says how a list of operator state is spread over the
// subtasks when restoring at another parallelism.
type Redistribution string

const (
	// EvenSplit concatenates the items of all old subtasks (in subtask
	// order) and deals them round-robin over the new subtasks.
	EvenSplit Redistribution = "even-split"
	// Union gives every new subtask all items of all old subtasks.
	Union Redistribution = "union"
)

// Snapshot is the state of a whole job at one checkpoint.
type Snapshot struct {
	ID             int64
	Kind           Kind
	TimestampMs    int64
	MaxParallelism int
	// Version is the format version Read found in the manifest (1 to
	// FormatVersion); Write ignores it and writes the version the
	// snapshot's content needs.
	Version int
	// Job names the job that took the snapshot ("" when it had no name,
	// and in snapshots written before the field existed): a job resuming
	// from its own checkpoints refuses those of another job by it.
	Job string
	// Origin is the location of the snapshot the job that took this one
	// was first restored from ("" when it started fresh): a job restored
	// from a savepoint and then restarted with the same command resumes
	// from its own newer checkpoints, those whose Origin is that savepoint.
	Origin    string
	Operators []*OperatorState
}

// OperatorState is the state of one operator: its subtasks in order.
type OperatorState struct {
	UID         string
	Name        string
	Parallelism int
	Subtasks    []*SubtaskState
}

// SubtaskState is what one operator subtask wrote at a checkpoint.
type SubtaskState struct {
	// KeyGroups maps a key group to its keyed-state blob.
	KeyGroups map[int]Blob
	// Lists are named lists of operator state.
	Lists map[string]*ListState
	// Native is the keyed state in a backend's native format (incremental
	// checkpoints of the Pebble backend), or nil. Key-group blobs may then
	// hold the timers only.
	Native *NativeState
}

// ListState is one named list of operator state.
type ListState struct {
	Mode  Redistribution
	Items []Blob
}

// Blob is one piece of state. Written snapshots hold the bytes; loaded ones
// read them from disk on demand (and verify them, I1).
type Blob interface {
	// Bytes returns the blob's content.
	Bytes() ([]byte, error)
	// Len returns its length in bytes.
	Len() int64
}

// Bytes is an in-memory Blob.
type Bytes []byte

// Bytes returns b.
func (b Bytes) Bytes() ([]byte, error) { return b, nil }

// Len returns len(b).
func (b Bytes) Len() int64 { return int64(len(b)) }

// Operator returns the state of the operator with uid, or nil.
func (s *Snapshot) Operator(uid string) *OperatorState {
	for _, o := range s.Operators {
		if o.UID == uid {
			return o
		}
	}
	return nil
}

// Size returns the total bytes of all blobs.
func (s *Snapshot) Size() int64 {
	var n int64
	for _, o := range s.Operators {
		n += o.Size()
	}
	return n
}

// Size returns the total bytes of the operator's blobs.
func (o *OperatorState) Size() int64 {
	var n int64
	for _, st := range o.Subtasks {
		if st == nil {
			continue
		}
		for _, b := range st.KeyGroups {
			n += b.Len()
		}
		for _, l := range st.Lists {
			for _, b := range l.Items {
				n += b.Len()
			}
		}
		if st.Native != nil {
			n += st.Native.Size()
		}
	}
	return n
}

// NativeFor returns the native states of the old subtasks whose key groups
// overlap [start, end], in subtask order.
func (o *OperatorState) NativeFor(start, end int) []*NativeState {
	var out []*NativeState
	for _, st := range o.Subtasks {
		if st != nil && st.Native != nil && st.Native.Start <= end && st.Native.End >= start {
			out = append(out, st.Native)
		}
	}
	return out
}

// KeyGroupBlobs returns the keyed-state blobs of the key groups in
// [start, end] (inclusive) from whichever old subtask held them, for a
// subtask restoring at any parallelism.
func (o *OperatorState) KeyGroupBlobs(start, end int) map[int]Blob {
	out := map[int]Blob{}
	for _, st := range o.Subtasks {
		if st == nil {
			continue
		}
		for kg, b := range st.KeyGroups {
			if kg >= start && kg <= end {
				out[kg] = b
			}
		}
	}
	return out
}

// ListFor returns the items of list name that new subtask `index` of
// `parallelism` receives under the list's redistribution mode.
func (o *OperatorState) ListFor(name string, index, parallelism int) ([]Blob, error) {
	var all []Blob
	var mode Redistribution
	for _, st := range o.Subtasks {
		if st == nil {
			continue
		}
		l, ok := st.Lists[name]
		if !ok {
			continue
		}
		if mode != "" && l.Mode != mode {
			return nil, fmt.Errorf("checkpoint: operator %q list %q has mixed redistribution modes %q and %q", o.UID, name, mode, l.Mode)
		}
		mode = l.Mode
		all = append(all, l.Items...)
	}
	switch {
	case mode == Union:
		return all, nil
	case parallelism == o.Parallelism && index < len(o.Subtasks):
		// Same parallelism: every subtask gets back exactly its own items.
		if st := o.Subtasks[index]; st != nil && st.Lists[name] != nil {
			return st.Lists[name].Items, nil
		}
		return nil, nil
	}
	var mine []Blob
	for i := index; i < len(all); i += parallelism {
		mine = append(mine, all[i])
	}
	return mine, nil
}

// ListNames returns the names of the operator's lists, sorted.
func (o *OperatorState) ListNames() []string {
	seen := map[string]bool{}
	for _, st := range o.Subtasks {
		if st == nil {
			continue
		}
		for n := range st.Lists {
			seen[n] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
