package wal

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/agent/internal/groupcommit"
	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
)

// Options configure a store. The zero value is the safe default.
type Options struct {
	// NoSync skips fsync: records survive a crash of the process but not
	// of the machine. For tests and benchmarks.
	NoSync bool
	// MaxLogBytes is the size beyond which the log is compacted (when it
	// is also more than twice its live content); 0 means 64 MiB.
	MaxLogBytes int64
	// FS is the file system of the logs; nil means the operating system's
	// (vfs.Default). Tests inject faults through it (internal/faultfs).
	FS vfs.FS
}

// Factory returns an agent.StoreFactory keeping the logs of each operator
// in dir/<operator uid>, one log per subtask, of the key groups whose keys
// can reach the subtask (runtime.Context.OwnedKeyGroups: narrowed to the
// job's slice when the job is one, as a keyed task of package cluster is;
// so the keyed tasks of a clustered job that run on one machine share the
// directory, each with its own log).
func Factory(dir string, opts Options) agent.StoreFactory {
	return func(ctx *runtime.Context) (agent.ActionStateStore, error) {
		rng := ctx.OwnedKeyGroups()
		if rng.Empty() {
			return nil, fmt.Errorf("wal: subtask %d of operator %q owns no key group of its job's slice %d of %d (key groups %v): run a sliced job's keyed operators at parallelism 1",
				ctx.Subtask, ctx.Name, ctx.Slice, ctx.Slices, ctx.KeyGroups)
		}
		return Open(filepath.Join(dir, sanitize(ctx.UID)), rng, opts)
	}
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

const (
	recPut     byte = 1
	recDiscard byte = 2
	recPrune   byte = 3
	// recPruneCP is a prune following a checkpoint: pruneCP.
	recPruneCP byte = 4
	headerLen       = 9
)

// pruneCP is the payload of a checkpoint prune; compaction writes one
// without keys to keep the horizon.
type pruneCP struct {
	Checkpoint int64          `json:"cp"`
	UpTo       []agent.KeySeq `json:"upTo,omitempty"`
}

// idFile is the file holding the directory's store id.
const idFile = "store.id"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var _ agent.Checkpointed = (*Store)(nil)

// Store is the write-ahead log of one operator subtask.
type Store struct {
	dir  string
	path string
	rng  keygroup.Range
	opts Options

	// mu guards idx, live, the batch accumulating in w and the fields
	// marked (mu). One lock for the index and the batch: a write changes
	// memory and queues its record in one critical section, so memory and
	// log see concurrent writes in the same order.
	mu   sync.Mutex
	idx  *actionindex.Index[runKey, entry] // the live states
	live int64                             // bytes of live records
	// w is the group-commit writer (W2); its batches are buffers
	// of records, written and fsynced by Flush.
	w *groupcommit.Writer[batch]

	// The log, written by the writer goroutine only (and by Open before
	// it starts); size is guarded by mu.
	f    vfs.File
	size int64
	// spares are the buffers of batches written, for the next ones (at
	// most two: one batch is written while the next accumulates; guarded
	// by mu).
	spares [][]byte

	syncs, writes int64 // guarded by mu; for tests and metrics

	// id is the directory's store id; newID says this Open wrote it (the
	// directory had none). horizon is the highest checkpoint prune (mu).
	id      string
	newID   bool
	horizon int64

	beforeSync func() // test hook, called by the writer before each batch
}

// runKey is a RunID within its key: the fields besides the key, as a map
// key (no hashing or formatting per lookup).
type runKey struct {
	seq, event  int64
	typ, action string
	digest      [32]byte
}

func keyOf(id *agent.RunID) runKey {
	return runKey{seq: id.Seq, event: id.EventID, typ: id.EventType, action: id.Action, digest: id.EventDigest}
}

type entry struct {
	st   *agent.ActionState
	size int64
}

// batch is the records of one group commit, encoded.
type batch struct{ buf []byte }

// Open opens (creating if needed) the log of key groups rng in dir and
// loads the states of those key groups from every log in dir.
func Open(dir string, rng keygroup.Range, opts Options) (*Store, error) {
	if opts.MaxLogBytes <= 0 {
		opts.MaxLogBytes = 64 << 20
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	// The directory's entry in its parent must survive a crash too, and
	// so must every directory MkdirAll creates above it, or every log in
	// it goes (W1).
	if err := mkdirAllSynced(filepath.Clean(dir), opts); err != nil {
		return nil, err
	}
	var err error
	s := &Store{dir: dir, rng: rng, opts: opts, idx: actionindex.New[runKey, entry](),
		path: filepath.Join(dir, fmt.Sprintf("kg-%05d-%05d.wal", rng.Start, rng.End))}
	if s.id, s.newID, err = storeID(dir, opts); err != nil {
		return nil, err
	}
	logs, err := s.logs()
	if err != nil {
		return nil, err
	}
	var absorbed []string
	for _, l := range logs {
		if l.rng.Intersect(rng).Empty() {
			continue
		}
		if err := s.load(l.path); err != nil {
			return nil, err
		}
		if l.rng.Start >= rng.Start && l.rng.End <= rng.End && l.path != s.path {
			absorbed = append(absorbed, l.path)
		}
	}
	killpoint.Hit("agent.rebuild") // crash tests: between reading the logs and rewriting them
	if err := s.rewrite(); err != nil {
		return nil, err
	}
	for _, p := range absorbed {
		if err := opts.FS.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("wal: removing absorbed log: %w", err)
		}
	}
	if err := syncDir(dir, opts); err != nil {
		return nil, err
	}
	s.w = groupcommit.New(&s.mu, (*flusher)(s), "wal")
	return s, nil
}

// Get implements agent.ActionStateStore.
func (s *Store) Get(id agent.RunID) (*agent.ActionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.idx.Get(id.Key, keyOf(&id)); ok {
		return e.st, nil
	}
	return nil, nil
}

// Put implements agent.ActionStateStore. The state must not be modified
// after the call.
func (s *Store) Put(st *agent.ActionState) error {
	if !s.rng.Contains(st.KeyGroup) {
		// Its log would keep it, but no reopen of this range would read
		// it back: its side effects would repeat.
		return fmt.Errorf("wal: state of key group %d put into the store of key groups %v (in a clustered job, key the agent by the job's key)", st.KeyGroup, s.rng)
	}
	return s.write(recPut, func(e *encoder, dst []byte) ([]byte, error) { return e.appendState(dst, st) },
		func(size int64) { s.applyPut(st, size) })
}

// PutQueued implements agent.Queuer: Put without waiting for the fsync.
// The state must not be modified after the call.
func (s *Store) PutQueued(st *agent.ActionState) (agent.Pending, error) {
	b, err := s.queue(recPut, func(e *encoder, dst []byte) ([]byte, error) { return e.appendState(dst, st) },
		func(size int64) { s.applyPut(st, size) })
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Latest implements agent.ActionStateStore.
func (s *Store) Latest(key []byte) (agent.Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.idx.Latest(key)
	return agent.Position(p), ok
}

// DiscardFrom implements agent.ActionStateStore.
func (s *Store) DiscardFrom(key []byte, pos agent.Position) error {
	return s.write(recDiscard, jsonPayload(discardRec{Key: key, Pos: pos}), func(int64) { s.applyDiscard(key, pos) })
}

// Prune implements agent.ActionStateStore.
func (s *Store) Prune(upTo []agent.KeySeq) error {
	if len(upTo) == 0 {
		return nil
	}
	return s.write(recPrune, jsonPayload(upTo), func(int64) { s.applyPrune(upTo) })
}

// Close flushes what is queued and closes the log. It returns the store's
// write error, if any.
func (s *Store) Close() error {
	return s.w.Close(func() error { return s.f.Close() })
}

// Stats reports the records written, the fsyncs (batches) it took, the
// live states and the log's size.
func (s *Store) Stats() (writes, syncs int64, states int, logBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.syncs, s.idx.Len(), s.size
}
