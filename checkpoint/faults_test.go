package checkpoint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/weirproject/weir/internal/faultfs"
)

// faultBase is the checkpoint base directory of the fault tests (on an
// in-memory file system).
const faultBase = "/jobs/chk"

// tagged is sample(id) with every blob naming the checkpoint, so a restore
// can tell which checkpoint it read.
func tagged(id int64) *Snapshot {
	s := sample(id)
	for _, o := range s.Operators {
		for _, st := range o.Subtasks {
			if st == nil {
				continue
			}
			for kg, b := range st.KeyGroups {
				st.KeyGroups[kg] = Bytes(fmt.Sprintf("%s@%d", b.(Bytes), id))
			}
			for _, l := range st.Lists {
				for i, b := range l.Items {
					l.Items[i] = Bytes(fmt.Sprintf("%s@%d", b.(Bytes), id))
				}
			}
		}
	}
	return s
}

// contents reads every blob of s (verifying it, I1) into one canonical
// string.
func contents(s *Snapshot) (string, error) {
	var lines []string
	for _, o := range s.Operators {
		for si, st := range o.Subtasks {
			if st == nil {
				continue
			}
			for kg, b := range st.KeyGroups {
				data, err := b.Bytes()
				if err != nil {
					return "", err
				}
				lines = append(lines, fmt.Sprintf("%s/%d kg %d = %s", o.UID, si, kg, data))
			}
			for name, l := range st.Lists {
				for i, b := range l.Items {
					data, err := b.Bytes()
					if err != nil {
						return "", err
					}
					lines = append(lines, fmt.Sprintf("%s/%d %s[%d] = %s", o.UID, si, name, i, data))
				}
			}
		}
	}
	sort.Strings(lines)
	return fmt.Sprintf("id %d\n%s", s.ID, strings.Join(lines, "\n")), nil
}

