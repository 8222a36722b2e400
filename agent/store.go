package agent

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/runtime"
)

// ActionStateStore records what action runs did, so that a restore skips
// completed actions and replays recorded calls instead of repeating their
// side effects (durable execution). The operator calls it from action goroutines,
// concurrently; implementations must be safe for that. Put returns only
// once the state is durable: the operator releases an action's outputs
// only after its completed state is recorded.
//
// An implementation serves one operator subtask: it sees the key groups of
// that subtask (ActionState.KeyGroup) and must return, after a restore,
// every state recorded for them (also by other subtasks before a change of
// parallelism). A factory opens it on runtime.Context.OwnedKeyGroups: in a
// job that is one slice of a larger one (runtime.Config.Slice; a keyed task
// of package cluster), the subtask's key groups within that slice, so that
// the slices sharing a store's topic or directory keep apart.
type ActionStateStore interface {
	// Get returns the state recorded for run id, or nil. The caller does
	// not modify it.
	Get(id RunID) (*ActionState, error)
	// Put records st, replacing the state of the same run. The store may
	// keep st: the caller does not modify it afterwards.
	Put(st *ActionState) error
	// Latest returns the position of the last state recorded for key (the
	// encoded key), or ok false when none is.
	Latest(key []byte) (pos Position, ok bool)
	// DiscardFrom removes the states of key at positions from pos on
	// (divergence: the recorded future of the key is no longer valid).
	DiscardFrom(key []byte, pos Position) error
	// Prune removes the states of the given keys up to and including the
	// inputs with the given sequence numbers (they are covered by a
	// completed checkpoint and will not be replayed).
	Prune(upTo []KeySeq) error
	// Close releases the store.
	Close() error
}

// Checkpointed is an optional capability of an ActionStateStore that can
// tell whether it holds what a checkpoint needs: the kafkastore (a log that
// outlives any one machine) and the WAL (a log on one disk) implement it.
// The operator finds it by type assertion and
//
//  1. at every checkpoint and savepoint, in the synchronous part of its
//     snapshot (on the subtask goroutine), calls Marker and stores the
//     result in the operator state of the checkpoint (a union list: after
//     a change of parallelism every new subtask receives the markers of
//     all old subtasks);
//  2. after the factory has opened the store and before anything else
//     uses it, calls Restore: when the job restores, with every marker the
//     restored checkpoint holds (none if it was taken without this store);
//     on a fresh start with none. Without markers the store rebuilds from
//     the start of its log: a job that failed before its first checkpoint
//     starts again from nothing, and what its first run recorded keeps
//     its side effects from being repeated;
//  3. prunes through PruneCheckpoint, naming the newest checkpoint whose
//     inputs the prune covers, and after Restore compares PruneHorizon
//     with the restored checkpoint's id: a restore of an older checkpoint
//     or savepoint would run again actions whose states are gone.
//
// A Restore that finds the store lacks states the markers refer to (a WAL
// directory of another host or a new one, a Kafka topic deleted and
// created again, records past retention) rebuilds what there is and
// returns an error wrapping ErrStatesMissing; the operator fails the job
// with it unless Options.AllowRepeatedSideEffects.
//
// A fresh start finds the states of earlier runs of the job (as the WAL
// does): a run of the same inputs replays them. To run a job from scratch
// with its side effects happening again, give it a new topic (or WAL
// directory).
type Checkpointed interface {
	// Marker returns where a restore from the checkpoint being taken must
	// start reading the log so that it sees every state it may need: at
	// or before the first record of every state live at this instant
	// (not pruned or discarded), and of every state whose Put is in
	// progress. It also identifies the log, so that Restore can tell a
	// log that is not the one the checkpoint was taken with.
	Marker() ([]byte, error)
	// Restore rebuilds the states of the subtask's key groups from the
	// log, reading from the markers to the end of the log as it is when
	// Restore starts. When the log lacks states the markers refer to, it
	// rebuilds the rest and returns an error wrapping ErrStatesMissing
	// (the store is then usable); any other error leaves it unusable.
	Restore(markers [][]byte) error
	// PruneCheckpoint is Prune of inputs that checkpoint covers (and
	// earlier ones): it records, in the same durable write, checkpoint as
	// the store's prune horizon when it is higher than the horizon.
	PruneCheckpoint(checkpoint int64, upTo []KeySeq) error
	// PruneHorizon returns the highest checkpoint id a PruneCheckpoint
	// of the subtask's key groups recorded (after Restore: as read from
	// the log), 0 if none. A restore of a checkpoint or savepoint with a
	// lower id lacks states that were pruned.
	PruneHorizon() int64
}

