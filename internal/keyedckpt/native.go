package keyedckpt

// Native (incremental) checkpoints of keyed operators on the Pebble state
// backend, the alternative path of Snapshot and Restore.
//
// Invariants:
//
//	N1. Only checkpoints are native (SnapshotWriter.NativeBase is "" for
//	    savepoints), so savepoints stay canonical and backend-independent.
//	N2. The synchronous part is state.Backend.CheckpointNative (hard links
//	    and a copy of the write-ahead log, no flush); the asynchronous part
//	    uploads the SSTs not uploaded before into
//	    BASE/shared/<uid>-<subtask>-<instance>/ with a checkpoint.Uploader
//	    kept per database instance (uploaders, below), and stores the handle
//	    with SubtaskState.Native.
//	N3. Timers of a service in the backend's database
//	    (timer.NewServiceInStore over state.Backend.TimerStore, what
//	    NewTimers gives a Pebble backend) are in the native snapshot, under
//	    their key groups, and restore with them at any parallelism; the
//	    service then rebuilds its in-memory part (timer.Service.Reload), or,
//	    restoring into the memory backend, reads them out of the snapshot
//	    (state.ForEachNativeTimers). Timers of a service in memory stay in
//	    per-key-group blobs (uvarint(0) timerBlob: an empty state blob).
//	N4. A restore materializes the overlapping old databases beside the
//	    working directory and hands them to state.Backend.RestoreNative
//	    (Pebble), or rewrites them into canonical key groups (memory).
//	N5. The uploader of a database instance lives as long as the instance:
//	    it is found by the instance id (state.Backend.InstanceID, random and
//	    new with every database the backend opens or restores), and dropped
//	    once the backend is garbage (runtime.AddCleanup), so the state
//	    package carries no checkpoint bookkeeping.

import (
	"encoding/binary"
	"fmt"
	"os"
	goruntime "runtime"
	"sync"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// uploaders holds, per database instance id, the uploader of its shared
// files, or the shared files it was restored from (seed) until the first
// checkpoint makes the uploader (N5).
var uploaders = struct {
	sync.Mutex
	m map[string]*instanceFiles
}{m: map[string]*instanceFiles{}}

type instanceFiles struct {
	up   *checkpoint.Uploader
	seed []checkpoint.SharedFile
}

// filesOf returns the bookkeeping of b's current database instance,
// registering it (and its removal once b is garbage) on first use.
func filesOf[K comparable](b *state.Backend[K]) *instanceFiles {
	id := b.InstanceID()
	uploaders.Lock()
	defer uploaders.Unlock()
	f := uploaders.m[id]
	if f == nil {
		f = &instanceFiles{}
		uploaders.m[id] = f
		goruntime.AddCleanup(b, func(id string) {
			uploaders.Lock()
			delete(uploaders.m, id)
			uploaders.Unlock()
		}, id)
	}
	return f
}

func snapshotNative[K comparable](w *runtime.SnapshotWriter, ctx *runtime.Context, b *state.Backend[K], base string, timers [][]byte) error {
	rng := ctx.KeyGroups
	files := filesOf(b)
	up := files.up
	if up == nil {
		up = checkpoint.NewUploader(base, fmt.Sprintf("%s-%d-%s", fileSafe(ctx.UID), ctx.Subtask, b.InstanceID()))
		if files.seed != nil {
			up.Seed(files.seed) // the restored files are not uploaded again
			files.seed = nil
		}
		files.up = up
	}
	stage, err := b.CheckpointNative(w.CheckpointID())
	if err != nil {
		return err
	}
	w.Async(func() error {
		defer os.RemoveAll(stage)
		n, err := up.Upload(stage, state.NativeFormat, rng.Start, rng.End, state.NativeShared)
		if err != nil {
			return err
		}
		if err := w.Native(n); err != nil {
			return err
		}
		for kg := rng.Start; kg <= rng.End; kg++ {
			if tb := timers[kg-rng.Start]; len(tb) > 0 {
				if err := w.KeyGroup(kg, append(binary.AppendUvarint(nil, 0), tb...)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return nil
}

// restoreNative restores the native snapshots of the subtask's key groups
// and returns the key groups whose timers came with them.
func restoreNative[K comparable, N comparable](ctx *runtime.Context, b *state.Backend[K], t *timer.Service[K, N]) ([]int, error) {
	natives := ctx.Restored().Native()
	if len(natives) == 0 {
		return nil, nil
	}
	rng := ctx.KeyGroups
	var timerKGs []int
	if b.Kind() != state.BackendPebble {
		for _, n := range natives {
			dir, err := os.MkdirTemp("", "weir-native-")
			if err != nil {
				return nil, err
			}
			os.Remove(dir)
			err = n.Materialize(dir)
			lo, hi := max(n.Start, rng.Start), min(n.End, rng.End)
			if err == nil {
				err = state.ForEachNativeKeyGroup(dir, lo, hi, b.RestoreKeyGroup)
			}
			if err == nil {
				err = state.ForEachNativeTimers(dir, lo, hi, func(kg int, st *state.ReadOnlyTimerStore) error {
					timerKGs = append(timerKGs, kg)
					return t.RestoreKeyGroupFromStore(kg, st)
				})
			}
			os.RemoveAll(dir)
			if err != nil {
				return nil, err
			}
		}
		return timerKGs, nil
	}
	parts := make([]state.NativePart, 0, len(natives))
	for i, n := range natives {
		if !state.NativeFormatReadable(n.Format) {
			return nil, fmt.Errorf("native keyed state in format %q; this weir reads %q and %q (use a newer weir, or restart from a savepoint)", n.Format, state.NativeFormat, "pebble-v1")
		}
		dir := b.NativeRestoreDir(i)
		os.RemoveAll(dir)
		if err := n.Materialize(dir); err != nil {
			for _, p := range parts {
				os.RemoveAll(p.Dir)
			}
			os.RemoveAll(dir)
			return nil, err
		}
		parts = append(parts, state.NativePart{Dir: dir, Start: n.Start, End: n.End})
	}
	best, err := b.RestoreNative(parts)
	if err != nil {
		return nil, err
	}
	filesOf(b).seed = natives[best].Shared
	if !t.InStore() {
		return nil, nil
	}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	for kg := rng.Start; kg <= rng.End; kg++ {
		if t.NumTimersInKeyGroup(kg) > 0 {
			timerKGs = append(timerKGs, kg)
		}
	}
	return timerKGs, nil
}

// NewTimers returns the timer service of a keyed operator subtask whose
// keyed state is b: in b's database for a Pebble backend
// (timer.NewServiceInStore over b.TimerStore, so the timers need not fit in
// memory and native checkpoints carry them), in memory otherwise. kc and nc
// are the codecs of keys and namespaces (nil: the defaults).
func NewTimers[K comparable, N comparable](b *state.Backend[K], kc codec.Codec[K], nc codec.Codec[N]) *timer.Service[K, N] {
	if st := b.TimerStore(); st != nil {
		return timer.NewServiceInStore[K, N](b.Range(), st, kc, nc)
	}
	return timer.NewServiceWithCodecs[K, N](b.Range(), kc, nc)
}

// fileSafe maps a uid to a file name (see runtime.Context.StateOptions).
func fileSafe(s string) string {
	out := []rune(s)
	for i, r := range out {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			out[i] = '_'
		}
	}
	return string(out)
}
