package checkpoint

// Native keyed state: a state backend's own files (a Pebble checkpoint)
// instead of canonical per-key-group blobs, for incremental checkpoints.
//
// Invariants:
//
//	N1. Shared files (SSTs, immutable once written) live under
//	    BASE/shared/<owner>/<name>, where BASE is the checkpoint base
//	    location (a directory or a bucket prefix) and owner names one database instance
//	    (<uid>-<subtask>-<instance id>); a file is uploaded once and
//	    referenced by every later checkpoint that still needs it. The
//	    manifest records each reference's path relative to BASE, size and
//	    CRC-32C.
//	N2. Private files (the database's MANIFEST, OPTIONS and the like, which
//	    change from one checkpoint to the next) are blobs of the subtask's
//	    data file, like key-group blobs (I1 holds for them).
//	N3. Retain deletes a shared file only when no complete checkpoint left
//	    under BASE references it. It runs after a checkpoint is written and
//	    before the next one starts (one checkpoint at a time), so it never
//	    races an upload; an upload that a later checkpoint reuses is checked
//	    to exist first (an aborted checkpoint's uploads are collected).
//	N4. Savepoints never hold native state: they are canonical.

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SharedDirName is the directory under a checkpoint base that holds the
// shared files of native state.
const SharedDirName = "shared"

// NativeState is a state backend's native snapshot of one subtask.
type NativeState struct {
	// Format names the backend's format, e.g. "pebble-v1".
	Format string
	// Start and End are the key groups (inclusive) the state covers.
	Start, End int
	// Shared are the immutable files kept under BASE/shared (N1).
	Shared []SharedFile
	// Private are the other files, stored with the snapshot (N2).
	Private []PrivateFile
}

// SharedFile is one reference to a shared file.
type SharedFile struct {
	// Path is relative to the checkpoint base: shared/<owner>/<name>.
	Path string
	Size int64
	CRC  uint32
	// base is the checkpoint base location, store its store and baseKey
	// its key there (set by Read and Upload).
	base    string
	store   Store
	baseKey string
}

// PrivateFile is one private file of native state.
type PrivateFile struct {
	Name string
	Data Blob
}

// Size returns the bytes the native state references (shared and private).
func (n *NativeState) Size() int64 {
	var s int64
	for _, f := range n.Shared {
		s += f.Size
	}
	for _, f := range n.Private {
		s += f.Data.Len()
	}
	return s
}

// Materialize writes the files of n into the local directory dir
// (created; it must not exist yet): shared files are hard-linked when they
// are in a local directory on the same file system (they are immutable,
// and a database deletes files, never rewrites them), and copied or
// downloaded otherwise, and their sizes and checksums are verified either
// way. An error names the file that is missing or corrupt.
func (n *NativeState) Materialize(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: create %s: %w", dir, err)
	}
	for _, f := range n.Shared {
		src := Join(f.base, f.Path)
		size, crc, err := fetchShared(f, filepath.Join(dir, path.Base(f.Path)))
		if err != nil {
			return fmt.Errorf("checkpoint: shared file %s of native state: %w", src, err)
		}
		if size != f.Size || crc != f.CRC {
			return fmt.Errorf("checkpoint: shared file %s is corrupt: %d bytes with CRC %08x, the manifest says %d bytes with CRC %08x",
				src, size, crc, f.Size, f.CRC)
		}
	}
	for _, f := range n.Private {
		data, err := f.Data.Bytes()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), data, 0o644); err != nil {
			return fmt.Errorf("checkpoint: write %s: %w", f.Name, err)
		}
	}
	return nil
}

// fetchShared puts shared file f at the local path dst, a hard link when
// f is on the operating system's file system and a copy otherwise, and
// returns its size and CRC-32C.
func fetchShared(f SharedFile, dst string) (int64, uint32, error) {
	key := keyJoin(f.baseKey, f.Path)
	if d, ok := f.store.(*dirStore); ok && d.fs == vfs.Default {
		if err := os.Link(d.path(key), dst); err == nil {
			in, err := os.Open(dst)
			if err != nil {
				return 0, 0, err
			}
			defer in.Close()
			h := crc32.New(castagnoli)
			size, err := io.Copy(h, in)
			return size, h.Sum32(), err
		}
	}
	in, err := f.store.ReadRange(key, 0, -1)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, 0, err
	}
	h := crc32.New(castagnoli)
	size, err := io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return 0, 0, err
	}
	return size, h.Sum32(), nil
}

