package checkpoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/killpoint"
)

// MetadataFile is the name of a snapshot's manifest.
const MetadataFile = "_metadata"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// manifest is the JSON form of a snapshot's _metadata.
type manifest struct {
	Version        int              `json:"version"`
	Kind           Kind             `json:"kind"`
	ID             int64            `json:"id"`
	TimestampMs    int64            `json:"timestampMs"`
	MaxParallelism int              `json:"maxParallelism"`
	Operators      []manifestOp     `json:"operators"`
	Extra          *json.RawMessage `json:"extra,omitempty"`
}

type manifestOp struct {
	UID         string            `json:"uid"`
	Name        string            `json:"name"`
	Parallelism int               `json:"parallelism"`
	Subtasks    []manifestSubtask `json:"subtasks"`
}

type manifestSubtask struct {
	File      string         `json:"file,omitempty"`
	KeyGroups []manifestBlob `json:"keyGroups,omitempty"`
	Lists     []manifestList `json:"lists,omitempty"`
	// Native is the subtask's native keyed state (version 2).
	Native *manifestNative `json:"native,omitempty"`
}

type manifestNative struct {
	Format  string            `json:"format"`
	Start   int               `json:"kgStart"`
	End     int               `json:"kgEnd"`
	Shared  []manifestShared  `json:"shared"`
	Private []manifestPrivate `json:"private"`
}

type manifestShared struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc"`
}

type manifestPrivate struct {
	Name string       `json:"name"`
	Blob manifestBlob `json:"blob"`
}

type manifestList struct {
	Name  string         `json:"name"`
	Mode  Redistribution `json:"mode"`
	Items []manifestBlob `json:"items"`
}

type manifestBlob struct {
	KeyGroup int    `json:"kg,omitempty"`
	Offset   int64  `json:"off"`
	Length   int64  `json:"len"`
	CRC      uint32 `json:"crc"`
}

// Storage reads and writes snapshots on a file system. The zero value uses
// the operating system's; tests inject faults through FS (package
// internal/faultfs). The package-level functions (Write, Read, List,
// Latest, Retain) are those of the zero Storage.
//
// Native state's shared files (NativeState.Materialize, Uploader) are
// read and written through the operating system's file system: Pebble's
// own checkpoints, which they copy, are there.
type Storage struct {
	// FS is the file system; nil means the operating system's (vfs.Default).
	FS vfs.FS
}

func (st Storage) fs() vfs.FS {
	if st.FS == nil {
		return vfs.Default
	}
	return st.FS
}

// Write stores s in dir with the zero Storage (see Storage.Write).
func Write(dir string, s *Snapshot) (string, error) { return Storage{}.Write(dir, s) }

// Read loads the snapshot in dir with the zero Storage (see Storage.Read).
func Read(dir string) (*Snapshot, error) { return Storage{}.Read(dir) }

// List returns the ids of the complete checkpoints under base, ascending,
// with the zero Storage.
func List(base string) ([]int64, error) { return Storage{}.List(base) }

// Latest returns the newest complete checkpoint under base with the zero
// Storage (see Storage.Latest).
func Latest(base string) (string, int64, error) { return Storage{}.Latest(base) }

// Retain applies retention under base with the zero Storage (see
// Storage.Retain).
func Retain(base string, keep int) error { return Storage{}.Retain(base, keep) }

