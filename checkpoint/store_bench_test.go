package checkpoint

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FileBlobStore returns the Store of gocloud.dev's fileblob bucket in dir
// (no fsync), through checkpoint/bucket; set by s3_test.go, as S3Start.
var FileBlobStore func(t testing.TB, dir string) Store

// benchSnapshot is a 1 MiB snapshot: 2 operators of 4 subtasks, each with
// 32 key groups of 4 KiB.
func benchSnapshot(id int64) *Snapshot {
	s := &Snapshot{ID: id, Kind: KindCheckpoint, MaxParallelism: 128}
	for op := range 2 {
		o := &OperatorState{UID: fmt.Sprintf("op%d", op), Parallelism: 4}
		for sub := range 4 {
			st := &SubtaskState{KeyGroups: map[int]Blob{}}
			for kg := sub * 32; kg < sub*32+32; kg++ {
				b := make([]byte, 4096)
				for i := range b {
					b[i] = byte(kg + i)
				}
				st.KeyGroups[kg] = Bytes(b)
			}
			o.Subtasks = append(o.Subtasks, st)
		}
		s.Operators = append(s.Operators, o)
	}
	return s
}

// BenchmarkSnapshotStore writes a 1 MiB snapshot and reads every blob of
// it back (verified), side by side: a local directory (DirStore: fsync,
// rename, directory fsync), the same directory through gocloud.dev's
// fileblob (no fsync), and s3:// on an in-process S3 server (gofakes3,
// memory backend, over loopback HTTP). The snapshot is deleted outside the
// timer.
//
//	go test ./checkpoint -run '^$' -bench BenchmarkSnapshotStore -benchtime 50x -count 3
func BenchmarkSnapshotStore(b *testing.B) {
	snap := benchSnapshot(1)
	run := func(b *testing.B, st Storage, base string) {
		b.SetBytes(snap.Size())
		for i := 0; b.Loop(); i++ {
			dir := Dir(base, int64(i))
			if _, err := st.Write(dir, snap); err != nil {
				b.Fatal(err)
			}
			s, err := st.Read(dir)
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range s.Operators {
				for _, sub := range o.Subtasks {
					for _, bl := range sub.KeyGroups {
						if _, err := bl.Bytes(); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.StopTimer()
			store, key, _ := st.open(dir)
			if err := store.DeleteDir(key); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.Run("dir", func(b *testing.B) {
		run(b, Storage{}, filepath.Join(b.TempDir(), "chk"))
	})
	b.Run("fileblob", func(b *testing.B) {
		run(b, Storage{Store: FileBlobStore(b, b.TempDir())}, "chk")
	})
	b.Run("s3", func(b *testing.B) {
		run(b, Storage{}, S3Start(b, "chk"))
	})
}

// BenchmarkWriteSmallSnapshot writes a checkpoint of the shape most jobs
// take often: 3 operators of 2 subtasks, 16 key groups of 64 bytes each,
// to an in-memory file system (no disk: the cost is Write's own). Run with
// -benchmem: the bytes allocated per Write are its figure.
//
//	go test ./checkpoint -run '^$' -bench BenchmarkWriteSmallSnapshot -benchmem
func BenchmarkWriteSmallSnapshot(b *testing.B) {
	s := &Snapshot{ID: 1, Kind: KindCheckpoint, MaxParallelism: 128}
	for op := range 3 {
		o := &OperatorState{UID: fmt.Sprintf("op%d", op), Parallelism: 2}
		for sub := range 2 {
			st := &SubtaskState{KeyGroups: map[int]Blob{}}
			for kg := sub * 16; kg < sub*16+16; kg++ {
				st.KeyGroups[kg] = Bytes(make([]byte, 64))
			}
			o.Subtasks = append(o.Subtasks, st)
		}
		s.Operators = append(s.Operators, o)
	}
	st := Storage{FS: vfs.NewMem()}
	for i := 0; b.Loop(); i++ {
		if _, err := st.Write(Dir("/chk", int64(i)), s); err != nil {
			b.Fatal(err)
		}
	}
}
