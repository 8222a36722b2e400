package runtime

import (
	"fmt"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/keygroup"
)

// Snapshotter is implemented by operators (and source readers) that have
// state to checkpoint. SnapshotState is called on the subtask goroutine
// when the checkpoint barrier passes the operator: after every record
// before the barrier and before any record after it. It must capture the
// state as of that instant; what it writes is persisted by the runtime.
// Records an operator emits from SnapshotState precede the barrier: the
// operators chained behind it take their snapshots after it, and the
// barrier is forwarded after the whole chain's
// (TestRecordsEmittedAtASnapshotPrecedeTheBarrier); an operator that
// buffers output sends it there, so the buffer is no state.
type Snapshotter interface {
	SnapshotState(w *SnapshotWriter) error
}

// CheckpointListener is implemented by operators (and source readers)
// that act when a checkpoint completes (two-phase-commit sinks commit,
// Kafka sources commit offsets) or is aborted. The calls run on the subtask
// goroutine. An error from NotifyCheckpointComplete fails the job.
type CheckpointListener interface {
	NotifyCheckpointComplete(id int64) error
	NotifyCheckpointAborted(id int64)
}

// SplitSnapshotter is implemented by source readers that can be restored:
// SnapshotSplits returns one item per split (position and whatever the
// reader needs), taken between two Polls. After a restore the reader finds
// the items in SourceContext.Restored under SplitsList, redistributed over
// the new parallelism (even split).
type SplitSnapshotter interface {
	SnapshotSplits(checkpointID int64) ([][]byte, error)
}

// SplitsList is the operator-state list under which source split states
// are stored.
const SplitsList = "splits"

// SnapshotWriter collects what one operator subtask writes at a checkpoint.
// Byte slices handed to it become the runtime's: do not modify them after.
//
// A snapshot has a synchronous part, SnapshotState itself, during which the
// subtask processes nothing, and an optional asynchronous part registered
// with Async, which runs on another goroutine after the barrier has been
// forwarded and while the subtask processes records again. The checkpoint
// is acknowledged to the coordinator only when both parts are done.
type SnapshotWriter struct {
	id    int64
	kind  checkpoint.Kind
	rng   keygroup.Range
	st    *checkpoint.SubtaskState
	async []func() error
	base  string // checkpoint base location (CheckpointConfig.Dir)
	final bool   // the final checkpoint of a bounded job
}

func newSnapshotWriter(id int64, kind checkpoint.Kind, rng keygroup.Range) *SnapshotWriter {
	return &SnapshotWriter{id: id, kind: kind, rng: rng, st: &checkpoint.SubtaskState{
		KeyGroups: map[int]checkpoint.Blob{}, Lists: map[string]*checkpoint.ListState{}}}
}

// CheckpointID returns the id of the checkpoint being taken.
func (w *SnapshotWriter) CheckpointID() int64 { return w.id }

// Kind tells whether a checkpoint or a savepoint is being taken. Savepoints
// must be self-contained and in the canonical, backend-independent format;
// checkpoints may use a backend's native format.
func (w *SnapshotWriter) Kind() checkpoint.Kind { return w.kind }

// Final reports whether this is the final checkpoint of a job whose
// sources have all ended their input: it is taken after their final
// watermark, and when it completes the sources end their output and every
// operator's EndInput runs. In exactly-once mode no record follows its
// barrier, so the checkpoint must cover everything the job will still
// emit: an operator holding inputs it has accepted but not finished (an
// agent's running actions, asynchronous calls) finishes them in
// SnapshotState, as its EndInput would, before writing its state. Their
// outputs then precede the barrier, a two-phase-commit sink commits them
// with this checkpoint, and a restore from it has nothing to run again.
// (Otherwise they would be both stored in the checkpoint and emitted, and
// committed at the end of input, after it.)
func (w *SnapshotWriter) Final() bool { return w.final }