// Write stores s in dir (created; it must not already hold a snapshot) in
// the format described in the package documentation, data first and the
// manifest last (atomically): data files are written and fsynced, the
// manifest is written to a temporary name and fsynced, renamed into place,
// and then dir and its parent are fsynced (so that neither the manifest's
// nor the snapshot directory's entry is lost by a crash after Write
// returned). It returns dir.
func (st Storage) Write(dir string, s *Snapshot) (string, error) {
	fs := st.fs()
	if _, err := fs.Stat(filepath.Join(dir, MetadataFile)); err == nil {
		return "", fmt.Errorf("checkpoint: %s already holds a snapshot; choose an empty directory", dir)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: create %s: %w", dir, err)
	}
	m := manifest{Version: 1, Kind: s.Kind, ID: s.ID, TimestampMs: s.TimestampMs, MaxParallelism: s.MaxParallelism}
	for oi, o := range s.Operators {
		mo := manifestOp{UID: o.UID, Name: o.Name, Parallelism: o.Parallelism, Subtasks: make([]manifestSubtask, len(o.Subtasks))}
		for si, st := range o.Subtasks {
			if st == nil || (len(st.KeyGroups) == 0 && len(st.Lists) == 0 && st.Native == nil) {
				continue
			}
			if st.Native != nil {
				if s.Kind == KindSavepoint {
					return "", fmt.Errorf("checkpoint: operator %q subtask %d has native state in a savepoint; savepoints must be canonical", o.UID, si)
				}
				m.Version = 2
			}
			name := fmt.Sprintf("op-%04d-sub-%04d.bin", oi, si)
			ms, err := writeSubtask(fs, filepath.Join(dir, name), st)
			if err != nil {
				return "", err
			}
			ms.File = name
			mo.Subtasks[si] = ms
		}
		m.Operators = append(m.Operators, mo)
	}
	data, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return "", fmt.Errorf("checkpoint: encode manifest: %w", err)
	}
	killpoint.Hit("checkpoint.before-manifest")
	tmp := filepath.Join(dir, MetadataFile+".tmp")
	if err := writeFileSync(fs, tmp, data); err != nil {
		return "", err
	}
	if err := fs.Rename(tmp, filepath.Join(dir, MetadataFile)); err != nil {
		return "", fmt.Errorf("checkpoint: publish manifest in %s: %w", dir, err)
	}
	if err := syncDir(fs, dir); err != nil {
		return "", err
	}
	if err := syncDir(fs, filepath.Dir(filepath.Clean(dir))); err != nil {
		return "", err
	}
	return dir, nil
}

func writeSubtask(fs vfs.FS, path string, st *SubtaskState) (manifestSubtask, error) {
	var ms manifestSubtask
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return ms, fmt.Errorf("checkpoint: create %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var off int64
	put := func(b Blob) (manifestBlob, error) {
		data, err := b.Bytes()
		if err != nil {
			return manifestBlob{}, err
		}
		if _, err := w.Write(data); err != nil {
			return manifestBlob{}, fmt.Errorf("checkpoint: write %s: %w", path, err)
		}
		mb := manifestBlob{Offset: off, Length: int64(len(data)), CRC: crc32.Checksum(data, castagnoli)}
		off += int64(len(data))
		return mb, nil
	}
	kgs := make([]int, 0, len(st.KeyGroups))
	for kg := range st.KeyGroups {
		kgs = append(kgs, kg)
	}
	sort.Ints(kgs)
	for _, kg := range kgs {
		mb, err := put(st.KeyGroups[kg])
		if err != nil {
			f.Close()
			return ms, err
		}
		mb.KeyGroup = kg
		ms.KeyGroups = append(ms.KeyGroups, mb)
	}
	names := make([]string, 0, len(st.Lists))
	for n := range st.Lists {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l := st.Lists[n]
		ml := manifestList{Name: n, Mode: l.Mode}
		for _, it := range l.Items {
			mb, err := put(it)
			if err != nil {
				f.Close()
				return ms, err
			}
			ml.Items = append(ml.Items, mb)
		}
		ms.Lists = append(ms.Lists, ml)
	}
	if n := st.Native; n != nil {
		mn := &manifestNative{Format: n.Format, Start: n.Start, End: n.End}
		for _, f := range n.Shared {
			mn.Shared = append(mn.Shared, manifestShared{Path: f.Path, Size: f.Size, CRC: f.CRC})
		}
		for _, pf := range n.Private {
			mb, err := put(pf.Data)
			if err != nil {
				f.Close()
				return ms, err
			}
			mn.Private = append(mn.Private, manifestPrivate{Name: pf.Name, Blob: mb})
		}
		ms.Native = mn
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return ms, fmt.Errorf("checkpoint: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return ms, fmt.Errorf("checkpoint: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return ms, fmt.Errorf("checkpoint: close %s: %w", path, err)
	}
	return ms, nil
}

func writeFileSync(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("checkpoint: create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: sync %s: %w", path, err)
	}
	return f.Close()
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: sync %s: %w", dir, err)
	}
	return nil
}

// ErrNoSnapshot is returned when a directory holds no complete snapshot.
var ErrNoSnapshot = errors.New("checkpoint: no complete snapshot found")

