package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
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
// A Store is safe for concurrent use.
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
// name, fsynced and renamed into place; Publish then fsyncs the object's
// directory and that directory's parent, so that neither the new entry
// nor a new snapshot directory is lost by a crash after it returned.
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
	p := d.path(key)
	if err := d.fs.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: create %s: %w", filepath.Dir(p), err)
	}
	f, err := d.fs.Create(p+tmpSuffix, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: create %s: %w", p+tmpSuffix, err)
	}
	return &dirWriter{fs: d.fs, f: f, path: p}, nil
}

type dirWriter struct {
	fs   vfs.FS
	f    vfs.File
	path string
}

func (w *dirWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = fmt.Errorf("checkpoint: write %s: %w", w.path+tmpSuffix, err)
	}
	return n, err
}

func (w *dirWriter) Close() error {
	tmp := w.path + tmpSuffix
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return fmt.Errorf("checkpoint: sync %s: %w", tmp, err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", tmp, err)
	}
	if err := w.fs.Rename(tmp, w.path); err != nil {
		return fmt.Errorf("checkpoint: rename %s into place: %w", tmp, err)
	}
	return nil
}

func (w *dirWriter) Abort() {
	w.f.Close()
	w.fs.Remove(w.path + tmpSuffix)
}

func (d *dirStore) Publish(key string, data []byte) error {
	w, err := d.Create(key)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	dir := filepath.Dir(d.path(key))
	if err := syncDir(d.fs, dir); err != nil {
		return err
	}
	return syncDir(d.fs, filepath.Dir(filepath.Clean(dir)))
}

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

func (d *dirStore) Sync(dir string) error { return syncDir(d.fs, d.path(dir)) }

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
