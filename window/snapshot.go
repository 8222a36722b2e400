package window

import (
	"fmt"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/timer"
)

// The window operator checkpoints its keyed state (contents and session
// sets, package state) and its timers (package timer) per key group, so a
// restore with another parallelism reads only the key groups it owns. The
// blob of one key group is
//
//	uvarint(len(stateBlob)) stateBlob timerBlob
//
// with stateBlob in the format of state.Backend.SnapshotKeyGroup and
// timerBlob in that of timer.Service.SnapshotKeyGroup (the layout the
// keyed operators of package weir use too). Windows are encoded with
// WindowCodec. The watermark is not checkpointed: sources regenerate it,
// and event-time timers restored behind it fire when it next advances.

// SnapshotState implements runtime.Snapshotter.
func (o *operator[K, T, OUT]) SnapshotState(w *runtime.SnapshotWriter) error {
	if err := weir.SnapshotKeyed(w, o.Ctx, o.backend, o.timers); err != nil {
		return fmt.Errorf("window: %w", err)
	}
	return nil
}

// restore loads the key groups this subtask owns (nothing on a fresh start)
// and sets registerBelow to the latest restored event-time timer.
func (o *operator[K, T, OUT]) restore(ctx *runtime.Context) error {
	return weir.RestoreKeyed(ctx, o.backend, o.timers, func(kg int) {
		o.timers.ForEachEventTimeTimer(kg, func(t timer.Timer[K, Window]) {
			o.registerBelow = max(o.registerBelow, t.Timestamp)
		})
	})
}
