package state

// nosyncFS is the file system of the Pebble backend's working database: the
// operating system's, with every fsync a no-op.
//
// Invariant: the working database is never a source of truth (pebble.go,
// invariant 5): it runs without a write-ahead log, is emptied when opened,
// and a restart restores from a checkpoint, whose upload (package
// checkpoint) syncs what it copies. So syncing the working files only
// slows the memtable flush and the Pebble checkpoint of a native
// checkpoint's synchronous part, by tens of milliseconds per fsync on
// ordinary disks.

import (
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

func (fs nosyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return wrapFile(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs nosyncFS) Unwrap() vfs.FS { return fs.FS }
