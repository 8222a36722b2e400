package checkpoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/internal/mutant"
)

// MetadataFile is the name of a snapshot's manifest.
const MetadataFile = "_metadata"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// manifest is the JSON form of a snapshot's _metadata.
type manifest struct {
	Version        int   `json:"version"`
	Kind           Kind  `json:"kind"`
	ID             int64 `json:"id"`
	TimestampMs    int64 `json:"timestampMs"`
	MaxParallelism int   `json:"maxParallelism"`
	// Job names the job that took the snapshot (Snapshot.Job; omitted when
	// unnamed).
	Job string `json:"job,omitempty"`
	// Origin is Snapshot.Origin (omitted when empty).
	Origin string `json:"origin,omitempty"`
	// Epoch is the writer's fence epoch (Fence); 0 (absent) for a writer
	// without a fence.
	Epoch     int64            `json:"epoch,omitempty"`
	Operators []manifestOp     `json:"operators"`
	Extra     *json.RawMessage `json:"extra,omitempty"`
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

// Storage reads and writes snapshots at locations: a local directory path,
// a file:// URL (the same directory), or an object-store URL (s3://, gs://,
// azblob://, see Schemes and CheckLocation), in one layout (see the package
// documentation): a path goes through DirStore on FS, a bucket URL through
// the Store its driver registered (RegisterScheme; checkpoint/bucket.Store).
// The zero value uses the operating system's file system; tests inject
// faults through FS (package internal/faultfs). The package-level
// functions (Write, Read, List, Latest, Retain) are those of the zero
// Storage.
//
// Native state's shared files (NativeState.Materialize, Uploader) are read
// and written through the operating system's file system or the bucket:
// Pebble's own checkpoints, which they copy, are on the local disk.
type Storage struct {
	// FS is the file system of local locations; nil means the operating
	// system's (vfs.Default).
	FS vfs.FS
	// Store, when not nil, holds every location: locations are then keys
	// in it (slash-separated), neither paths nor URLs, and FS is unused.
	// Native state's shared files still go to the location's own store
	// (NewUploader).
	Store Store
	// Fence, when not nil, is the writer's claim on its checkpoint base
	// (ClaimLatest): Write stamps manifests with its epoch and fails with
	// ErrFenced once a newer owner has claimed the base. Nil: no fence
	// (a job that is the only writer of its checkpoints).
	Fence *Fence
}

// open returns the store of loc and loc's key in it.
func (st Storage) open(loc string) (Store, string, error) {
	if st.Store != nil {
		return st.Store, keyJoin(filepath.ToSlash(loc)), nil
	}
	u, key, err := parseLocation(loc)
	if err != nil {
		return nil, "", err
	}
	if u == nil {
		return DirStore(st.FS), key, nil
	}
	s, err := openBucket(u)
	return s, key, err
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

// Write stores s at location dir (which must not already hold a snapshot)
// in the format described in the package documentation, data first and
// the manifest last (the commit point): in a directory, each data file is
// written to a temporary name, fsynced and renamed into place, the
// manifest is linked into place, and then dir and its parent are fsynced
// (so that neither the manifest's nor the snapshot directory's entry is
// lost by a crash after Write returned); in a bucket each is one atomic
// object write. It returns dir.
//
// Two writers of one snapshot (a task's new owner and a zombie, see Fence)
// never collide: data files are named with a token of this Write's own
// (op-<operator>-sub-<subtask>-<token>.bin, named by the manifest), and the
// manifest is created only if absent (ExclusivePublisher): the loser gets an
// error matching ErrExists (or ErrFenced, when its Fence is superseded),
// its data files are removed, and the snapshot is not complete for it.
// With st.Fence set, Write also fails with ErrFenced, and the snapshot is
// not complete for this writer, when a newer owner claimed the base before
// the data are written or by the time the manifest is published; in the
// latter case the manifest stays: the new owner may have chosen to restore
// it (see Fence). When the manifest is linked but a directory's fsync then
// fails, Write removes it again (unless fenced) and fails: a snapshot
// reported failed does not look complete to List, Latest or Retain.
func (st Storage) Write(dir string, s *Snapshot) (string, error) {
	store, key, err := st.open(dir)
	if err != nil {
		return "", err
	}
	if err := st.Fence.Check(); err != nil {
		return "", err
	}
	if _, err := store.Size(keyJoin(key, MetadataFile)); err == nil {
		return "", fmt.Errorf("%w: %s already holds a snapshot; choose an empty directory", ErrExists, dir)
	}
	token := newToken()
	var written []string
	m := manifest{Version: 1, Kind: s.Kind, ID: s.ID, TimestampMs: s.TimestampMs, MaxParallelism: s.MaxParallelism,
		Job: s.Job, Origin: s.Origin, Epoch: st.Fence.epochOf()}
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
			name := fmt.Sprintf("op-%04d-sub-%04d-%s.bin", oi, si, token)
			ms, err := writeSubtask(store, keyJoin(key, name), Join(dir, name), st)
			if err != nil {
				return "", err
			}
			written = append(written, keyJoin(key, name))
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
	if err := publishExclusive(store, keyJoin(key, MetadataFile), data); err != nil {
		if !errors.Is(err, ErrExists) {
			if errors.As(err, new(linkedError)) && st.Fence.Check() == nil {
				// The manifest is linked but may not be durable, and
				// the caller takes the snapshot as failed: remove it,
				// so that no reader (List, Latest, Retain's count)
				// takes it as complete. Best effort: a crash may still
				// keep it, and then it is whole (its data were synced
				// before the link). Fenced, it stays (see Fence).
				if store.Delete(keyJoin(key, MetadataFile)) == nil {
					store.Sync(key)
				}
			}
			return "", fmt.Errorf("checkpoint: publish the manifest of %s: %w", dir, err)
		}
		// Lost the race: the data files are ours alone and unreferenced.
		for _, k := range written {
			store.Delete(k)
		}
		if ferr := st.Fence.Check(); ferr != nil {
			return "", ferr
		}
		return "", fmt.Errorf("checkpoint: publish the manifest of %s: another writer completed it first: %w", dir, err)
	}
	if err := st.Fence.Check(); err != nil {
		return "", fmt.Errorf("checkpoint: %s was published, but is not complete for this writer: %w", dir, err)
	}
	return dir, nil
}

// writeSubtask writes one subtask's data object (key; name is its
// location, for errors).
// writers pools the 1 MiB buffers of writeSubtask: allocated (and zeroed)
// per file, they were most of a small checkpoint's cost (6 MiB for 6
// subtask files of a few KiB; BenchmarkWriteSmallSnapshot).
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<20) }}

