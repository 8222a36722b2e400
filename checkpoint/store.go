package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/mutant"
)

// Store is where snapshots are kept: a local directory (DirStore) or an
// object-store bucket (package checkpoint/bucket). Keys are slash-separated paths; a
// "directory" is a key prefix followed by a slash. Snapshots are written,
// read, listed and retired only through these methods, so the two kinds of
// store hold the same layout and a snapshot copied from one to the other
// reads the same.
//
// What a store guarantees:
//
//   - An object written with Create is visible under its key only when the
//     writer's Close returned nil, and then whole (no reader ever sees a
//     prefix of it); it is durable by then on a file system.
//   - Publish writes a small object atomically and durably, and makes every
//     object created before it under the same directory durable too: it is
//     a snapshot's commit point (the manifest).
//   - Sync makes the names of the objects created under a directory
//     durable (a file system's directory fsync; nothing on a bucket, whose
//     writes are durable when they return).
//
// A Store is safe for concurrent use. A Store that can also create an
// object only if its key is free implements ExclusivePublisher (both of
// this package's stores do); snapshots are then fenced (see Fence).
type Store interface {
	// Create starts writing object key. Nothing is visible until the
	// writer's Close returns nil; Abort discards what was written.
	Create(key string) (ObjectWriter, error)
	// Publish writes data as object key, atomically and durably (see the
	// type comment).
	Publish(key string, data []byte) error
	// Size returns the length of object key; an error matching
	// os.ErrNotExist when there is none.
	Size(key string) (int64, error)
	// ReadRange returns a reader of n bytes of object key from offset off
	// (to its end when n < 0). The caller closes it.
	ReadRange(key string, off, n int64) (io.ReadCloser, error)
	// List returns the names directly under directory dir ("" is the
	// root): objects, and the subdirectories that hold objects. It returns
	// nothing, and no error, for a directory that does not exist.
	List(dir string) ([]Entry, error)
	// Delete removes object key; removing one that does not exist is not
	// an error.
	Delete(key string) error
	// DeleteDir removes every object under directory dir.
	DeleteDir(dir string) error
	// Sync makes the names of the objects created under dir durable.
	Sync(dir string) error
}

// ExclusivePublisher is the optional capability of a Store to publish an
// object only if none exists under its key, atomically: of two writers of
// one key, exactly one succeeds and the other gets an error matching
// ErrExists, whatever their interleaving. Write publishes manifests with it,
// so that a snapshot completes once, by one writer. On a Store without it
// the existence check and the write are two steps (see docs/checkpoints.md).
type ExclusivePublisher interface {
	// PublishExclusive is Publish (atomic, durable), but fails with an
	// error matching ErrExists, changing nothing, when object key exists.
	PublishExclusive(key string, data []byte) error
}

