package agent

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
)

// SnapshotState implements runtime.Snapshotter (G6): per key group, the keyed
// state (sequence numbers, memory, pending inputs, unfinished inputs with
// their remaining tasks). Running actions are not waited for: their tasks
// are stored and run again after a restore. The final checkpoint of a
// bounded job is the exception (runtime.SnapshotWriter.Final): no input
// follows it, so every input is finished first, as at the end of input,
// and the checkpoint covers all the outputs. Otherwise a restore from it
// would run again the inputs whose outputs the end of input has emitted
// (and a two-phase-commit sink committed).
func (o *operator[K, IN, OUT]) SnapshotState(w *runtime.SnapshotWriter) error {
	if w.Final() && o.unfinished > 0 {
		o.logger.Info("agent: finishing the inputs in progress before the final checkpoint", "inputs", o.unfinished, "checkpoint", w.CheckpointID())
		if err := o.finishAll(); err != nil {
			return err
		}
	}
	o.flushLog()
	if o.store != nil {
		if mutant.On(mutant.AgentPruneAtSnapshot) && len(o.finished) > 0 {
			list := make([]KeySeq, 0, len(o.finished))
			for k, s := range o.finished {
				list = append(list, KeySeq{Key: []byte(k), Seq: s})
			}
			if err := o.store.Prune(list); err != nil {
				return err
			}
		}
		o.retention.taken(w.CheckpointID(), w.Kind() == checkpoint.KindSavepoint, o.finished)
		if len(o.finished) > 0 {
			o.finished = map[string]int64{}
		}
	}
	if cp, ok := o.store.(Checkpointed); ok {
		m, err := cp.Marker()
		if err != nil {
			return fmt.Errorf("agent: taking the action-state store's recovery marker: %w", err)
		}
		w.List(storeMarkers, checkpoint.Union, [][]byte{m})
	}
	if o.budgets != nil {
		if err := o.budgets.snapshot(w); err != nil {
			return err
		}
	}
	o.flushLive()
	rng := o.Ctx.KeyGroups
	for kg := rng.Start; kg <= rng.End; kg++ {
		if o.keysTab.NumKeysInKeyGroup(kg) == 0 {
			continue
		}
		st, err := o.backend.AppendSnapshotKeyGroup(nil, kg)
		if err != nil {
			return err
		}
		blob := binary.AppendUvarint([]byte{snapshotFormat}, uint64(len(st)))
		blob = append(blob, st...)
		if blob, err = o.ttl.AppendSnapshotKeyGroup(blob, kg); err != nil {
			return err
		}
		if err := w.KeyGroup(kg, blob); err != nil {
			return err
		}
	}
	return nil
}

// snapshotFormat is the first byte of every key-group blob: 2 is
// uvarint(len(state)) state timers (the TTL timers, timer.Service's
// format); 1, which restores too, was the state alone.
const snapshotFormat = 2

// restoreStore rebuilds the store from markers (Checkpointed.Restore),
// through RestoreContext when the store has it, with a context that ends
// when the job is cancelled or fails (runtime.Context.JobContext): the
// subtask restores in Open, and a store that waits out its retries there
// (the Kafka store, up to RequestTimeout) would otherwise hold the job's
// end back.
func restoreStore(ctx *runtime.Context, cp Checkpointed, markers [][]byte) error {
	cr, ok := cp.(ContextRestorer)
	if !ok {
		return cp.Restore(markers)
	}
	rctx, stop := ctx.JobContext()
	defer stop()
	return cr.RestoreContext(rctx, markers)
}

func (o *operator[K, IN, OUT]) restore(ctx *runtime.Context) error {
	r := ctx.Restored()
	if r != nil && o.budgets != nil {
		if err := o.budgets.restore(r, ctx.KeyGroups, ctx.Parallelism); err != nil {
			return err
		}
	}
	if r == nil {
		// A fresh start: the job may be running again after a failure
		// before its first checkpoint, and the store holds what that run
		// did; rebuild it all so that its side effects are not repeated
		// (the WAL does the same when it opens).
		if cp, ok := o.store.(Checkpointed); ok {
			if err := o.storeGap(restoreStore(ctx, cp, nil)); err != nil {
				return fmt.Errorf("agent: rebuilding the action-state store: %w", err)
			}
		}
		return nil
	}
	o.retention.restored(r.CheckpointID)
	if cp, ok := o.store.(Checkpointed); ok {
		markers, err := r.List(storeMarkers)
		if err != nil {
			return fmt.Errorf("agent: reading the action-state store's recovery markers: %w", err)
		}
		if err := o.storeGap(restoreStore(ctx, cp, markers)); err != nil {
			return fmt.Errorf("agent: rebuilding the action-state store for checkpoint %d: %w", r.CheckpointID, err)
		}
		if h := cp.PruneHorizon(); h > r.CheckpointID {
			err := fmt.Errorf("%w: checkpoint %d is older than the store's prune horizon (the states of inputs finished before checkpoint %d were pruned after it completed, so a restore from %d would run their actions again); restore checkpoint %d or a later one",
				ErrStatesMissing, r.CheckpointID, h, r.CheckpointID, h)
			if err := o.storeGap(err); err != nil {
				return fmt.Errorf("agent: restoring checkpoint %d: %w", r.CheckpointID, err)
			}
		}
	}
	err := r.ForEachKeyGroup(func(kg int, data []byte) error {
		if len(data) == 0 || data[0] > snapshotFormat || data[0] == 0 {
			return fmt.Errorf("agent: key-group blob in unknown format %v; was it written by a newer weir?", data[:min(1, len(data))])
		}
		if data[0] == 1 {
			return o.backend.RestoreKeyGroup(kg, data[1:])
		}
		n, w := binary.Uvarint(data[1:])
		if w <= 0 || uint64(len(data)-1-w) < n {
			return fmt.Errorf("agent: corrupt key-group blob %d (state length)", kg)
		}
		st := data[1+w : 1+w+int(n)]
		if err := o.backend.RestoreKeyGroup(kg, st); err != nil {
			return err
		}
		return o.ttl.RestoreKeyGroup(kg, data[1+w+int(n):])
	})
	if err != nil {
		return err
	}
	// The segmented queue is rebuilt, not restored: every key with work
	// goes into the first segment, one reference per unfinished input.
	rng := ctx.KeyGroups
	for kg := rng.Start; kg <= rng.End; kg++ {
		state.ForEachValue(o.keys, kg, func(k K, ks *keyState[K, IN]) {
			ks.key, ks.boxed, ks.kg = k, k, kg
			n := len(ks.pending) - ks.head
			o.waiting += n
			if ks.run != nil {
				n++
			}
			for range n {
				o.q.AddKey(k)
			}
			o.unfinished += n
			if n > 0 {
				o.enqueue(ks)
				if o.live != nil {
					o.live[k] = ks
				}
			}
		})
	}
	if next, ok := o.ttl.NextProcessingTime(); ok {
		o.scheduleTTL(next)
	}
	o.cRestored.Add(int64(o.unfinished))
	if o.unfinished > 0 {
		o.logger.Info("agent: resuming restored work", "inputs", o.unfinished, "keys", len(o.ready)-o.rhead, "checkpoint", r.CheckpointID)
	}
	return nil
}
