// Package faultfs provides file systems for tests of weir's storage code
// (checkpoint storage, the agent's write-ahead log, Pebble state), all
// implementations of Pebble's vfs.FS, the interface that storage takes:
//
//   - FailNth, an injector for Pebble's errorfs that fails exactly the N-th
//     operation it sees, so that a test can fail every step of a write in
//     turn (N = 1, 2, ... until the write no longer reaches an N-th step);
//   - Recorder, a file system that logs, in order, the creations, writes,
//     fsyncs and renames it passes on, so that a test can check that data
//     was synced before the rename that publishes it, and the directory
//     after.
//
// For crashes, use vfs.NewCrashableMem and its CrashClone, which keeps
// exactly the synced data and directory entries.
package faultfs

import (
	"fmt"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// FailNth is an errorfs.Injector that fails the N-th operation (1-based)
// for which Match returns true (every operation when Match is nil), with
// errorfs.ErrInjected, and lets every other operation through. It is safe
// for concurrent use.
type FailNth struct {
	N     int
	Match func(errorfs.Op) bool

	mu     sync.Mutex
	seen   int
	failed *errorfs.Op
}

// MaybeError implements errorfs.Injector.
func (f *FailNth) MaybeError(op errorfs.Op) error {
	if f.Match != nil && !f.Match(op) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen++
	if f.seen != f.N {
		return nil
	}
	f.failed = &op
	return fmt.Errorf("%w: %s of %s (operation %d)", errorfs.ErrInjected, opName(op.Kind), op.Path, f.N)
}

// String implements errorfs.Injector.
func (f *FailNth) String() string { return fmt.Sprintf("fail operation %d", f.N) }

// Failed returns the operation that was failed, if one was.
func (f *FailNth) Failed() (errorfs.Op, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		return errorfs.Op{}, false
	}
	return *f.failed, true
}

// Seen returns the number of matching operations seen so far.
func (f *FailNth) Seen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

// Wrap returns fs with the N-th matching operation failing.
func (f *FailNth) Wrap(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, f) }

// Mutating reports whether op changes the file system (a write, sync,
// rename, creation or removal), for FailNth.Match.
func Mutating(op errorfs.Op) bool { return op.Kind.ReadOrWrite() == errorfs.OpIsWrite }

func opName(k errorfs.OpKind) string {
	switch k {
	case errorfs.OpCreate:
		return "create"
	case errorfs.OpLink:
		return "link"
	case errorfs.OpOpen:
		return "open"
	case errorfs.OpOpenDir:
		return "open dir"
	case errorfs.OpRemove:
		return "remove"
	case errorfs.OpRemoveAll:
		return "remove all"
	case errorfs.OpRename:
		return "rename"
	case errorfs.OpMkdirAll:
		return "mkdir"
	case errorfs.OpList:
		return "list"
	case errorfs.OpStat, errorfs.OpFileStat:
		return "stat"
	case errorfs.OpFileRead, errorfs.OpFileReadAt:
		return "read"
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		return "write"
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return "sync"
	}
	return fmt.Sprintf("op %d", int(k))
}

// Event is one operation a Recorder passed on.
type Event struct {
	// Kind is "create", "write", "sync" (of a file), "syncdir" (of a
	// directory opened with OpenDir), "rename", "mkdir", "remove" or
	// "link".
	Kind string
	// Path is the file or directory; To the new name of a rename or link.
	Path, To string
}

func (e Event) String() string {
	if e.To != "" {
		return e.Kind + " " + e.Path + " -> " + e.To
	}
	return e.Kind + " " + e.Path
}

// Recorder is a vfs.FS that passes every call to FS and logs the mutating
// ones, in the order they returned successfully.
type Recorder struct {
	vfs.FS

	mu     sync.Mutex
	events []Event
}

// NewRecorder returns a Recorder over fs.
func NewRecorder(fs vfs.FS) *Recorder { return &Recorder{FS: fs} }

// Events returns the operations logged so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *Recorder) add(err error, kind, path, to string) {
	if err != nil {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, Event{Kind: kind, Path: path, To: to})
	r.mu.Unlock()
}

func (r *Recorder) wrap(f vfs.File, err error, path string, dir bool) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &recFile{File: f, r: r, path: path, dir: dir}, nil
}

// Create implements vfs.FS.
func (r *Recorder) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := r.FS.Create(name, c)
	r.add(err, "create", name, "")
	return r.wrap(f, err, name, false)
}

// Open implements vfs.FS.
func (r *Recorder) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := r.FS.Open(name, opts...)
	return r.wrap(f, err, name, false)
}

// OpenReadWrite implements vfs.FS.
func (r *Recorder) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := r.FS.OpenReadWrite(name, c, opts...)
	return r.wrap(f, err, name, false)
}

// OpenDir implements vfs.FS.
func (r *Recorder) OpenDir(name string) (vfs.File, error) {
	f, err := r.FS.OpenDir(name)
	return r.wrap(f, err, name, true)
}

// ReuseForWrite implements vfs.FS.
func (r *Recorder) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := r.FS.ReuseForWrite(oldname, newname, c)
	r.add(err, "rename", oldname, newname)
	return r.wrap(f, err, newname, false)
}

// Rename implements vfs.FS.
func (r *Recorder) Rename(oldname, newname string) error {
	err := r.FS.Rename(oldname, newname)
	r.add(err, "rename", oldname, newname)
	return err
}

// Link implements vfs.FS.
func (r *Recorder) Link(oldname, newname string) error {
	err := r.FS.Link(oldname, newname)
	r.add(err, "link", oldname, newname)
	return err
}

// Remove implements vfs.FS.
func (r *Recorder) Remove(name string) error {
	err := r.FS.Remove(name)
	r.add(err, "remove", name, "")
	return err
}

// RemoveAll implements vfs.FS.
func (r *Recorder) RemoveAll(name string) error {
	err := r.FS.RemoveAll(name)
	r.add(err, "remove", name, "")
	return err
}

// MkdirAll implements vfs.FS.
func (r *Recorder) MkdirAll(dir string, perm os.FileMode) error {
	err := r.FS.MkdirAll(dir, perm)
	r.add(err, "mkdir", dir, "")
	return err
}

// Unwrap implements vfs.FS.
func (r *Recorder) Unwrap() vfs.FS { return r.FS }

type recFile struct {
	vfs.File
	r    *Recorder
	path string
	dir  bool
}

func (f *recFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if n > 0 {
		f.r.add(nil, "write", f.path, "")
	}
	return n, err
}

func (f *recFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if n > 0 {
		f.r.add(nil, "write", f.path, "")
	}
	return n, err
}

func (f *recFile) sync(err error) error {
	kind := "sync"
	if f.dir {
		kind = "syncdir"
	}
	f.r.add(err, kind, f.path, "")
	return err
}

func (f *recFile) Sync() error     { return f.sync(f.File.Sync()) }
func (f *recFile) SyncData() error { return f.sync(f.File.SyncData()) }

func (f *recFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.sync(err)
	}
	return full, err
}
