// Package wal is the embedded write-ahead log behind the agent operator's
// action-state store (agent.ActionStateStore), the default store of seed
// 002: no external system, durable on local disk, with group commit.
//
// Each operator subtask writes one log file, named by the key groups it
// owns (kg-<first>-<last>.wal) in a directory per operator (Factory). A
// record is
//
//	uint32 length | uint32 CRC-32C of type+payload | byte type | payload (JSON)
//
// of type put (an agent.ActionState), discard (a key and position), prune
// (keys and sequence numbers) or checkpoint prune (a prune with the id of
// the checkpoint it follows). The store keeps the live states in memory;
// the log is only read when a store opens. The file store.id holds the
// directory's store id, random, written when the directory gets its first
// store.
//
// # Guarantees
//
//  1. Durability. Put, DiscardFrom and Prune return after their record has
//     been written and fsynced (unless Options.NoSync): a state Put
//     returned for survives a crash of the process or the machine.
//  2. Group commit. Concurrent writers share fsyncs: while one batch is
//     being synced the next accumulates, so N actions finishing together
//     cost one write and one fsync, not N, without weakening guarantee 1.
//     PutQueued (agent.Queuer) queues a state without waiting; its
//     Pending's Wait returns once it is durable. Batches are written in
//     order, so a record is durable only once every earlier one is (the
//     writer is agent/internal/groupcommit's, invariants G1-G5).
//  3. Recovery. Open replays the logs; a record cut short or corrupted by
//     a crash (bad length or checksum) ends its log: the records before it
//     are kept, it and anything after are ignored.
//  4. Key groups. Open reads every log of the directory whose key-group
//     range overlaps the subtask's and keeps the records of its own key
//     groups, so states survive a change of parallelism. It then rewrites
//     its live states into a fresh log of its own range and deletes the
//     logs whose ranges lie inside it.
//  5. Bounded size. When the log has grown past Options.MaxLogBytes and
//     twice its live content, the live states are rewritten into a new log
//     (written, fsynced, renamed over the old one).
//  6. Errors. A failed write or fsync makes every later write fail with an
//     error naming the file, the writes queued while the failed batch was
//     being written included: they are not written (groupcommit G2);
//     nothing is silently lost.
//  7. Which checkpoints restore (agent.Checkpointed). Marker names the
//     directory, the host and the directory's store id; Restore (the log
//     was read by Open) fails with an error wrapping
//     agent.ErrStatesMissing when a marker's store id is not the
//     directory's: the checkpoint was taken with a WAL on another host, or
//     the directory is new or was emptied. PruneCheckpoint records the
//     checkpoint id with the prune, and compaction keeps the highest
//     (PruneHorizon), so the operator refuses a checkpoint older than it.
//
// # Limits
//
// After a scale-up, the old logs that span several new subtasks stay on
// disk (each subtask has copied its part) until a restore at a parallelism
// whose ranges contain them; delete them by hand once a checkpoint at the
// new parallelism has completed.
package wal

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/agent/internal/groupcommit"
	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/internal/mutant"
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
	// w is the group-commit writer (guarantee 2); its batches are buffers
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
	// it goes (guarantee 1).
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

// storeID reads the store id of dir, creating it if there is none (new
// reports that). Subtasks opening at once agree: the first link wins.
func storeID(dir string, opts Options) (id string, created bool, err error) {
	fs := opts.FS
	path := fs.PathJoin(dir, idFile)
	for range 2 {
		b, err := readAll(fs, path)
		if err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b)), created, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", false, fmt.Errorf("wal: reading the store id: %w", err)
		}
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", false, fmt.Errorf("wal: %w", err)
		}
		tmp := fs.PathJoin(dir, idFile+"."+hex.EncodeToString(r[:])+".tmp")
		if err := writeSynced(fs, tmp, []byte(hex.EncodeToString(r[:])+"\n"), !opts.NoSync); err != nil {
			return "", false, fmt.Errorf("wal: writing the store id: %w", err)
		}
		lerr := fs.Link(tmp, path) // fails if another subtask was first
		fs.Remove(tmp)
		if lerr != nil && !errors.Is(lerr, os.ErrExist) {
			return "", false, fmt.Errorf("wal: writing the store id: %w", lerr)
		}
		if err := syncDir(dir, opts); err != nil {
			return "", false, err
		}
		created = true
	}
	return "", false, fmt.Errorf("wal: %s is empty; delete it (the directory's store id is lost)", path)
}

