package weir

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// keyedState is the keyed state and timers of one keyed operator subtask,
// snapshotted per key group. Its blob for a key group is
//
//	uvarint(len(stateBlob)) stateBlob timerBlob
//
// where the two blobs are in the formats of packages state and timer.
type keyedState[K comparable, N comparable] struct {
	backend *state.Backend[K]
	timers  *timer.Service[K, N]
}

func (k keyedState[K, N]) snapshot(w *runtime.SnapshotWriter, ctx *runtime.Context) error {
	for kg := ctx.KeyGroups.Start; kg <= ctx.KeyGroups.End; kg++ {
		sb, err := k.backend.SnapshotKeyGroup(kg)
		if err != nil {
			return err
		}
		tb, err := k.timers.SnapshotKeyGroup(kg)
		if err != nil {
			return err
		}
		if len(sb) == 0 && len(tb) == 0 {
			continue
		}
		blob := binary.AppendUvarint(make([]byte, 0, len(sb)+len(tb)+4), uint64(len(sb)))
		blob = append(append(blob, sb...), tb...)
		if err := w.KeyGroup(kg, blob); err != nil {
			return err
		}
	}
	return nil
}

func (k keyedState[K, N]) restore(ctx *runtime.Context) error {
	return ctx.Restored().ForEachKeyGroup(func(kg int, blob []byte) error {
		n, m := binary.Uvarint(blob)
		if m <= 0 || uint64(len(blob)-m) < n {
			return fmt.Errorf("weir: corrupt keyed-state blob of key group %d", kg)
		}
		sb, tb := blob[m:m+int(n)], blob[m+int(n):]
		if len(sb) > 0 {
			if err := k.backend.RestoreKeyGroup(kg, sb); err != nil {
				return err
			}
		}
		if len(tb) > 0 {
			return k.timers.RestoreKeyGroup(kg, tb)
		}
		return nil
	})
}
