package state

// Native snapshots of the Pebble backend, for incremental checkpoints.
//
// Invariants:
//
//	PN1. CheckpointNative is the synchronous part: a Pebble checkpoint into
//	    a staging directory beside the working one, made of hard links to
//	    the immutable SSTs plus copies of the small MANIFEST and OPTIONS and
//	    of the write-ahead log files, which hold what the memtables hold.
//	    The memtable is not flushed (a flush waits for the flush and
//	    compaction backlog: hundreds of milliseconds after a bulk load).
//	    WithFlushedWAL writes the log writer's buffer to the file first, so
//	    the copied log holds every write made before the call; the caller
//	    (the operator's goroutine, at the barrier) makes no write during the
//	    call, so it holds none made after. Its cost is the copy of the
//	    write-ahead log (at most a few memtables), not the state size.
//	PN2. A native snapshot holds every key group of the backend's range and
//	    nothing else (a restore deletes the key groups it does not own).
//	PN3. RestoreNative takes the old database whose key-group range overlaps
//	    the new range most as the base, deletes the key groups outside the
//	    new range with range deletions, and copies the overlapping key groups
//	    of the other old databases into it (opened read-only), as Flink's
//	    RocksDB backend does on rescale.
//	PN4. Entries restored natively are not decoded at registration (they were
//	    written by the same states); a type change across a native
//	    checkpoint shows at the first access, as a panic naming the state.
//	PN5. Opening a native snapshot replays its write-ahead log, read-only
//	    opens included (copyKeyGroups, ForEachNativeKeyGroup): Pebble keeps
//	    the replayed writes in memtables then.
//	PN6. Write-ahead logs other than the newest are closed and never change
//	    (the working database does not recycle logs, pebble_fs.go, and never
//	    reuses a file number), so they are shared files, uploaded once; the
//	    newest is still appended to, so the snapshot names it
//	    NNNNNN.log.open, a private file, and the name is restored before
//	    Pebble opens the snapshot. So a checkpoint uploads the log written
//	    since the previous one, not every unflushed memtable again.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// NativeFormat names the format of the Pebble backend's native snapshots
// (checkpoint.NativeState.Format): a Pebble checkpoint whose open
// write-ahead log is named with openLogSuffix (PN6). Format
// "pebble-v1" (no write-ahead log: the memtable was flushed) reads as the
// same.
const NativeFormat = "pebble-v2"

// NativeFormatReadable reports whether this build restores native
// snapshots of format f.
func NativeFormatReadable(f string) bool { return f == NativeFormat || f == "pebble-v1" }

// openLogSuffix marks the write-ahead log that was open (still written
// to) when a native snapshot was taken (PN6).
const openLogSuffix = ".open"

// NativeShared reports whether a file of a native snapshot is immutable
// (an SST, a blob file or a closed write-ahead log), so that it can be
// shared between checkpoints.
func NativeShared(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") || strings.HasSuffix(name, ".log")
}

// markOpenLog renames the newest write-ahead log of the staging directory
// dir, the one the database still appends to, to NNNNNN.log.open, so that
// it is a private file of the snapshot (PN6).
func markOpenLog(dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		return err
	}
	slices.Sort(logs) // fixed-width file numbers
	last := logs[len(logs)-1]
	return os.Rename(last, last+openLogSuffix)
}

// unmarkOpenLog undoes markOpenLog in a materialized native snapshot, before
// Pebble opens it.
func unmarkOpenLog(dir string) error {
	open, err := filepath.Glob(filepath.Join(dir, "*.log"+openLogSuffix))
	if err != nil {
		return err
	}
	for _, f := range open {
		if err := os.Rename(f, strings.TrimSuffix(f, openLogSuffix)); err != nil {
			return fmt.Errorf("state: preparing the native snapshot in %s: %w", dir, err)
		}
	}
	return nil
}

// NativePart is one old database to restore from: the directory its files
// were materialized into (on the same file system as the backend's working
// directory; see NativeRestoreDir) and the key groups it holds.
type NativePart struct {
	Dir        string
	Start, End int
}

// InstanceID returns a random id of the backend's current database
// instance (it changes with RestoreNative), "" for the memory backend.
// Native snapshots use it to name their shared files, and the checkpoint
// side keeps its bookkeeping of uploaded files per instance id.
func (b *Backend[K]) InstanceID() string {
	p := b.pebble()
	if p == nil {
		return ""
	}
	if p.instance == "" {
		var r [6]byte
		rand.Read(r[:])
		p.instance = hex.EncodeToString(r[:])
	}
	return p.instance
}

// CheckpointNative writes a native snapshot of the Pebble backend for
// checkpoint id into a new staging directory, which it returns; the caller
// uploads its files and removes it. It is the synchronous part of a native
// checkpoint (PN1).
func (b *Backend[K]) CheckpointNative(id int64) (string, error) {
	p := b.pebble()
	if p == nil {
		return "", fmt.Errorf("state: native snapshots need the Pebble backend")
	}
	dir := fmt.Sprintf("%s.chk-%d", p.dir, id)
	if err := p.flush(); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("state: clearing the staging directory %s: %w", dir, err)
	}
	if err := p.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("state: Pebble checkpoint into %s: %w", dir, err)
	}
	if err := markOpenLog(dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("state: Pebble checkpoint into %s: %w", dir, err)
	}
	return dir, nil
}

