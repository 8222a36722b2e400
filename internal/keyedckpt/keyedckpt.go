// Package keyedckpt writes and restores the keyed state and timers of a
// keyed operator subtask in the layout every keyed operator of weir shares
// (weir.SnapshotKeyed and weir.RestoreKeyed are its public face), including
// the native (incremental) checkpoints of the Pebble state backend. It keeps
// the checkpoint plumbing (staging directories, uploads, materialized old
// databases) out of the user-facing root package.
//
// The blob of a key group is
//
//	uvarint(len(stateBlob)) stateBlob timerBlob
//
// with stateBlob in the format of state.Backend.SnapshotKeyGroup and
// timerBlob in that of timer.Service.SnapshotKeyGroup. Key groups without
// state or timers are not written.
package keyedckpt

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// Snapshot writes the keyed state of b and the timers of t, per key group
// of ctx.KeyGroups: natively (native.go) for a checkpoint of a Pebble
// backend when the storage asks for it, copy-on-write otherwise (the
// synchronous part freezes the backend and serializes the timers kept in
// memory; the state, and the timers kept in b's database, are serialized
// in the snapshot's asynchronous part). A t in a Store must be in b's
// (NewTimers).
func Snapshot[K comparable, N comparable](w *runtime.SnapshotWriter, ctx *runtime.Context, b *state.Backend[K], t *timer.Service[K, N]) error {
	rng := ctx.KeyGroups
	base := w.NativeBase()
	native := base != "" && b.Kind() == state.BackendPebble
	timers := make([][]byte, rng.Len())
	// Timers in the Pebble database travel with a native snapshot, and a
	// canonical one reads them from the frozen view in its asynchronous
	// part; timers in memory are serialized now.
	inDB := t.InStore() && b.Kind() == state.BackendPebble
	if !inDB {
		for kg := rng.Start; kg <= rng.End; kg++ {
			tb, err := t.SnapshotKeyGroup(kg)
			if err != nil {
				return fmt.Errorf("snapshot of key group %d: %w", kg, err)
			}
			timers[kg-rng.Start] = tb
		}
	}
	if native {
		return snapshotNative(w, ctx, b, base, timers)
	}
	fz := b.Freeze()
	w.Async(func() error {
		defer fz.Close()
		var sb, tb []byte // reused: each key group's blob is copied once, exactly sized
		for kg := rng.Start; kg <= rng.End; kg++ {
			var err error
			if sb, err = fz.AppendSnapshotKeyGroup(sb[:0], kg); err != nil {
				return fmt.Errorf("snapshot of key group %d: %w", kg, err)
			}
			if inDB {
				if tb, err = timer.AppendStoreSnapshot(tb[:0], kg, fz.TimerStore()); err != nil {
					return err
				}
			} else {
				tb = timers[kg-rng.Start]
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
	})
	return nil
}

// Restore loads what Snapshot wrote for the key groups the subtask owns now
// (nothing on a fresh start); restored is called after each key group, if
// not nil.
func Restore[K comparable, N comparable](ctx *runtime.Context, b *state.Backend[K], t *timer.Service[K, N], restored func(kg int)) error {
	timerKGs, err := restoreNative(ctx, b, t)
	if err != nil {
		return fmt.Errorf("restore of operator %q subtask %d: %w", ctx.UID, ctx.Subtask, err)
	}
	if restored != nil {
		for _, kg := range timerKGs {
			restored(kg)
		}
	}
	return ctx.Restored().ForEachKeyGroup(func(kg int, blob []byte) error {
		n, m := binary.Uvarint(blob)
		if m <= 0 || uint64(len(blob)-m) < n {
			return fmt.Errorf("corrupt keyed-state blob of key group %d", kg)
		}
		sb, tb := blob[m:m+int(n)], blob[m+int(n):]
		if err := b.RestoreKeyGroup(kg, sb); err != nil {
			return err
		}
		if err := t.RestoreKeyGroup(kg, tb); err != nil {
			return err
		}
		if restored != nil {
			restored(kg)
		}
		return nil
	})
}