func writeSubtask(store Store, key, name string, st *SubtaskState) (manifestSubtask, error) {
	var ms manifestSubtask
	f, err := store.Create(key)
	if err != nil {
		return ms, err
	}
	w := writers.Get().(*bufio.Writer)
	w.Reset(f)
	defer func() {
		w.Reset(nil) // drop f
		writers.Put(w)
	}()
	var off int64
	put := func(b Blob) (manifestBlob, error) {
		data, err := b.Bytes()
		if err != nil {
			return manifestBlob{}, err
		}
		if _, err := w.Write(data); err != nil {
			return manifestBlob{}, err
		}
		mb := manifestBlob{Offset: off, Length: int64(len(data)), CRC: crc32.Checksum(data, castagnoli)}
		off += int64(len(data))
		return mb, nil
	}
	fail := func(err error) (manifestSubtask, error) {
		f.Abort()
		return ms, err
	}
	kgs := make([]int, 0, len(st.KeyGroups))
	for kg := range st.KeyGroups {
		kgs = append(kgs, kg)
	}
	sort.Ints(kgs)
	for _, kg := range kgs {
		mb, err := put(st.KeyGroups[kg])
		if err != nil {
			return fail(err)
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
				return fail(err)
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
				return fail(err)
			}
			mn.Private = append(mn.Private, manifestPrivate{Name: pf.Name, Blob: mb})
		}
		ms.Native = mn
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return ms, err
	}
	return ms, nil
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

// ErrNoSnapshot is returned when a location holds no complete snapshot.
var ErrNoSnapshot = errors.New("checkpoint: no complete snapshot found")