// Uploader copies the shared files of one database instance into
// BASE/shared/<owner> (a directory or a bucket prefix), remembering what it
// uploaded so that a later checkpoint copies only new files (incremental
// checkpoints). It is for one goroutine at a time.
type Uploader struct {
	base, owner string
	store       Store
	key         string                // base's key in store
	err         error                 // from opening base, returned by Upload
	done        map[string]SharedFile // by file name
	// Copied and Reused count files of the last Upload.
	Copied, Reused int
	// CopiedBytes is the bytes copied by the last Upload.
	CopiedBytes int64
}

// NewUploader returns an uploader into BASE/shared/<owner>, where base is
// a checkpoint base location (a path or a URL; an invalid one makes
// Upload fail).
func NewUploader(base, owner string) *Uploader {
	store, key, err := Storage{}.open(base)
	return &Uploader{base: base, owner: owner, store: store, key: key, err: err, done: map[string]SharedFile{}}
}

// Seed makes the uploader reuse files of a restored native state: after a
// restore, the database's files of these names are the very files of the
// checkpoint (a database never reuses a file number), so the next
// checkpoint references them instead of uploading them again. Files under
// another checkpoint base are ignored.
func (u *Uploader) Seed(files []SharedFile) {
	for _, f := range files {
		if canonical(f.base) == canonical(u.base) {
			u.done[path.Base(f.Path)] = f
		}
	}
}

// Upload makes a NativeState of the files in the local directory dir (a
// backend's checkpoint): files for which shared(name) is true are uploaded
// unless uploaded before (and still there, N3); the others become private
// blobs. The uploaded files are durable when it returns.
func (u *Uploader) Upload(dir, format string, start, end int, shared func(name string) bool) (*NativeState, error) {
	if u.err != nil {
		return nil, u.err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", dir, err)
	}
	n := &NativeState{Format: format, Start: start, End: end}
	u.Copied, u.Reused, u.CopiedBytes = 0, 0, 0
	sdir := keyJoin(u.key, SharedDirName, u.owner)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		src := filepath.Join(dir, name)
		if !shared(name) {
			data, err := os.ReadFile(src)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: read %s: %w", src, err)
			}
			n.Private = append(n.Private, PrivateFile{Name: name, Data: Bytes(data)})
			continue
		}
		if f, ok := u.done[name]; ok {
			if size, err := u.store.Size(keyJoin(u.key, f.Path)); err == nil && size == f.Size {
				n.Shared = append(n.Shared, f)
				u.Reused++
				continue
			}
		}
		size, crc, err := upload(u.store, src, keyJoin(sdir, name))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: upload %s: %w", src, err)
		}
		f := SharedFile{Path: SharedDirName + "/" + u.owner + "/" + name, Size: size, CRC: crc, base: u.base, store: u.store, baseKey: u.key}
		u.done[name] = f
		n.Shared = append(n.Shared, f)
		u.Copied++
		u.CopiedBytes += size
	}
	if u.Copied > 0 {
		if err := u.store.Sync(sdir); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// upload copies the local file src to object key and returns its size and
// CRC-32C.
func upload(store Store, src, key string) (int64, uint32, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	w, err := store.Create(key)
	if err != nil {
		return 0, 0, err
	}
	h := crc32.New(castagnoli)
	size, err := io.Copy(io.MultiWriter(w, h), in)
	if err != nil {
		w.Abort()
		return 0, 0, err
	}
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	return size, h.Sum32(), nil
}

// collectShared deletes the files under BASE/shared (whose owner
// directories are owners) that no snapshot in keep references, and the
// owner directories left empty (N3). base is BASE's key in store.
func collectShared(store Store, base string, owners []Entry, keep []*Snapshot) error {
	root := keyJoin(base, SharedDirName)
	used := map[string]bool{}
	for _, s := range keep {
		for _, o := range s.Operators {
			for _, st := range o.Subtasks {
				if st != nil && st.Native != nil {
					for _, f := range st.Native.Shared {
						used[f.Path] = true
					}
				}
			}
		}
	}
	for _, o := range owners {
		if !o.IsDir {
			continue
		}
		files, err := store.List(keyJoin(root, o.Name))
		if err != nil {
			return err
		}
		left := 0
		for _, f := range files {
			rel := SharedDirName + "/" + o.Name + "/" + f.Name
			if used[rel] || f.IsDir {
				left++
				continue
			}
			if err := store.Delete(keyJoin(root, o.Name, f.Name)); err != nil {
				return err
			}
		}
		if left == 0 {
			if err := store.DeleteDir(keyJoin(root, o.Name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSharedPath rejects a shared path that is not shared/<owner>/<name>.
func checkSharedPath(p string) bool {
	parts := strings.Split(p, "/")
	return len(parts) == 3 && parts[0] == SharedDirName && parts[1] != "" && parts[2] != "" &&
		parts[1] != ".." && parts[2] != ".." && !strings.ContainsAny(p, `\`)
}