// ContextRestorer is an optional capability of a Checkpointed store whose
// Restore waits on other systems (the Kafka store's requests and its waits
// between retries): RestoreContext is Restore that returns an error
// wrapping ctx.Err() once ctx is done. The operator finds it by type
// assertion and calls it with a context that ends when the job is
// cancelled or fails (runtime.Context.Done), so that a job stopped while
// a subtask rebuilds its store does not wait the store's retries out.
type ContextRestorer interface {
	RestoreContext(ctx context.Context, markers [][]byte) error
}

// Queuer is an optional capability of an ActionStateStore whose writes go
// through one ordered queue (a log: the WAL, the Kafka store): a write can
// be queued at once and waited for apart. The operator finds it by type
// assertion and uses it for the record of a durable call's result, which
// the action need not wait for before it goes on, only before its next
// durable call starts and before it completes (docs/agents.md, "When an
// action waits for the store"): the record is written as early as with
// Put, and the action's wait for it overlaps with its own work and with
// the write of its completed state.
type Queuer interface {
	// PutQueued is Put without the wait: st is recorded in memory (Get
	// and Latest see it) and queued for writing, and the returned Pending
	// reports when it is durable. Writes become durable in the order they
	// were queued (a write is durable only once every write queued before
	// it is), and a write that fails fails every later one. The store may
	// keep st: the caller does not modify it afterwards.
	PutQueued(st *ActionState) (Pending, error)
}

// Pending is a write queued by Queuer.PutQueued.
type Pending interface {
	// Wait returns once the write is durable, with nil, or with the error
	// that keeps it from being durable (Put's error). It may be called
	// more than once, from any goroutine.
	Wait() error
}

// ErrStatesMissing is wrapped by the errors of a Checkpointed store's
// Restore, and of the operator's restore, when the store lacks states the
// restored checkpoint needs: actions of inputs finished after it would run
// again, repeating their side effects.
var ErrStatesMissing = errors.New("the action-state store lacks states the restored checkpoint needs")

// storeMarkers is the operator-state list holding the markers of a
// Checkpointed store.
const storeMarkers = "agent.store.markers"

// StoreFactory opens the store of one operator subtask.
type StoreFactory func(ctx *runtime.Context) (ActionStateStore, error)

