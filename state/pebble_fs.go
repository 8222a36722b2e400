package state

// nosyncFS is the file system of the Pebble backend's working database: the
// operating system's, with every fsync a no-op.
//
// Invariant: the working database is never a source of truth (P5 in
// pebble.go): it is emptied when opened, and a restart restores from a
// checkpoint, whose upload (package checkpoint) syncs what it copies. So
// syncing the working files (the write-ahead log included) only slows the
// per-record path, the flushes and the Pebble checkpoint of a native
// checkpoint's synchronous part, by tens of milliseconds per fsync on
// ordinary disks. A "sync" still writes Pebble's buffers to the file
// before it returns, which is what makes the write-ahead log copied by a
// native checkpoint complete (pebble_native.go, PN1). Log files
// are not recycled (ReuseForWrite), so a copied log holds no dead bytes.

import (
	"errors"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type nosyncFS struct{ vfs.FS }

type nosyncFile struct{ vfs.File }

func (nosyncFile) Sync() error                { return nil }
func (nosyncFile) SyncData() error            { return nil }
func (nosyncFile) SyncTo(int64) (bool, error) { return true, nil }
func wrapFile(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return nosyncFile{f}, nil
}

func (fs nosyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return wrapFile(fs.FS.Create(name, c))
}

func (fs nosyncFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return wrapFile(fs.FS.Open(name, opts...))
}

func (fs nosyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return wrapFile(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs nosyncFS) OpenDir(name string) (vfs.File, error) { return wrapFile(fs.FS.OpenDir(name)) }

// ReuseForWrite does not reuse: it removes oldname and creates newname
// (vfs.FS allows this). A recycled write-ahead log keeps the stale tail of
// the log it was, and a native checkpoint copies whole log files: reusing
// would add up to a memtable of dead bytes to every checkpoint.
func (fs nosyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.FS.Remove(oldname); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return wrapFile(fs.FS.Create(newname, c))
}

func (fs nosyncFS) Unwrap() vfs.FS { return fs.FS }