// publishExclusive publishes data as key only if key is free: atomically
// on a Store that implements ExclusivePublisher, otherwise by checking
// first (which two writers can both pass).
func publishExclusive(store Store, key string, data []byte) error {
	if x, ok := store.(ExclusivePublisher); ok {
		return x.PublishExclusive(key, data)
	}
	if _, err := store.Size(key); err == nil {
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	return store.Publish(key, data)
}

// newToken returns a random name part that no other writer picks (16 hex
// digits): it keeps the temporary and data files of concurrent writers of
// one snapshot apart.
func newToken() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Entry is one name under a directory of a Store.
type Entry struct {
	// Name is the last element of the key (no slash).
	Name string
	// IsDir tells a subdirectory from an object.
	IsDir bool
}

// ObjectWriter writes one object of a Store (see Store.Create). It is for
// one goroutine.
type ObjectWriter interface {
	io.Writer
	// Close makes the object visible (and durable on a file system); after
	// an error it is not.
	Close() error
	// Abort discards the object.
	Abort()
}

// DirStore returns the Store of the local directory tree of fs (nil means
// the operating system's file system). Keys are paths of fs (absolute or
// relative to the working directory). An object is written to a temporary
// name of its own (two writers of one key never share one), fsynced and
// renamed into place; Publish then fsyncs the object's directory and that
// directory's parent, so that neither the new entry nor a new snapshot
// directory is lost by a crash after it returned. PublishExclusive
// (ExclusivePublisher) links the temporary file to its name instead of
// renaming it: link(2) fails when the name exists, where rename replaces.
func DirStore(fs vfs.FS) Store {
	if fs == nil {
		fs = vfs.Default
	}
	return &dirStore{fs: fs}
}

type dirStore struct{ fs vfs.FS }

// tmpSuffix marks an object being written to a directory store.
const tmpSuffix = ".tmp"

func (d *dirStore) path(key string) string { return filepath.FromSlash(key) }

func (d *dirStore) Create(key string) (ObjectWriter, error) {
	w, err := d.create(key)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// create starts writing key to a temporary name of its own.
func (d *dirStore) create(key string) (*dirWriter, error) {
	p := d.path(key)
	if err := mkdirAllSynced(d.fs, filepath.Dir(p)); err != nil {
		return nil, fmt.Errorf("checkpoint: create %s: %w", filepath.Dir(p), err)
	}
	tmp := p + "." + newToken() + tmpSuffix
	f, err := d.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: create %s: %w", tmp, err)
	}
	return &dirWriter{fs: d.fs, f: f, path: p, tmp: tmp}, nil
}

// mkdirAllSynced is MkdirAll that also syncs the parent of every directory
// it creates, so that the directory's entry survives a machine crash. A
// published file's directory and its parent are synced by publish; without
// this, the first checkpoint of a new base (MkdirAll of base/chk-N) lived
// in a base whose own entry, and its parents', were never synced: a crash
// could lose every checkpoint. A directory that exists costs one Stat.
func mkdirAllSynced(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSynced(fs, parent); err != nil {
			return err
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syncDir(fs, parent); err != nil {
		// The entry may not be durable, and the directory must not stay
		// to look as if it were: the next call would find it and never
		// sync its entry again, and a crash after a later checkpoint
		// completed would lose that checkpoint (and every one after it
		// in the directory). Removed, it is created and synced again.
		if rerr := fs.Remove(dir); rerr != nil {
			return errors.Join(err, fmt.Errorf("checkpoint: remove %s, whose entry may not be durable: %w", dir, rerr))
		}
		return err
	}
	return nil
}

type dirWriter struct {
	fs   vfs.FS
	f    vfs.File
	path string
	tmp  string // the temporary name, unique to this writer
	// exclusive makes Close link the file into place (failing if the
	// name exists) instead of renaming it.
	exclusive bool
}

func (w *dirWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = fmt.Errorf("checkpoint: write %s: %w", w.tmp, err)
	}
	return n, err
}

func (w *dirWriter) Close() error {
	tmp := w.tmp
	if mutant.On(mutant.CheckpointNoSync) {
		// planted bug: the file's data is not made durable
	} else if err := w.f.Sync(); err != nil {
		w.f.Close()
		return fmt.Errorf("checkpoint: sync %s: %w", tmp, err)
	}
	if err := w.f.Close(); err != nil {
		w.fs.Remove(tmp)
		return fmt.Errorf("checkpoint: close %s: %w", tmp, err)
	}
	if w.exclusive {
		return w.link()
	}
	if err := w.fs.Rename(tmp, w.path); err != nil {
		w.fs.Remove(tmp)
		return fmt.Errorf("checkpoint: rename %s into place: %w", tmp, err)
	}
	return nil
}

// link gives the closed temporary file its name only if the name is free:
// link(2) is atomic and fails with EEXIST when the name exists, on local
// file systems and on NFS (the server decides), where the rename of Close
// would replace the other writer's object. The temporary name is removed
// either way. A file system without hard links (EPERM, ENOTSUP: some FUSE
// and SMB mounts) falls back to a check and a rename, which two writers
// can both pass (docs/checkpoints.md).
func (w *dirWriter) link() error {
	err := w.fs.Link(w.tmp, w.path)
	if err != nil && (errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EPERM)) {
		if _, serr := w.fs.Stat(w.path); serr == nil {
			w.fs.Remove(w.tmp)
			return fmt.Errorf("%w: %s", ErrExists, w.path)
		}
		if rerr := w.fs.Rename(w.tmp, w.path); rerr != nil {
			w.fs.Remove(w.tmp)
			return fmt.Errorf("checkpoint: link %s into place: %v; then rename: %w", w.tmp, err, rerr)
		}
		return nil
	}
	rerr := w.fs.Remove(w.tmp)
	switch {
	case errors.Is(err, os.ErrExist):
		return fmt.Errorf("%w: %s", ErrExists, w.path)
	case err != nil:
		return fmt.Errorf("checkpoint: link %s into place: %w", w.tmp, err)
	case rerr != nil:
		return fmt.Errorf("checkpoint: remove %s: %w", w.tmp, rerr)
	}
	return nil
}