// Async registers f as part of the snapshot's asynchronous phase. f runs
// after SnapshotState has returned and the barrier has been forwarded, on a
// goroutine other than the subtask's, concurrently with the subtask
// processing records; f may call KeyGroup and List on w (nothing else
// calls them then). The functions registered by the operators of one
// subtask run one after the other, in registration order; an error from any
// of them aborts the checkpoint. f must not touch state the subtask mutates
// without its own protection: operators hand it a frozen view (for example
// a copy-on-write snapshot of the state backend).
//
// Every registered f runs exactly once, even when the checkpoint is aborted
// meanwhile, so that f can release what the synchronous part pinned.
func (w *SnapshotWriter) Async(f func() error) { w.async = append(w.async, f) }

// NativeBase returns the checkpoint base location (a directory path or a
// bucket URL) under which native keyed state may keep shared files
// (checkpoint.Uploader), or "" when the snapshot must be canonical: a
// savepoint, or checkpoints without a directory or into an injected
// checkpoint.Storage.Store.
func (w *SnapshotWriter) NativeBase() string {
	if w.kind != checkpoint.KindCheckpoint {
		return ""
	}
	return w.base
}

// Native stores the subtask's keyed state in a backend's native format
// (see checkpoint.NativeState); only when NativeBase is not "".
func (w *SnapshotWriter) Native(n *checkpoint.NativeState) error {
	if w.NativeBase() == "" {
		return fmt.Errorf("runtime: native keyed state in a %s; it must be canonical", w.kind)
	}
	w.st.Native = n
	return nil
}

// KeyGroup stores the keyed-state blob of key group kg (which must be in
// the subtask's range). Empty blobs need not be written.
func (w *SnapshotWriter) KeyGroup(kg int, data []byte) error {
	if !w.rng.Contains(kg) {
		return fmt.Errorf("runtime: snapshot of key group %d outside the subtask's range %v", kg, w.rng)
	}
	if len(data) > 0 {
		w.st.KeyGroups[kg] = checkpoint.Bytes(data)
	}
	return nil
}

// List stores a named list of operator state with its redistribution mode
// (checkpoint.EvenSplit or checkpoint.Union).
func (w *SnapshotWriter) List(name string, mode checkpoint.Redistribution, items [][]byte) {
	l := &checkpoint.ListState{Mode: mode}
	for _, it := range items {
		l.Items = append(l.Items, checkpoint.Bytes(it))
	}
	w.st.Lists[name] = l
}

// Restored is the state an operator subtask starts from after a restore.
type Restored struct {
	// CheckpointID is the id of the checkpoint or savepoint restored.
	CheckpointID int64
	op           *checkpoint.OperatorState
	index, par   int
	rng          keygroup.Range
}

// ForEachKeyGroup calls f with the keyed-state blob of every key group in
// the subtask's (new) range that has one, in ascending key-group order.
func (r *Restored) ForEachKeyGroup(f func(kg int, data []byte) error) error {
	if r == nil || r.op == nil {
		return nil
	}
	blobs := r.op.KeyGroupBlobs(r.rng.Start, r.rng.End)
	for kg := r.rng.Start; kg <= r.rng.End; kg++ {
		b, ok := blobs[kg]
		if !ok {
			continue
		}
		data, err := b.Bytes()
		if err != nil {
			return err
		}
		if err := f(kg, data); err != nil {
			return fmt.Errorf("runtime: restore key group %d of operator %q: %w", kg, r.op.UID, err)
		}
	}
	return nil
}

// Native returns the native keyed states of the old subtasks whose key
// groups overlap this subtask's range, in old-subtask order (nil when the
// restored snapshot holds canonical blobs).
func (r *Restored) Native() []*checkpoint.NativeState {
	if r == nil || r.op == nil {
		return nil
	}
	return r.op.NativeFor(r.rng.Start, r.rng.End)
}

// List returns the items of the named list this subtask receives.
func (r *Restored) List(name string) ([][]byte, error) {
	if r == nil || r.op == nil {
		return nil, nil
	}
	blobs, err := r.op.ListFor(name, r.index, r.par)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(blobs))
	for _, b := range blobs {
		data, err := b.Bytes()
		if err != nil {
			return nil, err
		}
		out = append(out, data)
	}
	return out, nil
}

// Restored returns the state this operator subtask restores from, or nil
// when the job starts without one.
func (c *Context) Restored() *Restored { return c.restored }
