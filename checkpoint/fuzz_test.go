package checkpoint

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FuzzRead feeds arbitrary manifests (and data files) to Read, the reader
// of checkpoint and savepoint directories. It must never panic; what it
// accepts must read back the same through Write and Read (every blob whose
// length and checksum verify, I1; a blob that does not verify is an error,
// never a silent partial read).
//
//	go test ./checkpoint -run '^$' -fuzz FuzzRead -fuzztime 60s -parallel 1
func FuzzRead(f *testing.F) {
	mem := vfs.NewMem()
	st := Storage{FS: mem}
	for i, s := range []*Snapshot{tagged(1), {ID: 2, Kind: KindSavepoint, MaxParallelism: 4}} {
		dir := Dir("/seed", int64(i))
		if _, err := st.Write(dir, s); err != nil {
			f.Fatal(err)
		}
		meta, err := readAll(DirStore(mem), filepath.Join(dir, MetadataFile))
		if err != nil {
			f.Fatal(err)
		}
		data, _ := readAll(DirStore(mem), filepath.Join(dir, "op-0000-sub-0000.bin"))
		f.Add(meta, data)
	}
	f.Add([]byte(`{"version":2,"kind":"checkpoint","id":1,"maxParallelism":8,"operators":[{"uid":"a","subtasks":[{"file":"op-0000-sub-0000.bin","native":{"format":"pebble-v2","kgStart":0,"kgEnd":7,"shared":[{"path":"shared/o/1.sst","size":3}],"private":[{"name":"MANIFEST","blob":{"off":0,"len":2}}]}}]}]}`), []byte("abc"))
	f.Add([]byte(`{"version":1,"maxParallelism":1,"operators":[{"subtasks":[{"file":"../x"}]}]}`), []byte{})
	f.Fuzz(func(t *testing.T, meta, data []byte) {
		mem := vfs.NewMem()
		st := Storage{FS: mem}
		dir := Dir("/base", 1)
		if err := mem.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{MetadataFile: meta, "op-0000-sub-0000.bin": data, "op-0000-sub-0001.bin": data} {
			if err := DirStore(mem).Publish(filepath.Join(dir, name), b); err != nil {
				t.Fatal(err)
			}
		}
		s, err := st.Read(dir)
		if err != nil {
			return
		}
		want, err := contents(s)
		if err != nil {
			return // a blob that does not verify: an error, as it must be
		}
		if s.Operators == nil && s.MaxParallelism < 1 {
			t.Fatalf("accepted a manifest without max parallelism: %s", meta)
		}
		hasNative := false
		for _, o := range s.Operators {
			for _, sub := range o.Subtasks {
				hasNative = hasNative || (sub != nil && sub.Native != nil)
			}
		}
		if hasNative || s.Kind != KindCheckpoint && s.Kind != KindSavepoint {
			// Native state references shared files outside the snapshot
			// (not rewritten here); an unknown kind is carried as is.
			if _, err := json.Marshal(s.Kind); err != nil {
				t.Fatal(err)
			}
			return
		}
		dir2 := Dir("/copy", 1)
		if _, err := st.Write(dir2, s); err != nil {
			t.Fatalf("rewriting an accepted snapshot: %v\nmanifest %s", err, meta)
		}
		s2, err := st.Read(dir2)
		if err != nil {
			t.Fatalf("reading the rewritten snapshot: %v", err)
		}
		got, err := contents(s2)
		if err != nil || got != want || s2.ID != s.ID || s2.MaxParallelism != s.MaxParallelism || len(s2.Operators) != len(s.Operators) {
			t.Fatalf("round trip changed the snapshot (%v):\n%s\nwant\n%s", err, got, want)
		}
	})
}