// readAll reads the file at path through fs.
func readAll(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeSynced writes data to a new file at path through fs, fsynced when
// sync is set.
func writeSynced(fs vfs.FS, path string, data []byte, sync bool) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

type logFile struct {
	path string
	rng  keygroup.Range
}

func (s *Store) logs() ([]logFile, error) {
	ents, err := s.opts.FS.List(s.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	var out []logFile
	for _, e := range ents {
		var a, b int
		if n, _ := fmt.Sscanf(e, "kg-%05d-%05d.wal", &a, &b); n == 2 && strings.HasSuffix(e, ".wal") {
			out = append(out, logFile{path: filepath.Join(s.dir, e), rng: keygroup.Range{Start: a, End: b}})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

// load replays one log into memory, keeping the records of s's key
// groups; it stops at the first torn or corrupt record.
func (s *Store) load(path string) error {
	f, err := s.opts.FS.Open(path)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	return s.loadFrom(path, f)
}

// loadFrom replays the log read from f (named path in errors).
func (s *Store) loadFrom(path string, f io.Reader) error {
	r := bufio.NewReaderSize(f, 1<<16)
	var hdr [headerLen]byte
	// With the planted bug, each record is replayed only once the next
	// one is read, so the file's last one never is.
	var held []byte
	var heldTyp byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil // end, or a torn header
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		sum := binary.LittleEndian.Uint32(hdr[4:8])
		if n > 1<<30 {
			return nil
		}
		payload, err := readPayload(r, n)
		if err != nil {
			return nil
		}
		c := crc32.Update(crc32.Checksum(hdr[8:9], crcTable), crcTable, payload)
		if c != sum {
			return nil
		}
		typ := hdr[8]
		if mutant.On(mutant.WALRestoreSkipsLast) {
			typ, payload, heldTyp, held = heldTyp, held, typ, payload
			if payload == nil {
				continue
			}
		}
		if err := s.replay(typ, payload); err != nil {
			return fmt.Errorf("wal: %s: %w", path, err)
		}
	}
}

// readPayload reads a record's payload of n bytes. A torn or corrupt
// header may claim up to 1 GiB: beyond 1 MiB the buffer grows with the
// bytes actually there instead of being allocated in full up front.
func readPayload(r io.Reader, n uint32) ([]byte, error) {
	if n <= 1<<20 {
		payload := make([]byte, n)
		_, err := io.ReadFull(r, payload)
		return payload, err
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type discardRec struct {
	Key []byte         `json:"key"`
	Pos agent.Position `json:"pos"`
}

func (s *Store) replay(typ byte, payload []byte) error {
	switch typ {
	case recPut:
		var st agent.ActionState
		if err := json.Unmarshal(payload, &st); err != nil {
			return err
		}
		if s.rng.Contains(st.KeyGroup) {
			s.applyPut(&st, int64(len(payload)+headerLen))
		}
	case recDiscard:
		var d discardRec
		if err := json.Unmarshal(payload, &d); err != nil {
			return err
		}
		s.applyDiscard(d.Key, d.Pos)
	case recPrune:
		var p []agent.KeySeq
		if err := json.Unmarshal(payload, &p); err != nil {
			return err
		}
		s.applyPrune(p)
	case recPruneCP:
		var p pruneCP
		if err := json.Unmarshal(payload, &p); err != nil {
			return err
		}
		s.applyPrune(p.UpTo)
		s.horizon = max(s.horizon, p.Checkpoint)
	default:
		return fmt.Errorf("unknown record type %d", typ)
	}
	return nil
}

func (s *Store) applyPut(st *agent.ActionState, size int64) {
	if old, had := s.idx.Put(st.ID.Key, keyOf(&st.ID), actionindex.Position(st.Pos), entry{st: st, size: size}); had {
		s.live -= old.V.size
	}
	s.live += size
}

// dropped counts a run the index removed out of the live bytes.
func (s *Store) dropped(r actionindex.Run[runKey, entry]) { s.live -= r.V.size }

func (s *Store) applyDiscard(key []byte, pos agent.Position) {
	s.idx.DiscardFrom(key, actionindex.Position(pos), s.dropped)
}

func (s *Store) applyPrune(upTo []agent.KeySeq) {
	for _, p := range upTo {
		s.idx.Prune(p.Key, p.Seq, s.dropped)
	}
}

// liveRecords encodes every live state (callers hold mu or own s).
func (s *Store) liveRecords() ([]byte, error) {
	var buf []byte
	e := getEncoder()
	defer putEncoder(e)
	// By key, then in the order of the runs' names (RunID.String), as
	// always.
	type named struct {
		key, name string
		st        *agent.ActionState
	}
	runs := make([]named, 0, s.idx.Len())
	for k, r := range s.idx.All() {
		runs = append(runs, named{k, r.V.st.ID.String(), r.V.st})
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].key != runs[j].key {
			return runs[i].key < runs[j].key
		}
		return runs[i].name < runs[j].name
	})
	for _, r := range runs {
		if err := e.record(recPut, func(b []byte) ([]byte, error) { return e.appendState(b, r.st) }); err != nil {
			return nil, err
		}
		buf = append(buf, e.buf...)
	}
	return buf, nil
}

// rewrite replaces the log with the live states: written to a temporary
// file, fsynced, renamed over the log.
func (s *Store) rewrite() error {
	buf, err := s.liveRecords()
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if s.horizon > 0 {
		h, err := json.Marshal(pruneCP{Checkpoint: s.horizon})
		if err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		buf = append(appendRecord(nil, recPruneCP, h), buf...)
	}
	tmp := s.path + ".tmp"
	f, err := s.opts.FS.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("wal: writing %s: %w", tmp, err)
	}
	if !s.opts.NoSync {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("wal: syncing %s: %w", tmp, err)
		}
	}
	if err := s.opts.FS.Rename(tmp, s.path); err != nil {
		f.Close()
		return fmt.Errorf("wal: %w", err)
	}
	if err := syncDir(s.dir, s.opts); err != nil {
		f.Close()
		return err
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f, s.size = f, int64(len(buf))
	return nil
}

// mkdirAllSynced creates dir and its missing parents, syncing the parent
// of each directory it creates, and dir's parent in any case. Syncing only
// dir's parent lost the whole path in a machine crash when more than dir
// was new (the simulator's seed 29 with the agent branch: a WAL in
// /agent-wal/agent, the entry of /agent-wal in / never synced).
func mkdirAllSynced(dir string, opts Options) error {
	parent := filepath.Dir(dir)
	if _, err := opts.FS.Stat(dir); err == nil {
		return syncDir(parent, opts)
	}
	if parent != dir {
		if err := mkdirAllSynced(parent, opts); err != nil {
			return err
		}
	}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return syncDir(parent, opts)
}

func syncDir(dir string, opts Options) error {
	if opts.NoSync {
		return nil
	}
	d, err := opts.FS.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: syncing directory %s: %w", dir, err)
	}
	return nil
}

// write queues a record whose payload payload appends (applying it to
// memory with apply, under the lock) and waits until it is durable.
func (s *Store) write(typ byte, payload func(e *encoder, dst []byte) ([]byte, error), apply func(size int64)) error {
	b, err := s.queue(typ, payload, apply)
	if err != nil {
		return err
	}
	return b.Wait()
}

// queue queues a record as write does and returns its batch without
// waiting. The record is encoded before taking the lock, so that
// concurrent writers encode in parallel; under the lock it is only copied
// into the batch. Batches are written one after the other, so a record is
// durable only once every record queued before it is.
func (s *Store) queue(typ byte, payload func(e *encoder, dst []byte) ([]byte, error), apply func(size int64)) (*groupcommit.Batch[batch], error) {
	e := getEncoder()
	defer putEncoder(e)
	if err := e.record(typ, func(b []byte) ([]byte, error) { return payload(e, b) }); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	s.mu.Lock()
	if err := s.w.ErrLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	b := s.w.QueueLocked()
	if b.Data.buf == nil && len(s.spares) > 0 {
		b.Data.buf = s.spares[len(s.spares)-1]
		s.spares = s.spares[:len(s.spares)-1]
	}
	b.Data.buf = append(b.Data.buf, e.buf...)
	s.writes++
	apply(int64(len(e.buf)))
	s.mu.Unlock()
	s.w.Wake()
	return b, nil
}

// jsonPayload is a payload encoded by encoding/json.
func jsonPayload(v any) func(e *encoder, dst []byte) ([]byte, error) {
	return func(e *encoder, dst []byte) ([]byte, error) { return e.appendJSON(dst, v) }
}

// flusher writes the store's batches for its group-commit writer (a type
// of its own, so that Flush is not in Store's API).
type flusher Store

// Flush writes and fsyncs one batch (guarantees 1, 2): called by the
// writer's goroutine, one batch at a time, without mu; records queued
// meanwhile form the next batch.
func (f *flusher) Flush(b *batch) error {
	s := (*Store)(f)
	if s.beforeSync != nil {
		s.beforeSync()
	}
	_, err := s.f.Write(b.buf)
	if err == nil && !s.opts.NoSync && !mutant.On(mutant.WALAckWithoutSync) {
		err = s.f.Sync()
	}
	if err != nil {
		err = fmt.Errorf("wal: writing %s: %w (the action-state store cannot record; check the disk)", s.path, err)
	}
	return err
}

// FlushedLocked accounts for a batch written (or failed: guarantee 6) and
// compacts the log once it has grown past its bound (guarantee 5).
func (f *flusher) FlushedLocked(b *batch, err error) error {
	s := (*Store)(f)
	s.size += int64(len(b.buf))
	s.syncs++
	s.keepSpare(b.buf[:0])
	if err == nil && s.size > s.opts.MaxLogBytes && s.size > 2*s.live {
		err = s.rewrite()
	}
	return err
}

// keepSpare keeps buf for a later batch: the two largest buffers are
// kept, up to 4 MiB each (callers hold mu).
func (s *Store) keepSpare(buf []byte) {
	switch {
	case cap(buf) > 4<<20:
	case len(s.spares) < 2:
		s.spares = append(s.spares, buf)
	default:
		small := 0
		if cap(s.spares[1]) < cap(s.spares[0]) {
			small = 1
		}
		if cap(buf) > cap(s.spares[small]) {
			s.spares[small] = buf
		}
	}
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

// PruneCheckpoint implements agent.Checkpointed (guarantee 7): Prune, with
// the checkpoint id in the same record.
func (s *Store) PruneCheckpoint(checkpoint int64, upTo []agent.KeySeq) error {
	return s.write(recPruneCP, jsonPayload(pruneCP{Checkpoint: checkpoint, UpTo: upTo}), func(int64) {
		s.applyPrune(upTo)
		s.horizon = max(s.horizon, checkpoint)
	})
}

// PruneHorizon implements agent.Checkpointed (guarantee 7).
func (s *Store) PruneHorizon() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.horizon
}

// marker is the recovery marker of one subtask's store.
type marker struct {
	Version int    `json:"v"`
	Dir     string `json:"dir"`
	Host    string `json:"host,omitempty"`
	StoreID string `json:"store"`
}

// Marker implements agent.Checkpointed (guarantee 7).
func (s *Store) Marker() ([]byte, error) {
	host, _ := os.Hostname()
	return json.Marshal(marker{Version: 1, Dir: s.dir, Host: host, StoreID: s.id})
}

// Restore implements agent.Checkpointed (guarantee 7): Open has read the
// logs; Restore checks that they are the ones the markers were taken with.
func (s *Store) Restore(markers [][]byte) error {
	for _, raw := range markers {
		var m marker
		if err := json.Unmarshal(raw, &m); err != nil || m.Version != 1 || m.StoreID == "" {
			return fmt.Errorf("wal: unreadable recovery marker %q (written by a newer weir, or by another store?)", raw)
		}
		if m.StoreID == s.id {
			continue
		}
		now := "holds store " + s.id
		if s.newID {
			now = "had no store (it is new, or was emptied) and now holds store " + s.id
		}
		return fmt.Errorf("wal: %w: the checkpoint's action states were recorded by store %s in directory %s on host %q; directory %s %s: the states of the checkpoint's unfinished actions are not there (restored on another host, or with a new directory? restore where the WAL is, or use the Kafka store to restore anywhere)",
			agent.ErrStatesMissing, m.StoreID, m.Dir, m.Host, s.dir, now)
	}
	return nil
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
