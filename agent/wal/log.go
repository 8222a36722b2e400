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

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/keygroup"
)

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
