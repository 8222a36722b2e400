package checkpoint

// Native keyed state: a state backend's own files (a Pebble checkpoint)
// instead of canonical per-key-group blobs, for incremental checkpoints.
//
// Invariants:
//
//	N1. Shared files (SSTs, immutable once written) live under
//	    BASE/shared/<owner>/<name>, where BASE is the checkpoint base
//	    directory and owner names one database instance
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
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
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
	// base is the checkpoint base directory (set by Read and Upload).
	base string
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

// Materialize writes the files of n into dir (created; it must not exist
// yet): shared files are hard-linked when dir is on the same file system
// (they are immutable, and a database deletes files, never rewrites them)
// and copied otherwise, and their sizes and checksums are verified either
// way. An error names the file that is missing or corrupt.
func (n *NativeState) Materialize(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: create %s: %w", dir, err)
	}
	for _, f := range n.Shared {
		src := filepath.Join(f.base, filepath.FromSlash(f.Path))
		size, crc, err := linkOrCopy(src, filepath.Join(dir, filepath.Base(f.Path)))
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

// linkOrCopy hard-links src to dst, or copies it if that fails, and returns
// its size and CRC-32C.
func linkOrCopy(src, dst string) (int64, uint32, error) {
	if err := os.Link(src, dst); err != nil {
		return copyFile(src, dst, false)
	}
	in, err := os.Open(dst)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	h := crc32.New(castagnoli)
	size, err := io.Copy(h, in)
	return size, h.Sum32(), err
}

// copyFile copies src to dst (through a temporary name, synced when sync
// is set) and returns its size and CRC-32C.
func copyFile(src, dst string, sync bool) (int64, uint32, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return 0, 0, err
	}
	h := crc32.New(castagnoli)
	size, err := io.Copy(io.MultiWriter(out, h), in)
	if err == nil && sync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, 0, err
	}
	return size, h.Sum32(), nil
}

// Uploader copies the shared files of one database instance into
// BASE/shared/<owner>, remembering what it uploaded so that a later
// checkpoint copies only new files (incremental checkpoints). It is for one
// goroutine at a time.
type Uploader struct {
	base, owner string
	done        map[string]SharedFile // by file name
	// Copied and Reused count files of the last Upload.
	Copied, Reused int
	// CopiedBytes is the bytes copied by the last Upload.
	CopiedBytes int64
}

// NewUploader returns an uploader into BASE/shared/<owner>.
func NewUploader(base, owner string) *Uploader {
	return &Uploader{base: base, owner: owner, done: map[string]SharedFile{}}
}

// Seed makes the uploader reuse files of a restored native state: after a
// restore, the database's files of these names are the very files of the
// checkpoint (a database never reuses a file number), so the next
// checkpoint references them instead of uploading them again. Files under
// another checkpoint base are ignored.
func (u *Uploader) Seed(files []SharedFile) {
	for _, f := range files {
		if filepath.Clean(f.base) == filepath.Clean(u.base) {
			u.done[filepath.Base(f.Path)] = f
		}
	}
}

// Upload makes a NativeState of the files in dir (a backend's checkpoint):
// files for which shared(name) is true are uploaded unless uploaded before
// (and still there, N3); the others become private blobs.
func (u *Uploader) Upload(dir, format string, start, end int, shared func(name string) bool) (*NativeState, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", dir, err)
	}
	n := &NativeState{Format: format, Start: start, End: end}
	u.Copied, u.Reused, u.CopiedBytes = 0, 0, 0
	sdir := filepath.Join(u.base, SharedDirName, u.owner)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: create %s: %w", sdir, err)
	}
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
		dst := filepath.Join(sdir, name)
		if f, ok := u.done[name]; ok {
			if fi, err := os.Stat(filepath.Join(u.base, filepath.FromSlash(f.Path))); err == nil && fi.Size() == f.Size {
				n.Shared = append(n.Shared, f)
				u.Reused++
				continue
			}
		}
		size, crc, err := copyFile(src, dst, true)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: upload %s: %w", src, err)
		}
		f := SharedFile{Path: SharedDirName + "/" + u.owner + "/" + name, Size: size, CRC: crc, base: u.base}
		u.done[name] = f
		n.Shared = append(n.Shared, f)
		u.Copied++
		u.CopiedBytes += size
	}
	if err := syncDir(vfs.Default, sdir); err != nil {
		return nil, err
	}
	return n, nil
}

// collectShared deletes the files under BASE/shared that no snapshot in
// keep references, and the directories left empty (N3).
func collectShared(fs vfs.FS, base string, keep []*Snapshot) error {
	root := filepath.Join(base, SharedDirName)
	owners, err := fs.List(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint: list %s: %w", root, err)
	}
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
		if fi, err := fs.Stat(filepath.Join(root, o)); err != nil || !fi.IsDir() {
			continue
		}
		files, err := fs.List(filepath.Join(root, o))
		if err != nil {
			return fmt.Errorf("checkpoint: list %s: %w", o, err)
		}
		left := 0
		for _, f := range files {
			rel := SharedDirName + "/" + o + "/" + f
			if used[rel] {
				left++
				continue
			}
			if err := fs.Remove(filepath.Join(root, o, f)); err != nil {
				return fmt.Errorf("checkpoint: remove %s: %w", rel, err)
			}
		}
		if left == 0 {
			fs.Remove(filepath.Join(root, o))
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
