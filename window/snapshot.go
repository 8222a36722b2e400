package window

import (
	"encoding/binary"
	"fmt"

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
	rng := o.Ctx.KeyGroups
	for kg := rng.Start; kg <= rng.End; kg++ {
		sb, err := o.backend.SnapshotKeyGroup(kg)
		if err != nil {
			return fmt.Errorf("window: snapshot of key group %d: %w", kg, err)
		}
		tb, err := o.timers.SnapshotKeyGroup(kg)
		if err != nil {
			return fmt.Errorf("window: snapshot of key group %d: %w", kg, err)
		}
		if len(sb) == 0 && len(tb) == 0 {
			continue
		}
		blob := binary.AppendUvarint(make([]byte, 0, len(sb)+len(tb)+binary.MaxVarintLen64), uint64(len(sb)))
		blob = append(append(blob, sb...), tb...)
		if err := w.KeyGroup(kg, blob); err != nil {
			return err
		}
	}
	return nil
}

// restore loads the key groups of r (nil: a fresh start) and sets
// registerBelow to the latest restored event-time timer.
func (o *operator[K, T, OUT]) restore(r *runtime.Restored) error {
	err := r.ForEachKeyGroup(func(kg int, blob []byte) error {
		n, m := binary.Uvarint(blob)
		if m <= 0 || uint64(len(blob)-m) < n {
			return fmt.Errorf("window: corrupt snapshot of key group %d", kg)
		}
		sb, tb := blob[m:m+int(n)], blob[m+int(n):]
		if err := o.backend.RestoreKeyGroup(kg, sb); err != nil {
			return err
		}
		if err := o.timers.RestoreKeyGroup(kg, tb); err != nil {
			return err
		}
		o.timers.ForEachEventTimeTimer(kg, func(t timer.Timer[K, Window]) {
			o.registerBelow = max(o.registerBelow, t.Timestamp)
		})
		return nil
	})
	return err
}
