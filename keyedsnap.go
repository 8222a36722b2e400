package weir

import (
	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/internal/keyedckpt"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// SnapshotKeyed writes the keyed state and timers of a keyed operator
// subtask, per key group of ctx.KeyGroups, in the layout every keyed
// operator of weir shares (so any of them restores at another
// parallelism): the blob of a key group is
//
//	uvarint(len(stateBlob)) stateBlob timerBlob
//
// with stateBlob in the format of state.Backend.SnapshotKeyGroup and
// timerBlob in that of timer.Service.SnapshotKeyGroup. Key groups without
// state or timers are not written. Operators call it from SnapshotState.
//
// The keyed state is snapshotted copy-on-write: the synchronous part only
// freezes the backend (state.Backend.Freeze) and serializes the timers;
// the state is serialized in the snapshot's asynchronous part
// (runtime.SnapshotWriter.Async) while the subtask processes records. A
// checkpoint of a Pebble backend is native (incremental: the database's
// files, uploaded once) when the checkpoint storage supports it.
func SnapshotKeyed[K comparable, N comparable](w *runtime.SnapshotWriter, ctx *runtime.Context, b *state.Backend[K], t *timer.Service[K, N]) error {
	return keyedckpt.Snapshot(w, ctx, b, t)
}

// RestoreKeyed loads what SnapshotKeyed wrote for the key groups this
// subtask owns now (nothing on a fresh start); restored is called after
// each key group, if not nil (the window operator inspects restored
// timers). Operators call it from Open.
func RestoreKeyed[K comparable, N comparable](ctx *runtime.Context, b *state.Backend[K], t *timer.Service[K, N], restored func(kg int)) error {
	return keyedckpt.Restore(ctx, b, t, restored)
}

// NewTimerService returns the timer service of a keyed operator subtask
// whose keyed state is b, for SnapshotKeyed and RestoreKeyed: for a Pebble
// backend its timers live in b's database (timer.NewServiceInStore over
// state.Backend.TimerStore, as Flink's RocksDB backend keeps timers in
// RocksDB), so they need not fit in memory and native checkpoints carry
// them; for the memory backend they live in memory
// (timer.NewServiceWithCodecs). kc and nc encode keys and namespaces in
// snapshots (and in the database); nil means codec.Default of the type.
func NewTimerService[K comparable, N comparable](b *state.Backend[K], kc codec.Codec[K], nc codec.Codec[N]) *timer.Service[K, N] {
	return keyedckpt.NewTimers(b, kc, nc)
}