// Read loads the manifest of the snapshot in dir. Blobs are read from disk
// when asked for, and verified (I1).
func (st Storage) Read(dir string) (*Snapshot, error) {
	fs := st.fs()
	path := filepath.Join(dir, MetadataFile)
	data, err := readFile(fs, path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w in %s (no %s: the snapshot is missing or was never completed)", ErrNoSnapshot, dir, MetadataFile)
		}
		return nil, fmt.Errorf("checkpoint: read %s: %w", path, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("checkpoint: %s is corrupt: %w", path, err)
	}
	if m.Version < 1 || m.Version > FormatVersion {
		return nil, fmt.Errorf("checkpoint: %s has format version %d; this weir reads versions 1 to %d", path, m.Version, FormatVersion)
	}
	if m.MaxParallelism < 1 {
		return nil, fmt.Errorf("checkpoint: %s is corrupt: max parallelism %d", path, m.MaxParallelism)
	}
	s := &Snapshot{ID: m.ID, Kind: m.Kind, TimestampMs: m.TimestampMs, MaxParallelism: m.MaxParallelism}
	for _, mo := range m.Operators {
		o := &OperatorState{UID: mo.UID, Name: mo.Name, Parallelism: mo.Parallelism}
		for _, ms := range mo.Subtasks {
			if ms.File == "" {
				o.Subtasks = append(o.Subtasks, nil)
				continue
			}
			if strings.ContainsAny(ms.File, `/\`) {
				return nil, fmt.Errorf("checkpoint: %s is corrupt: bad file name %q", path, ms.File)
			}
			file := filepath.Join(dir, ms.File)
			fi, err := fs.Stat(file)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: snapshot %s is incomplete: %w", dir, err)
			}
			sub := &SubtaskState{KeyGroups: map[int]Blob{}, Lists: map[string]*ListState{}}
			check := func(mb manifestBlob) (Blob, error) {
				// Offset+Length could overflow: compare Length with what is
				// left after Offset instead.
				if mb.Offset < 0 || mb.Length < 0 || mb.Offset > fi.Size() || mb.Length > fi.Size()-mb.Offset {
					return nil, fmt.Errorf("checkpoint: %s is truncated or corrupt: blob at %d+%d beyond its size %d", file, mb.Offset, mb.Length, fi.Size())
				}
				return &fileBlob{fs: fs, path: file, mb: mb}, nil
			}
			for _, mb := range ms.KeyGroups {
				if mb.KeyGroup < 0 || mb.KeyGroup >= m.MaxParallelism {
					return nil, fmt.Errorf("checkpoint: %s is corrupt: key group %d outside [0,%d)", path, mb.KeyGroup, m.MaxParallelism)
				}
				b, err := check(mb)
				if err != nil {
					return nil, err
				}
				sub.KeyGroups[mb.KeyGroup] = b
			}
			for _, ml := range ms.Lists {
				l := &ListState{Mode: ml.Mode}
				for _, mb := range ml.Items {
					b, err := check(mb)
					if err != nil {
						return nil, err
					}
					l.Items = append(l.Items, b)
				}
				sub.Lists[ml.Name] = l
			}
			if mn := ms.Native; mn != nil {
				n, err := readNative(fs, dir, path, mn, m.MaxParallelism, check)
				if err != nil {
					return nil, err
				}
				sub.Native = n
			}
			o.Subtasks = append(o.Subtasks, sub)
		}
		s.Operators = append(s.Operators, o)
	}
	return s, nil
}

// readFile returns the content of the file at path.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

type fileBlob struct {
	fs   vfs.FS
	path string
	mb   manifestBlob
}

func (b *fileBlob) Len() int64 { return b.mb.Length }

func (b *fileBlob) Bytes() ([]byte, error) {
	f, err := b.fs.Open(b.path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", b.path, err)
	}
	defer f.Close()
	data := make([]byte, b.mb.Length)
	if _, err := f.ReadAt(data, b.mb.Offset); err != nil && !(errors.Is(err, io.EOF) && b.mb.Length == 0) {
		return nil, fmt.Errorf("checkpoint: read %s at %d: %w", b.path, b.mb.Offset, err)
	}
	if crc := crc32.Checksum(data, castagnoli); crc != b.mb.CRC {
		return nil, fmt.Errorf("checkpoint: %s is corrupt: checksum mismatch at offset %d (length %d)", b.path, b.mb.Offset, b.mb.Length)
	}
	return data, nil
}

// Dir returns the directory of checkpoint id under base.
func Dir(base string, id int64) string {
	return filepath.Join(base, fmt.Sprintf("chk-%012d", id))
}

// List returns the ids of the complete checkpoints under base, ascending.
func (st Storage) List(base string) ([]int64, error) {
	fs := st.fs()
	entries, err := fs.List(base)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("checkpoint: list %s: %w", base, err)
	}
	var ids []int64
	for _, e := range entries {
		id, ok := parseDir(e)
		if !ok {
			continue
		}
		if _, err := fs.Stat(filepath.Join(base, e, MetadataFile)); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

func parseDir(name string) (int64, bool) {
	if !strings.HasPrefix(name, "chk-") {
		return 0, false
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(name, "chk-"), 10, 64)
	return id, err == nil
}

// Latest returns the directory of the newest complete checkpoint under
// base, or ErrNoSnapshot.
func (st Storage) Latest(base string) (string, int64, error) {
	ids, err := st.List(base)
	if err != nil {
		return "", 0, err
	}
	if len(ids) == 0 {
		return "", 0, fmt.Errorf("%w under %s", ErrNoSnapshot, base)
	}
	id := ids[len(ids)-1]
	return Dir(base, id), id, nil
}

// Retain deletes all but the newest keep complete checkpoints under base,
// and incomplete ones older than the newest complete one.
func (st Storage) Retain(base string, keep int) (err error) {
	fs := st.fs()
	ids, err := st.List(base)
	if err != nil || len(ids) == 0 {
		return err
	}
	newest := ids[len(ids)-1]
	complete := map[int64]bool{}
	for _, id := range ids {
		complete[id] = true
	}
	cut := int64(-1)
	if len(ids) > keep {
		cut = ids[len(ids)-keep-1]
	}
	defer func() {
		if err == nil {
			err = st.retainShared(base)
		}
	}()
	entries, err := fs.List(base)
	if err != nil {
		return fmt.Errorf("checkpoint: list %s: %w", base, err)
	}
	for _, e := range entries {
		id, ok := parseDir(e)
		if !ok {
			continue
		}
		if (complete[id] && id <= cut) || (!complete[id] && id < newest) {
			if err := fs.RemoveAll(filepath.Join(base, e)); err != nil {
				return fmt.Errorf("checkpoint: remove %s: %w", e, err)
			}
		}
	}
	return nil
}

// Now is the time source of snapshot timestamps (replaceable in tests).
var Now = func() int64 { return time.Now().UnixMilli() } // lint:allow-time the default, replaceable

// readNative loads the native state of a subtask from its manifest entry,
// checking that every shared file exists with the recorded size (their
// checksums are verified when they are materialized).
func readNative(fs vfs.FS, dir, path string, mn *manifestNative, maxP int, check func(manifestBlob) (Blob, error)) (*NativeState, error) {
	if mn.Start < 0 || mn.End < mn.Start || mn.End >= maxP {
		return nil, fmt.Errorf("checkpoint: %s is corrupt: native state of key groups %d-%d outside [0,%d)", path, mn.Start, mn.End, maxP)
	}
	base := filepath.Dir(filepath.Clean(dir))
	n := &NativeState{Format: mn.Format, Start: mn.Start, End: mn.End}
	for _, f := range mn.Shared {
		if !checkSharedPath(f.Path) {
			return nil, fmt.Errorf("checkpoint: %s is corrupt: bad shared file path %q", path, f.Path)
		}
		full := filepath.Join(base, filepath.FromSlash(f.Path))
		fi, err := fs.Stat(full)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: snapshot %s is incomplete: shared file %s: %w", dir, full, err)
		}
		if fi.Size() != f.Size {
			return nil, fmt.Errorf("checkpoint: shared file %s is corrupt: %d bytes, the manifest of %s says %d", full, fi.Size(), dir, f.Size)
		}
		n.Shared = append(n.Shared, SharedFile{Path: f.Path, Size: f.Size, CRC: f.CRC, base: base})
	}
	for _, p := range mn.Private {
		if p.Name == "" || strings.ContainsAny(p.Name, `/\`) || p.Name == ".." {
			return nil, fmt.Errorf("checkpoint: %s is corrupt: bad private file name %q", path, p.Name)
		}
		b, err := check(p.Blob)
		if err != nil {
			return nil, err
		}
		n.Private = append(n.Private, PrivateFile{Name: p.Name, Data: b})
	}
	return n, nil
}

// retainShared collects the shared files that the complete checkpoints
// left under base no longer reference (N3).
func (st Storage) retainShared(base string) error {
	if _, err := st.fs().Stat(filepath.Join(base, SharedDirName)); err != nil {
		return nil
	}
	ids, err := st.List(base)
	if err != nil {
		return err
	}
	var keep []*Snapshot
	for _, id := range ids {
		s, err := st.Read(Dir(base, id))
		if err != nil {
			// Do not collect what an unreadable checkpoint may reference.
			return fmt.Errorf("checkpoint: not collecting shared files: %w", err)
		}
		keep = append(keep, s)
	}
	return collectShared(st.fs(), base, keep)
}