func (w *dirWriter) Abort() {
	w.f.Close()
	w.fs.Remove(w.tmp)
}

func (d *dirStore) Publish(key string, data []byte) error {
	return d.publish(key, data, false)
}

// PublishExclusive implements ExclusivePublisher.
func (d *dirStore) PublishExclusive(key string, data []byte) error {
	return d.publish(key, data, true)
}

func (d *dirStore) publish(key string, data []byte, exclusive bool) error {
	w, err := d.create(key)
	if err != nil {
		return err
	}
	w.exclusive = exclusive
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	// The entries of what the directory holds already (a snapshot's data
	// files, renamed into place) are made durable before the key appears:
	// else a crash could keep the new entry (the manifest) and lose the
	// entries it names, and a restore would find a complete-looking
	// snapshot without its data. Found by the simulator (internal/sim,
	// seed 6329: a failed fsync of the directory after the manifest's
	// link, then a crash that kept some unsynced entries).
	dir := filepath.Dir(d.path(key))
	if err := syncDir(d.fs, dir); err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := syncDir(d.fs, dir); err != nil {
		return linkedError{err}
	}
	if err := syncDir(d.fs, filepath.Dir(filepath.Clean(dir))); err != nil {
		return linkedError{err}
	}
	return nil
}

// linkedError is a publish that failed after its object was linked into
// place: the object is there, but its entry may not be durable.
type linkedError struct{ err error }

func (e linkedError) Error() string { return e.err.Error() }
func (e linkedError) Unwrap() error { return e.err }

func (d *dirStore) Size(key string) (int64, error) {
	fi, err := d.fs.Stat(d.path(key))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (d *dirStore) ReadRange(key string, off, n int64) (io.ReadCloser, error) {
	f, err := d.fs.Open(d.path(key))
	if err != nil {
		return nil, err
	}
	if n < 0 {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		n = fi.Size() - off
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, n), f}, nil
}

func (d *dirStore) List(dir string) ([]Entry, error) {
	p := d.path(dir)
	if dir == "" {
		p = "."
	}
	names, err := d.fs.List(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("checkpoint: list %s: %w", p, err)
	}
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		fi, err := d.fs.Stat(filepath.Join(p, n))
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, Entry{Name: n, IsDir: fi.IsDir()})
	}
	return out, nil
}

func (d *dirStore) Delete(key string) error {
	if err := d.fs.Remove(d.path(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: remove %s: %w", d.path(key), err)
	}
	return nil
}

func (d *dirStore) DeleteDir(dir string) error {
	if err := d.fs.RemoveAll(d.path(dir)); err != nil {
		return fmt.Errorf("checkpoint: remove %s: %w", d.path(dir), err)
	}
	return nil
}

func (d *dirStore) Sync(dir string) error {
	p := d.path(dir)
	if p == "" {
		p = "." // the root of a relative location: the working directory
	}
	return syncDir(d.fs, p)
}

// keyJoin joins key elements; "" is the root.
func keyJoin(elem ...string) string {
	k := path.Join(elem...)
	if k == "." {
		return ""
	}
	return k
}

// keyDir returns the directory of key; "" is the root.
func keyDir(key string) string { return keyJoin(path.Dir(key)) }