// Position orders the runs of one key: by input sequence number, then by
// triggering event, then by the action's place among the event's actions.
type Position struct {
	Seq     int64 `json:"seq"`
	EventID int64 `json:"event"`
	Action  int   `json:"action"`
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool { return actionindex.Position(p).Less(actionindex.Position(q)) }

// KeySeq names the inputs of a key up to a sequence number.
type KeySeq struct {
	Key []byte `json:"key"`
	Seq int64  `json:"seq"`
}

// ActionState is what the store keeps of one action run.
type ActionState struct {
	// ID identifies the run; Pos orders it among the key's runs; KeyGroup
	// is the key's key group.
	ID       RunID    `json:"id"`
	Pos      Position `json:"pos"`
	KeyGroup int      `json:"kg"`
	// Completed says the action finished successfully: a restore skips it
	// and applies Short, Sensory and Sent instead.
	Completed bool `json:"completed,omitempty"`
	// Short and Sensory are the action's memory writes; Sent the events it
	// sent (outputs included), in order.
	Short   MemoryWrites `json:"short,omitzero"`
	Sensory MemoryWrites `json:"sensory,omitzero"`
	Sent    []Event      `json:"sent,omitempty"`
	// Calls are the results of the run's durable calls, in call order.
	Calls []CallResult `json:"calls,omitempty"`
}

// MemoryWrites are buffered memory writes: values set, names deleted.
type MemoryWrites struct {
	Set     map[string]json.RawMessage `json:"set,omitempty"`
	Deleted []string                   `json:"deleted,omitempty"`
}

func writesOf(w map[string]json.RawMessage) MemoryWrites {
	var mw MemoryWrites
	if len(w) == 0 {
		return mw
	}
	for _, k := range slices.Sorted(maps.Keys(w)) {
		if v := w[k]; v == nil {
			mw.Deleted = append(mw.Deleted, k)
		} else {
			if mw.Set == nil {
				mw.Set = map[string]json.RawMessage{}
			}
			mw.Set[k] = v
		}
	}
	return mw
}

func (mw MemoryWrites) buffer() map[string]json.RawMessage {
	if len(mw.Set) == 0 && len(mw.Deleted) == 0 {
		return nil
	}
	w := make(map[string]json.RawMessage, len(mw.Set)+len(mw.Deleted))
	for k, v := range mw.Set {
		w[k] = v
	}
	for _, k := range mw.Deleted {
		w[k] = nil
	}
	return w
}

// CallResult is the recorded outcome of one durable call.
type CallResult struct {
	// Name and ArgsDigest identify the call at its position: a re-run
	// asking for another call there has diverged.
	Name       string `json:"name"`
	ArgsDigest string `json:"args"`
	// Result is the JSON of the call's result (null included), or Error
	// the text of its error.
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Failed bool            `json:"failed,omitempty"`
	// Pending says the call was started and its result not recorded yet
	// (DurableReconciled).
	Pending bool `json:"pending,omitempty"`
}

// MemoryStore is an ActionStateStore in memory: no durability, for tests
// and for jobs that want replay within one process only. One MemoryStore
// may serve every subtask of an operator (Factory).
type MemoryStore struct {
	mu sync.Mutex
	// idx holds a copy of every live state, by key and run name
	// (RunID.String).
	idx *actionindex.Index[string, *ActionState]
	// Puts counts Put calls.
	Puts int
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{idx: actionindex.New[string, *ActionState]()}
}

// Factory returns a factory handing s to every subtask.
func (s *MemoryStore) Factory() StoreFactory {
	return func(*runtime.Context) (ActionStateStore, error) { return nopCloser{s}, nil }
}

type nopCloser struct{ *MemoryStore }

func (nopCloser) Close() error { return nil }

func clone(st *ActionState) *ActionState {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	var c ActionState
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// Get implements ActionStateStore.
func (s *MemoryStore) Get(id RunID) (*ActionState, error) {
	name := id.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.idx.Get(id.Key, name)
	if !ok {
		return nil, nil
	}
	return clone(st), nil
}

// Put implements ActionStateStore (states are kept as JSON round trips, as
// a durable store would return them).
func (s *MemoryStore) Put(st *ActionState) error {
	if _, err := json.Marshal(st); err != nil {
		return err
	}
	c := clone(st)
	name := st.ID.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Puts++
	s.idx.Put(st.ID.Key, name, actionindex.Position(st.Pos), c)
	return nil
}

// Latest implements ActionStateStore.
func (s *MemoryStore) Latest(key []byte) (Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.idx.Latest(key)
	return Position(p), ok
}

// DiscardFrom implements ActionStateStore.
func (s *MemoryStore) DiscardFrom(key []byte, pos Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx.DiscardFrom(key, actionindex.Position(pos), nil)
	return nil
}

// Prune implements ActionStateStore.
func (s *MemoryStore) Prune(upTo []KeySeq) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ks := range upTo {
		s.idx.Prune(ks.Key, ks.Seq, nil)
	}
	return nil
}

// Len returns the number of states kept.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.Len()
}