// Flush writes the Pebble backend's memtables to SSTs and waits for it (a
// no-op for the memory backend). Native checkpoints do not need it
// (PN1); it makes the files of the next one deterministic, for
// tests, or moves the flush work ahead of a barrier.
func (b *Backend[K]) Flush() error {
	p := b.pebble()
	if p == nil {
		return nil
	}
	if err := p.flush(); err != nil {
		return err
	}
	if err := p.db.Flush(); err != nil {
		return fmt.Errorf("state: flushing the Pebble memtable: %w", err)
	}
	return nil
}

// NativeRestoreDir returns the directory into which old database i is to be
// materialized before RestoreNative (beside the working directory, so that
// the base can be moved into place).
func (b *Backend[K]) NativeRestoreDir(i int) string {
	p := b.pebble()
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%s.restore-%d", p.dir, i)
}

// RestoreNative replaces the backend's database, which must be empty, with
// the key groups of its range found in parts (PN3), and returns the
// index of the part taken as the base (its files are now the database's).
// The parts' directories are consumed.
func (b *Backend[K]) RestoreNative(parts []NativePart) (int, error) {
	p := b.pebble()
	if p == nil {
		return -1, fmt.Errorf("state: native restore needs the Pebble backend")
	}
	if len(parts) == 0 {
		return -1, nil
	}
	best, err := b.restoreNative(parts)
	return best, err
}

func (b *Backend[K]) restoreNative(parts []NativePart) (int, error) {
	p := b.pebble()
	defer func() {
		for _, part := range parts {
			os.RemoveAll(part.Dir)
		}
	}()
	overlap := func(part NativePart) int {
		return max(0, min(part.End, b.rng.End)-max(part.Start, b.rng.Start)+1)
	}
	best := 0
	for i, part := range parts {
		if overlap(part) > overlap(parts[best]) {
			best = i
		}
	}
	base := parts[best]
	if err := unmarkOpenLog(base.Dir); err != nil {
		return best, err
	}
	p.dropCache() // the database is replaced (PC6)
	if err := p.db.Close(); err != nil {
		return best, fmt.Errorf("state: closing the Pebble database for a restore: %w", err)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return best, fmt.Errorf("state: native restore: %w", err)
	}
	if err := os.Rename(base.Dir, p.dir); err != nil {
		return best, fmt.Errorf("state: native restore: %w", err)
	}
	db, err := openPebble(p.fs, p.dir, p.memTable, false)
	if err != nil {
		// Leave a usable (empty) database behind.
		os.RemoveAll(p.dir)
		if db2, err2 := openPebble(p.fs, p.dir, p.memTable, false); err2 == nil {
			p.db = db2
		}
		return best, err
	}
	p.db, p.instance, p.keyEpoch = db, "", 0
	// Range deletions for the key groups that left (the demand).
	if base.Start < b.rng.Start {
		if err := db.DeleteRange(kgPrefix(0), kgPrefix(b.rng.Start), noSync); err != nil {
			return best, fmt.Errorf("state: native restore: %w", err)
		}
	}
	if base.End > b.rng.End {
		if err := db.DeleteRange(kgPrefix(b.rng.End+1), kgPrefix(0xffff), noSync); err != nil {
			return best, fmt.Errorf("state: native restore: %w", err)
		}
	}
	for i, part := range parts {
		if i == best || overlap(part) == 0 {
			continue
		}
		if err := copyKeyGroups(db, part.Dir, max(part.Start, b.rng.Start), min(part.End, b.rng.End)); err != nil {
			return best, fmt.Errorf("state: native restore from %s: %w", part.Dir, err)
		}
	}
	return best, nil
}

// openNativeReadOnly opens the native snapshot materialized in dir for
// reading, its open write-ahead log renamed back so that Pebble replays it.
func openNativeReadOnly(dir string) (*pebble.DB, error) {
	if err := unmarkOpenLog(dir); err != nil {
		return nil, err
	}
	return openPebble(vfs.Default, dir, 0, true)
}

// copyKeyGroups copies key groups [start, end] of the database in dir into
// db, in batches.
func copyKeyGroups(db *pebble.DB, dir string, start, end int) error {
	src, err := openNativeReadOnly(dir)
	if err != nil {
		return err
	}
	defer src.Close()
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: kgPrefix(start), UpperBound: kgPrefix(end + 1)})
	if err != nil {
		return err
	}
	batch := db.NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			batch.Close()
			return err
		}
		batch.Set(it.Key(), v, nil)
		if batch.Len() > 4<<20 {
			err := batch.Commit(noSync)
			batch.Close()
			if err != nil {
				it.Close()
				return err
			}
			batch = db.NewBatch()
		}
	}
	if err := it.Close(); err != nil {
		batch.Close()
		return err
	}
	err = batch.Commit(noSync)
	batch.Close()
	return err
}

// ForEachNativeKeyGroup calls f with the canonical snapshot of every key
// group in [start, end] that has entries, read from the native snapshot
// materialized in dir: how a memory backend restores from a Pebble
// checkpoint.
func ForEachNativeKeyGroup(dir string, start, end int, f func(kg int, blob []byte) error) error {
	db, err := openNativeReadOnly(dir)
	if err != nil {
		return err
	}
	defer db.Close()
	for kg := start; kg <= end; kg++ {
		secs, err := sectionsOf(db, kg)
		if err != nil {
			return fmt.Errorf("state: reading key group %d of %s: %w", kg, filepath.Base(dir), err)
		}
		if blob := appendSections(nil, kg, secs); len(blob) > 0 {
			if err := f(kg, blob); err != nil {
				return err
			}
		}
	}
	return nil
}