// Read loads the manifest of the snapshot at location dir. Blobs are read
// from the store when asked for, and verified (I1).
func (st Storage) Read(dir string) (*Snapshot, error) {
	store, key, err := st.open(dir)
	if err != nil {
		return nil, err
	}
	path := Join(dir, MetadataFile)
	data, err := readAll(store, keyJoin(key, MetadataFile))
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
	s := &Snapshot{ID: m.ID, Kind: m.Kind, TimestampMs: m.TimestampMs, MaxParallelism: m.MaxParallelism, Job: m.Job, Origin: m.Origin, Version: m.Version}
	for _, mo := range m.Operators {
		o := &OperatorState{UID: mo.UID, Name: mo.Name, Parallelism: mo.Parallelism}
		for _, ms := range mo.Subtasks {
			if ms.File == "" {
				o.Subtasks = append(o.Subtasks, nil)
				continue
			}
			if strings.ContainsAny(ms.File, `/\`) || ms.File == ".." {
				return nil, fmt.Errorf("checkpoint: %s is corrupt: bad file name %q", path, ms.File)
			}
			file, fkey := Join(dir, ms.File), keyJoin(key, ms.File)
			size, err := store.Size(fkey)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: snapshot %s is incomplete: %s: %w", dir, file, err)
			}
			sub := &SubtaskState{KeyGroups: map[int]Blob{}, Lists: map[string]*ListState{}}
			check := func(mb manifestBlob) (Blob, error) {
				// Offset+Length could overflow: compare Length with what is
				// left after Offset instead.
				if mb.Offset < 0 || mb.Length < 0 || mb.Offset > size || mb.Length > size-mb.Offset {
					return nil, fmt.Errorf("checkpoint: %s is truncated or corrupt: blob at %d+%d beyond its size %d", file, mb.Offset, mb.Length, size)
				}
				return &storeBlob{store: store, key: fkey, name: file, mb: mb}, nil
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
				n, err := readNative(store, parent(dir), keyDir(key), dir, path, mn, m.MaxParallelism, check)
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

// readAll returns the content of object key.
func readAll(store Store, key string) ([]byte, error) {
	r, err := store.ReadRange(key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// storeBlob is a blob of a data object, read when asked for.
type storeBlob struct {
	store Store
	key   string
	name  string // the object's location, for errors
	mb    manifestBlob
}

func (b *storeBlob) Len() int64 { return b.mb.Length }

func (b *storeBlob) Bytes() ([]byte, error) {
	r, err := b.store.ReadRange(b.key, b.mb.Offset, b.mb.Length)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", b.name, err)
	}
	defer r.Close()
	data := make([]byte, b.mb.Length)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("checkpoint: read %s at %d: %w", b.name, b.mb.Offset, err)
	}
	if crc := crc32.Checksum(data, castagnoli); crc != b.mb.CRC {
		return nil, fmt.Errorf("checkpoint: %s is corrupt: checksum mismatch at offset %d (length %d)", b.name, b.mb.Offset, b.mb.Length)
	}
	return data, nil
}

// Dir returns the location of checkpoint id under base (a path or a URL).
func Dir(base string, id int64) string {
	return Join(base, dirName(id))
}

// dirName is the name of checkpoint id's directory.
func dirName(id int64) string { return fmt.Sprintf("chk-%012d", id) }

// List returns the ids of the complete checkpoints under base, ascending.
func (st Storage) List(base string) ([]int64, error) {
	store, key, err := st.open(base)
	if err != nil {
		return nil, err
	}
	return listComplete(store, key)
}

func listComplete(store Store, key string) ([]int64, error) {
	entries, err := store.List(key)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, e := range entries {
		id, ok := parseDir(e.Name)
		if !ok || !e.IsDir {
			continue
		}
		if _, err := store.Size(keyJoin(key, e.Name, MetadataFile)); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return dropVoid(store, key, ids)
}

func parseDir(name string) (int64, bool) {
	if !strings.HasPrefix(name, "chk-") {
		return 0, false
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(name, "chk-"), 10, 64)
	return id, err == nil
}

// Persist makes the snapshot at location dir durable where it is: the
// names in its directory (its manifest's among them) and its directory's
// own name in the one that holds it. A snapshot whose last fsync failed
// when it was written is complete and readable, but a crash can still
// lose it; a job that restored from it and committed its pending
// transactions would then, after the crash, find an older snapshot (or
// none) and write that output again. A restore therefore persists the
// snapshot before the job acts on it (runtime's loadRestore). The data
// files' contents were synced before their names were published. On an
// object store, where an acknowledged write is durable, it does nothing;
// on a read-only file system (a savepoint on a read-only mount) there is
// nothing to sync and EROFS is not an error.
func (st Storage) Persist(dir string) error {
	store, key, err := st.open(dir)
	if err != nil {
		return err
	}
	for _, k := range []string{key, keyDir(key)} {
		if err := store.Sync(k); err != nil && !errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("checkpoint: make the snapshot in %s durable: %w", dir, err)
		}
	}
	return nil
}

// Latest returns the location of the newest complete checkpoint under
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
	if mutant.On(mutant.RestoreSecondLatest) && len(ids) > 1 {
		id = ids[len(ids)-2]
	}
	return Dir(base, id), id, nil
}

// Retain deletes all but the newest keep complete checkpoints under base,
// and incomplete ones older than the newest complete one, then the shared
// files no checkpoint left references (N3). A checkpoint's manifest is
// deleted (and, in a directory, that deletion synced) before its data, so
// that an interrupted deletion leaves an incomplete checkpoint, which
// readers ignore and the next Retain removes, never a complete one with
// files missing.
func (st Storage) Retain(base string, keep int) (err error) {
	store, key, err := st.open(base)
	if err != nil {
		return err
	}
	ids, err := listComplete(store, key)
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
			err = st.retainShared(store, base, key)
		}
	}()
	entries, err := store.List(key)
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, ok := parseDir(e.Name)
		if !ok || !e.IsDir {
			continue
		}
		if (complete[id] && id <= cut) || (!complete[id] && id < newest) {
			dir := keyJoin(key, e.Name)
			if complete[id] {
				if err := store.Delete(keyJoin(dir, MetadataFile)); err != nil {
					return err
				}
				if err := store.Sync(dir); err != nil {
					return err
				}
			}
			if err := store.DeleteDir(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// Now is the time source of snapshot timestamps (replaceable in tests).
var Now = func() int64 { return time.Now().UnixMilli() } // lint:allow-time the default, replaceable

// readNative loads the native state of a subtask from its manifest entry,
// checking that every shared file exists with the recorded size (their
// checksums are verified when they are materialized). base is the
// checkpoint base location and baseKey its key in store; dir and path
// name the snapshot and its manifest, for errors.
func readNative(store Store, base, baseKey, dir, path string, mn *manifestNative, maxP int, check func(manifestBlob) (Blob, error)) (*NativeState, error) {
	if mn.Start < 0 || mn.End < mn.Start || mn.End >= maxP {
		return nil, fmt.Errorf("checkpoint: %s is corrupt: native state of key groups %d-%d outside [0,%d)", path, mn.Start, mn.End, maxP)
	}
	n := &NativeState{Format: mn.Format, Start: mn.Start, End: mn.End}
	for _, f := range mn.Shared {
		if !checkSharedPath(f.Path) {
			return nil, fmt.Errorf("checkpoint: %s is corrupt: bad shared file path %q", path, f.Path)
		}
		full := Join(base, f.Path)
		size, err := store.Size(keyJoin(baseKey, f.Path))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: snapshot %s is incomplete: shared file %s: %w", dir, full, err)
		}
		if size != f.Size {
			return nil, fmt.Errorf("checkpoint: shared file %s is corrupt: %d bytes, the manifest of %s says %d", full, size, dir, f.Size)
		}
		n.Shared = append(n.Shared, SharedFile{Path: f.Path, Size: f.Size, CRC: f.CRC, base: base, store: store, baseKey: baseKey})
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
func (st Storage) retainShared(store Store, base, key string) error {
	owners, err := store.List(keyJoin(key, SharedDirName))
	if err != nil || len(owners) == 0 {
		return err
	}
	ids, err := listComplete(store, key)
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
	return collectShared(store, key, owners, keep)
}

// parent returns the location that holds loc.
func parent(loc string) string {
	if !IsURL(loc) {
		return filepath.Dir(filepath.Clean(loc))
	}
	u, err := url.Parse(loc)
	if err != nil {
		return loc
	}
	p := path.Dir(strings.TrimSuffix(u.Path, "/"))
	if p == "." || p == "/" {
		p = ""
	}
	u.Path, u.RawPath = p, ""
	return u.String()
}
