package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample(id int64) *Snapshot {
	s := &Snapshot{ID: id, Kind: KindCheckpoint, TimestampMs: 1, MaxParallelism: 8}
	o := &OperatorState{UID: "count", Name: "count", Parallelism: 2}
	for sub := range 2 {
		st := &SubtaskState{KeyGroups: map[int]Blob{}, Lists: map[string]*ListState{}}
		for kg := sub * 4; kg < sub*4+4; kg++ {
			st.KeyGroups[kg] = Bytes(fmt.Sprintf("kg-%d", kg))
		}
		st.Lists["splits"] = &ListState{Mode: EvenSplit, Items: []Blob{Bytes(fmt.Sprintf("split-%d-a", sub)), Bytes(fmt.Sprintf("split-%d-b", sub))}}
		st.Lists["config"] = &ListState{Mode: Union, Items: []Blob{Bytes(fmt.Sprintf("cfg-%d", sub))}}
		o.Subtasks = append(o.Subtasks, st)
	}
	s.Operators = append(s.Operators, o, &OperatorState{UID: "src", Name: "src", Parallelism: 1, Subtasks: []*SubtaskState{nil}})
	return s
}

func blob(t *testing.T, b Blob) string {
	t.Helper()
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := Dir(t.TempDir(), 7)
	if _, err := Write(dir, sample(7)); err != nil {
		t.Fatal(err)
	}
	s, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != 7 || s.MaxParallelism != 8 || len(s.Operators) != 2 {
		t.Fatalf("got %+v", s)
	}
	o := s.Operator("count")
	// Restore at parallelism 4: subtask 1 owns key groups [2,3].
	got := o.KeyGroupBlobs(2, 3)
	if len(got) != 2 || blob(t, got[2]) != "kg-2" || blob(t, got[3]) != "kg-3" {
		t.Fatalf("key groups 2-3: %v", got)
	}
	// Even split over 3 subtasks: items a0 b0 a1 b1 dealt round-robin.
	var dealt []string
	for i := range 3 {
		items, err := o.ListFor("splits", i, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			dealt = append(dealt, fmt.Sprintf("%d:%s", i, blob(t, it)))
		}
	}
	want := "0:split-0-a 0:split-1-b 1:split-0-b 2:split-1-a"
	if strings.Join(dealt, " ") != want {
		t.Fatalf("even split: %v, want %s", dealt, want)
	}
	// Same parallelism: each subtask gets its own items back.
	items, _ := o.ListFor("splits", 1, 2)
	if len(items) != 2 || blob(t, items[0]) != "split-1-a" {
		t.Fatalf("same parallelism: %v", items)
	}
	// Union: everyone gets everything.
	items, _ = o.ListFor("config", 0, 5)
	if len(items) != 2 {
		t.Fatalf("union: %d items", len(items))
	}
}

func TestCorruptionIsAnErrorNamingTheFile(t *testing.T) {
	dir := Dir(t.TempDir(), 1)
	if _, err := Write(dir, sample(1)); err != nil {
		t.Fatal(err)
	}
	file := dataFile(t, dir, "op-0000-sub-0001")
	data, _ := os.ReadFile(file)
	data[3] ^= 0xff
	os.WriteFile(file, data, 0o644)
	s, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var failed error
	for _, b := range s.Operator("count").KeyGroupBlobs(0, 7) {
		if _, err := b.Bytes(); err != nil {
			failed = err
		}
	}
	if failed == nil || !strings.Contains(failed.Error(), filepath.Base(file)) || !strings.Contains(failed.Error(), "checksum") {
		t.Fatalf("corrupt blob: %v", failed)
	}
	// Truncation is found when the manifest is read.
	os.WriteFile(file, data[:5], 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), filepath.Base(file)) {
		t.Fatalf("truncated file: %v", err)
	}
	// A missing file too.
	os.Remove(file)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), filepath.Base(file)) {
		t.Fatalf("missing file: %v", err)
	}
	// A corrupt manifest.
	os.WriteFile(filepath.Join(dir, MetadataFile), []byte("{"), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), MetadataFile) {
		t.Fatalf("corrupt manifest: %v", err)
	}
}

func TestIncompleteSnapshotsAreIgnoredAndRetired(t *testing.T) {
	base := t.TempDir()
	for id := int64(1); id <= 5; id++ {
		if _, err := Write(Dir(base, id), sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Checkpoint 6 crashed before its manifest: data only.
	os.MkdirAll(Dir(base, 6), 0o755)
	os.WriteFile(filepath.Join(Dir(base, 6), "op-0000-sub-0000.bin"), []byte("x"), 0o644)
	if _, err := Read(Dir(base, 6)); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("incomplete snapshot: %v", err)
	}
	dir, id, err := Latest(base)
	if err != nil || id != 5 || dir != Dir(base, 5) {
		t.Fatalf("latest: %s %d %v", dir, id, err)
	}
	if err := Retain(base, 2); err != nil {
		t.Fatal(err)
	}
	ids, _ := List(base)
	if fmt.Sprint(ids) != "[4 5]" {
		t.Fatalf("after retention: %v", ids)
	}
	// Checkpoint 6 is newer than the newest complete one: it may still be
	// being written, so retention keeps it.
	if _, err := os.Stat(Dir(base, 6)); err != nil {
		t.Fatalf("in-progress checkpoint removed: %v", err)
	}
	if _, err := Write(Dir(base, 5), sample(5)); err == nil {
		t.Fatal("overwriting a snapshot must fail")
	}
}

func TestVersionCheck(t *testing.T) {
	dir := Dir(t.TempDir(), 1)
	if _, err := Write(dir, sample(1)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, MetadataFile)
	data, _ := os.ReadFile(p)
	data = bytes.Replace(data, []byte(`"version": 1`), []byte(`"version": 99`), 1)
	os.WriteFile(p, data, 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("future version: %v", err)
	}
}

// A snapshot at a relative location (a savepoint directory given as
// "sp", as `weir run --savepoint-dir sp` prints it in its resume line) is
// written, persisted and read where the working directory puts it: the
// directory that holds it is the working directory itself, whose fsync
// Persist makes (it was the empty path before, and the restore failed).
func TestRelativeLocation(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := Write("sp", tagged(3)); err != nil {
		t.Fatal(err)
	}
	if err := (Storage{}).Persist("sp"); err != nil {
		t.Fatalf("Persist of a relative location: %v", err)
	}
	s, err := Read("sp")
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != 3 {
		t.Fatalf("read snapshot %d, want 3", s.ID)
	}
	if _, err := os.Stat(filepath.Join("sp", MetadataFile)); err != nil {
		t.Fatalf("the manifest is not under the working directory: %v", err)
	}
}
