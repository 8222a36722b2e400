package sim

import (
	"errors"
	"fmt"
	"sync"

	"github.com/weirproject/weir"
)

// ErrInjected is the failure a Fault injects.
var ErrInjected = errors.New("sim: injected failure")

// Txn is a transaction of the simulated external system: its id is unique
// over the whole run (every attempt).
type Txn struct {
	ID      int64 `json:"id"`
	Subtask int   `json:"subtask"`
}

// store is the simulated external system behind the two-phase sink: it
// outlives the attempts of a run, as a database outlives the job's
// processes. Only committed lines are output; the observer reads them
// with committed.
type store struct {
	mu struct {
		sync.Mutex
		next      int64
		txns      map[int64]*txnState
		committed []string
	}
}

type txnState struct {
	subtask   int
	lines     []string
	prepared  bool
	committed bool
}

func newStore() *store {
	s := &store{}
	s.mu.txns = map[int64]*txnState{}
	return s
}

func (s *store) begin(subtask int) Txn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.next++
	s.mu.txns[s.mu.next] = &txnState{subtask: subtask}
	return Txn{ID: s.mu.next, Subtask: subtask}
}

func (s *store) write(t Txn, line string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.txns[t.ID]
	if st == nil || st.prepared {
		return fmt.Errorf("sim: write to transaction %d which is not open", t.ID)
	}
	st.lines = append(st.lines, line)
	return nil
}

// dropLast removes the last line written to t (a planted bug).
func (s *store) dropLast(t Txn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.mu.txns[t.ID]; st != nil && len(st.lines) > 0 {
		st.lines = st.lines[:len(st.lines)-1]
	}
}

func (s *store) prepare(t Txn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.txns[t.ID]
	if st == nil {
		return fmt.Errorf("sim: pre-commit of transaction %d which was aborted", t.ID)
	}
	st.prepared = true
	return nil
}

// commit is idempotent; it refuses a transaction that was never prepared
// or was aborted (a sink that commits what it should not fails loudly).
func (s *store) commit(t Txn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.txns[t.ID]
	switch {
	case st == nil:
		return fmt.Errorf("sim: commit of transaction %d which was aborted", t.ID)
	case st.committed:
		return nil
	case !st.prepared:
		return fmt.Errorf("sim: commit of transaction %d which was not pre-committed", t.ID)
	}
	st.committed = true
	s.mu.committed = append(s.mu.committed, st.lines...)
	return nil
}

// abortAll aborts every transaction of subtask not committed.
func (s *store) abortAll(subtask int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, st := range s.mu.txns {
		if st.subtask == subtask && !st.committed {
			delete(s.mu.txns, id)
		}
	}
}

func (s *store) committed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.mu.committed...)
}

// sink is one subtask's weir.TwoPhaseCommitter over the store, armed with
// the attempt's fault (if it is a sink fault of this subtask).
type sink struct {
	st                          *store
	subtask                     int
	fault                       *Fault // nil: none for this subtask
	aw                          *agentWorld
	writes, precommits, commits int64
}

var _ weir.TwoPhaseCommitter[string, Txn] = (*sink)(nil)

func (k *sink) strike(kind FaultKind, n int64) bool {
	if k.fault != nil && k.fault.Kind == kind && k.fault.At == n {
		k.fault.Struck = true
		k.aw.strike(k.fault)
		return true
	}
	return false
}

func (k *sink) Begin() (Txn, error) { return k.st.begin(k.subtask), nil }

func (k *sink) Write(t Txn, r weir.Record[string]) error {
	k.writes++
	if k.strike(FaultWrite, k.writes) {
		return fmt.Errorf("%w: write %d of sink subtask %d", ErrInjected, k.writes, k.subtask)
	}
	return k.st.write(t, r.Value)
}

func (k *sink) PreCommit(t Txn) error {
	k.precommits++
	if err := k.st.prepare(t); err != nil {
		return err
	}
	if k.strike(FaultPreCommit, k.precommits) {
		return fmt.Errorf("%w: pre-commit %d of sink subtask %d", ErrInjected, k.precommits, k.subtask)
	}
	return nil
}

func (k *sink) Commit(t Txn) error {
	k.commits++
	if k.strike(FaultCommitBefore, k.commits) {
		return fmt.Errorf("%w: before commit %d of sink subtask %d", ErrInjected, k.commits, k.subtask)
	}
	if err := k.st.commit(t); err != nil {
		return err
	}
	if k.strike(FaultCommitAfter, k.commits) {
		return fmt.Errorf("%w: after commit %d of sink subtask %d", ErrInjected, k.commits, k.subtask)
	}
	return nil
}

func (k *sink) Recover(Txn, bool) error {
	k.st.abortAll(k.subtask)
	return nil
}