func want(t *testing.T, id int64) string {
	t.Helper()
	c, err := contents(tagged(id))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// restore is what a restarting job does: the newest complete checkpoint,
// read and verified in full.
func restore(st Storage) (int64, string, error) {
	dir, id, err := st.Latest(faultBase)
	if err != nil {
		return 0, "", err
	}
	s, err := st.Read(dir)
	if err != nil {
		return id, "", err
	}
	c, err := contents(s)
	return id, c, err
}

// newBase returns a crashable in-memory file system holding faultBase
// (its entries synced) and a complete checkpoint 1.
func newBase(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll(faultBase, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", "/jobs", faultBase} {
		f, err := mem.OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if _, err := (Storage{FS: mem}).Write(Dir(faultBase, 1), tagged(1)); err != nil {
		t.Fatal(err)
	}
	return mem
}

// Failing each step of Write in turn (every file-system operation, N = 1,
// 2, ... until Write no longer reaches an N-th one): a failed write, sync,
// rename, creation or directory sync is an error to the caller, and
// neither the file system as it is nor the one a crash right then would
// leave holds a half-written checkpoint a restore accepts: up to the
// manifest's link the restore finds checkpoint 1, intact; after it
// (syncing the directories failed) it may find checkpoint 2, intact. The
// next checkpoint then succeeds, and retention removes the debris.
func TestWriteFailsCleanlyAtEveryStep(t *testing.T) {
	// The operations of a clean write, and which one publishes the manifest.
	var ops []errorfs.Op
	clean := newBase(t)
	probe := &faultfs.FailNth{Match: func(op errorfs.Op) bool { ops = append(ops, op); return true }}
	if _, err := (Storage{FS: probe.Wrap(clean)}).Write(Dir(faultBase, 2), tagged(2)); err != nil {
		t.Fatal(err)
	}
	publishAt := slices.IndexFunc(ops, func(op errorfs.Op) bool {
		return op.Kind == errorfs.OpLink && strings.HasPrefix(filepath.Base(op.Path), MetadataFile+".")
	}) + 1
	if publishAt == 0 {
		t.Fatalf("Write never linked the manifest into place: %v", ops)
	}
	want1, want2, want3 := want(t, 1), want(t, 2), want(t, 3)
	for n := 1; ; n++ {
		mem := newBase(t)
		inj := &faultfs.FailNth{N: n}
		_, err := (Storage{FS: inj.Wrap(mem)}).Write(Dir(faultBase, 2), tagged(2))
		op, failed := inj.Failed()
		if !failed {
			if n <= len(ops) {
				t.Fatalf("operation %d of %d was never reached", n, len(ops))
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		what := fmt.Sprintf("failing operation %d (%v %s)", n, op.Kind, op.Path)
		if err == nil && faultfs.Mutating(op) {
			t.Fatalf("%s: Write returned no error", what)
		}
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("%s: Write returned %v, not the injected error", what, err)
		}
		for _, fs := range []struct {
			name string
			fs   vfs.FS
		}{{"as is", mem}, {"after a crash", mem.CrashClone(vfs.CrashCloneCfg{})}} {
			id, got, rerr := restore(Storage{FS: fs.fs})
			switch {
			case rerr != nil:
				t.Fatalf("%s, %s: restore failed: %v", what, fs.name, rerr)
			case id == 1 && got != want1:
				t.Fatalf("%s, %s: checkpoint 1 restored as\n%s\nwant\n%s", what, fs.name, got, want1)
			case id == 2 && (n <= publishAt && err != nil):
				t.Fatalf("%s, %s: the failed checkpoint 2 was published before its manifest's link", what, fs.name)
			case id == 2 && got != want2:
				t.Fatalf("%s, %s: checkpoint 2 restored as\n%s\nwant\n%s", what, fs.name, got, want2)
			case id != 1 && id != 2:
				t.Fatalf("%s, %s: restored checkpoint %d", what, fs.name, id)
			}
			if err == nil && id != 2 {
				t.Fatalf("%s, %s: Write succeeded but the restore found checkpoint %d", what, fs.name, id)
			}
			st := Storage{FS: fs.fs}
			if _, err := st.Write(Dir(faultBase, 3), tagged(3)); err != nil {
				t.Fatalf("%s, %s: the next checkpoint: %v", what, fs.name, err)
			}
			if err := st.Retain(faultBase, 1); err != nil {
				t.Fatalf("%s, %s: retain: %v", what, fs.name, err)
			}
			if id, got, err := restore(st); err != nil || id != 3 || got != want3 {
				t.Fatalf("%s, %s: after the next checkpoint, restored %d (%v):\n%s", what, fs.name, id, err, got)
			}
			if left, err := fs.fs.List(faultBase); err != nil || len(left) != 1 {
				t.Fatalf("%s, %s: after retention %v is left (%v), want chk-3 only", what, fs.name, left, err)
			}
		}
	}
}

// The order of a write (what the package documentation promises, and what
// makes a crash leave a complete snapshot or none): every data file and
// the temporary manifest are fsynced after their last write and before
// the link that publishes the manifest; the snapshot directory and its
// parent are fsynced after it (or the manifest's and the directory's
// entries could be lost by a crash after Write returned).
func TestWriteSyncsBeforePublishing(t *testing.T) {
	rec := faultfs.NewRecorder(vfs.NewMem())
	if err := rec.MkdirAll(faultBase, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := Dir(faultBase, 1)
	if _, err := (Storage{FS: rec}).Write(dir, tagged(1)); err != nil {
		t.Fatal(err)
	}
	ev := rec.Events()
	published := slices.IndexFunc(ev, func(e faultfs.Event) bool {
		return e.Kind == "link" && e.To == filepath.Join(dir, MetadataFile)
	})
	if published < 0 {
		t.Fatalf("no link into %s: %v", MetadataFile, ev)
	}
	var files []string
	for i, e := range ev[:published] {
		if e.Kind != "write" {
			continue
		}
		if !slices.Contains(files, e.Path) {
			files = append(files, e.Path)
		}
		synced := slices.ContainsFunc(ev[i+1:published], func(s faultfs.Event) bool { return s.Kind == "sync" && s.Path == e.Path })
		if !synced {
			t.Errorf("%s is not fsynced after its last write and before the manifest's link: %v", e.Path, ev)
		}
	}
	if !slices.ContainsFunc(files, func(f string) bool {
		return strings.HasPrefix(f, filepath.Join(dir, MetadataFile+".")) && strings.HasSuffix(f, ".tmp")
	}) || len(files) < 3 {
		t.Errorf("written before the link: %v; want the data files and the temporary manifest", files)
	}
	for _, d := range []string{dir, faultBase} {
		if !slices.ContainsFunc(ev[published+1:], func(e faultfs.Event) bool { return e.Kind == "syncdir" && e.Path == d }) {
			t.Errorf("directory %s is not fsynced after the manifest's link: %v", d, ev)
		}
	}
}

// A machine crash right after Write returned (the crash keeps exactly what
// was synced) leaves the checkpoint complete and intact.
func TestWriteSurvivesCrash(t *testing.T) {
	mem := newBase(t)
	if _, err := (Storage{FS: mem}).Write(Dir(faultBase, 2), tagged(2)); err != nil {
		t.Fatal(err)
	}
	id, got, err := restore(Storage{FS: mem.CrashClone(vfs.CrashCloneCfg{})})
	if err != nil || id != 2 || got != want(t, 2) {
		t.Fatalf("after a crash: restored checkpoint %d (%v):\n%s", id, err, got)
	}
}

// A machine crash right after the first Write into a base that did not
// exist (the first checkpoint of a job: Write creates the base and its
// parents) leaves that checkpoint complete: the entries of the directories
// Write created are synced in their parents too. Found by the simulator
// (internal/sim, machine-crash faults): every checkpoint of a new job's
// base vanished in a crash.
func TestWriteIntoNewBaseSurvivesCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	if _, err := (Storage{FS: mem}).Write(Dir(faultBase, 1), tagged(1)); err != nil {
		t.Fatal(err)
	}
	id, got, err := restore(Storage{FS: mem.CrashClone(vfs.CrashCloneCfg{})})
	if err != nil || id != 1 || got != want(t, 1) {
		t.Fatalf("after a crash: restored checkpoint %d (%v):\n%s", id, err, got)
	}
}

// After a Write into a new base failed at any step, the next Write that
// succeeds survives a machine crash. A failed fsync of a directory's
// parent must not leave the directory behind looking durable: the next
// Write finds it and would not sync its entry again. Found by the
// simulator (internal/sim, seed 1497 with storage faults): a failed fsync
// of "/" after creating the base, a later checkpoint completed (and its
// transactions committed), a crash lost the base with every checkpoint,
// and the job started over, duplicating its output.
func TestWriteAfterAFailedWriteSurvivesCrash(t *testing.T) {
	for n := 1; ; n++ {
		mem := vfs.NewCrashableMem()
		inj := &faultfs.FailNth{N: n}
		_, err := (Storage{FS: inj.Wrap(mem)}).Write(Dir(faultBase, 1), tagged(1))
		op, failed := inj.Failed()
		if !failed {
			if err != nil {
				t.Fatal(err)
			}
			if n < 5 {
				t.Fatalf("a Write made only %d operations", n-1)
			}
			return
		}
		what := fmt.Sprintf("after failing operation %d (%v %s) of the first Write", n, op.Kind, op.Path)
		if err == nil {
			// A failure the Write absorbed (a read, or a removal of a
			// temporary file): checkpoint 1 may be complete.
			if _, err := (Storage{FS: mem}).Write(Dir(faultBase, 2), tagged(2)); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		} else if _, err := (Storage{FS: mem}).Write(Dir(faultBase, 2), tagged(2)); err != nil {
			t.Fatalf("%s: the second Write: %v", what, err)
		}
		id, got, err := restore(Storage{FS: mem.CrashClone(vfs.CrashCloneCfg{})})
		if err != nil || id != 2 || got != want(t, 2) {
			t.Fatalf("%s, the second succeeded; after a crash: restored checkpoint %d (%v):\n%s", what, id, err, got)
		}
	}
}

// A Write that failed at any step, followed by a machine crash that keeps a
// random part of what was written but not synced (torn writes), leaves
// the snapshot it wrote whole or not at all: never a manifest naming data files
// the crash lost. Found by the simulator (internal/sim, seed 6329): the
// directory holding the data files was synced only after the manifest's
// link; that sync failed, and a crash kept the manifest's entry but not a
// data file's, so every restore failed on an incomplete snapshot.
func TestFailedWriteThenTornCrashLeavesNoPartialSnapshot(t *testing.T) {
	for n := 1; ; n++ {
		mem := newBase(t)
		inj := &faultfs.FailNth{N: n}
		_, err := (Storage{FS: inj.Wrap(mem)}).Write(Dir(faultBase, 2), tagged(2))
		op, failed := inj.Failed()
		if !failed {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		for _, pct := range []int{30, 70, 100} {
			for seed := range uint64(8) {
				crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(seed, uint64(n)))})
				id, got, rerr := restore(Storage{FS: crashed})
				if rerr != nil || (id != 1 && id != 2) || got != want(t, id) {
					t.Fatalf("failing operation %d (%v %s; Write: %v), then a crash keeping %d%% of the unsynced (rng %d): restored %d, %v:\n%s",
						n, op.Kind, op.Path, err, pct, seed, id, rerr, got)
				}
			}
		}
	}
}

// TestPersistKeepsARestoredSnapshotThroughACrash: a snapshot whose write
// failed at its last fsyncs is complete and readable, so a restore may
// take it, but a crash could lose it; Persist, which a restore calls
// before the job commits the snapshot's transactions, makes it survive.
// Without it, the simulator's seed 2930115022513460645 restored such a
// snapshot, committed its output, lost it in a crash and started over.
// Write removes the manifest of a snapshot whose directory fsync failed
// after the link (TestFailedSyncAfterTheLinkLeavesNoCompleteSnapshot), so
// here every removal of a manifest fails too: the manifest stays, as it does when that
// removal fails or the writer is fenced.
func TestPersistKeepsARestoredSnapshotThroughACrash(t *testing.T) {
	lost := 0
	for n := 1; ; n++ {
		mem := newBase(t)
		inj := &faultfs.FailNth{N: n, Match: func(op errorfs.Op) bool { return op.Kind != errorfs.OpRemove }}
		_, err := (Storage{FS: inj.Wrap(errorfs.Wrap(mem, failRemoves{}))}).Write(Dir(faultBase, 2), tagged(2))
		op, failed := inj.Failed()
		if !failed {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if id, _, rerr := restore(Storage{FS: mem}); rerr != nil || id != 2 {
			continue // not visible: a restore takes chk 1
		}
		// Visible after a failed write: without Persist a crash may
		// lose it.
		if id, _, _ := restore(Storage{FS: mem.CrashClone(vfs.CrashCloneCfg{})}); id != 2 {
			lost++
		}
		if err := (Storage{FS: mem}).Persist(Dir(faultBase, 2)); err != nil {
			t.Fatalf("failing operation %d (%v %s): Persist: %v", n, op.Kind, op.Path, err)
		}
		crashed := mem.CrashClone(vfs.CrashCloneCfg{})
		if id, got, rerr := restore(Storage{FS: crashed}); rerr != nil || id != 2 || got != want(t, 2) {
			t.Fatalf("failing operation %d (%v %s; Write: %v), Persist, then a crash: restored %d, %v:\n%s", n, op.Kind, op.Path, err, id, rerr, got)
		}
	}
	if lost == 0 {
		t.Fatal("no failed write left a visible snapshot that a crash loses: the test proves nothing")
	}
}

// failRemoves fails every removal of a manifest.
type failRemoves struct{}

func (failRemoves) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpRemove && filepath.Base(op.Path) == MetadataFile {
		return fmt.Errorf("%w: remove %s", errorfs.ErrInjected, op.Path)
	}
	return nil
}

func (failRemoves) String() string { return "fail every removal of a manifest" }

// TestFailedSyncAfterTheLinkLeavesNoCompleteSnapshot: a Write that fails
// at any step after its manifest's link (a directory's fsync) removes the
// manifest again: the snapshot it reports failed is not among the
// complete ones that List, Latest and Retain's count see. Before, it stayed
// complete-looking, and Retain(keep) counted it among the kept, so one
// fewer snapshot the coordinator had completed was retained.
func TestFailedSyncAfterTheLinkLeavesNoCompleteSnapshot(t *testing.T) {
	struck := 0
	for n := 1; ; n++ {
		mem := newBase(t)
		inj := &faultfs.FailNth{N: n, Match: func(op errorfs.Op) bool { return op.Kind == errorfs.OpFileSync }}
		st := Storage{FS: inj.Wrap(mem)}
		_, err := st.Write(Dir(faultBase, 2), tagged(2))
		op, failed := inj.Failed()
		if !failed {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if err == nil {
			continue
		}
		if _, serr := mem.Stat(filepath.Join(Dir(faultBase, 2), MetadataFile)); serr == nil {
			t.Fatalf("fsync %d (%s) failed the Write (%v), and its manifest is still there", n, op.Path, err)
		}
		ids, lerr := (Storage{FS: mem}).List(faultBase)
		if lerr != nil || !slices.Equal(ids, []int64{1}) {
			t.Fatalf("fsync %d (%s) failed the Write (%v): complete checkpoints %v (%v), want [1]", n, op.Path, err, ids, lerr)
		}
		if _, err := (Storage{FS: mem}).Write(Dir(faultBase, 3), tagged(3)); err != nil {
			t.Fatal(err)
		}
		if err := (Storage{FS: mem}).Retain(faultBase, 2); err != nil {
			t.Fatal(err)
		}
		if ids, _ := (Storage{FS: mem}).List(faultBase); !slices.Equal(ids, []int64{1, 3}) {
			t.Fatalf("fsync %d (%s) failed the Write of 2; after checkpoint 3 and Retain(2): %v, want [1 3]", n, op.Path, ids)
		}
		if id, got, rerr := restore(Storage{FS: mem.CrashClone(vfs.CrashCloneCfg{})}); rerr != nil || id != 3 || got != want(t, 3) {
			t.Fatalf("fsync %d (%s): after a crash, restored %d (%v)", n, op.Path, id, rerr)
		}
		if strings.Contains(err.Error(), "publish the manifest") {
			struck++
		}
	}
	if struck == 0 {
		t.Fatal("no failed fsync struck after the manifest's link: the test proves nothing")
	}
}
