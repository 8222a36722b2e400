package agent

// Retention: which recorded action states the store may prune, and when
// (package documentation, G11).
//
// The decision is a pure function of the checkpoints (retention.taken,
// retention.completed): the operator feeds it the inputs finished before
// each snapshot and the completions, and only starts the prune it returns.
// Invariants, checked by TestRetentionProperties:
//
//	R1. A state is pruned only when every checkpoint a restore may start
//	    from covers it: the checkpoint whose snapshot it finished before is
//	    the oldest retained one or older.
//	R2. Nothing is forgotten: what a snapshot covered is pruned with the
//	    first completion whose oldest retained checkpoint is that one or a
//	    later one, or stays pending.
//	R3. The prune horizon (the newest checkpoint a prune covers) never
//	    goes back, and never passes the oldest retained checkpoint.
//	R4. Savepoints are not retained: completing one prunes what the oldest
//	    retained checkpoint allows, and it does not count as retained.

import "slices"

// pendingPrune is what a checkpoint covers: the inputs finished before its
// snapshot, prunable from the store once it completes.
type pendingPrune struct {
	id   int64
	upTo map[string]int64
}

// retention is the state of the pruning decision. Its zero value has seen
// no checkpoint.
type retention struct {
	// prunes are the snapshots' finished inputs not pruned yet, oldest
	// first.
	prunes []pendingPrune
	// retained holds the ids of the completed checkpoints a restore may
	// start from (at most the runtime's RetainedCheckpoints, oldest
	// first; the restored one too); savepoints are the ids of savepoints
	// in progress, which do not count (the runtime keeps them apart).
	retained   []int64
	savepoints map[int64]bool
}

// prune is what a completion lets the store prune: per key (encoded), the
// sequence number of its last input to prune, and the prune horizon.
type prune struct {
	upTo    map[string]int64
	horizon int64
}

// taken records what the snapshot of checkpoint id covers: the inputs
// finished since the previous snapshot (upTo may be empty).
func (r *retention) taken(id int64, savepoint bool, upTo map[string]int64) {
	if len(upTo) > 0 {
		r.prunes = append(r.prunes, pendingPrune{id: id, upTo: upTo})
	}
	if savepoint {
		if r.savepoints == nil {
			r.savepoints = map[int64]bool{}
		}
		r.savepoints[id] = true
	}
}

// restored starts the retained window at the restored checkpoint, which
// is retained until later ones push it out.
func (r *retention) restored(id int64) { r.retained = []int64{id} }

// aborted forgets savepoint id if it was one; what the aborted checkpoint
// covered is pruned with the next one that completes (R2).
func (r *retention) aborted(id int64) { delete(r.savepoints, id) }

// completed records that checkpoint (or savepoint) id completed, with keep
// checkpoints retained by the runtime (at least 1), and returns what may be
// pruned now (nothing when upTo is empty).
func (r *retention) completed(id int64, keep int) prune {
	if r.savepoints[id] {
		delete(r.savepoints, id)
	} else {
		i, found := slices.BinarySearch(r.retained, id)
		if !found {
			r.retained = slices.Insert(r.retained, i, id)
		}
		if n := len(r.retained) - max(keep, 1); n > 0 {
			r.retained = slices.Delete(r.retained, 0, n)
		}
	}
	if len(r.retained) == 0 {
		return prune{}
	}
	var p prune
	p.upTo, p.horizon, r.prunes = prunable(r.prunes, r.retained[0])
	return p
}

// prunable splits prunes at oldest, the oldest retained checkpoint: those
// of checkpoints up to oldest are merged into upTo (per key the highest
// sequence number) with horizon the newest of their ids; the others are
// returned in rest, in order (rest reuses the storage of prunes).
func prunable(prunes []pendingPrune, oldest int64) (upTo map[string]int64, horizon int64, rest []pendingPrune) {
	n := 0
	for _, p := range prunes {
		if p.id > oldest {
			prunes[n] = p
			n++
			continue
		}
		if upTo == nil {
			upTo = map[string]int64{}
		}
		horizon = max(horizon, p.id)
		for k, s := range p.upTo {
			if cur, ok := upTo[k]; !ok || s > cur {
				upTo[k] = s
			}
		}
	}
	clear(prunes[n:])
	return upTo, horizon, prunes[:n]
}

// NotifyCheckpointComplete implements runtime.CheckpointListener. The
// store's states of inputs finished before a checkpoint are pruned, in the
// background, once no retained checkpoint needs them: when the oldest
// checkpoint still retained (Context.RetainedCheckpoints) is that
// checkpoint or a later one (R1). A restore from any retained checkpoint
// then finds the states of every input finished after it. Savepoints are
// not retained by the runtime: their states go with the next checkpoint
// that becomes the oldest retained one (R4; G11).
func (o *operator[K, IN, OUT]) NotifyCheckpointComplete(id int64) error {
	if o.store == nil {
		return nil
	}
	p := o.retention.completed(id, o.Ctx.RetainedCheckpoints)
	if len(p.upTo) == 0 {
		return nil
	}
	list := make([]KeySeq, 0, len(p.upTo))
	for k, s := range p.upTo {
		list = append(list, KeySeq{Key: []byte(k), Seq: s})
	}
	st := o.store
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var err error
		if cp, ok := st.(Checkpointed); ok {
			err = cp.PruneCheckpoint(p.horizon, list)
		} else {
			err = st.Prune(list)
		}
		if err != nil {
			o.logger.Warn("agent: pruning the action-state store failed; it will grow until the next prune", "err", err)
		}
	}()
	return nil
}

// NotifyCheckpointAborted implements runtime.CheckpointListener: what the
// aborted checkpoint covered is pruned with the next one that completes.
func (o *operator[K, IN, OUT]) NotifyCheckpointAborted(id int64) { o.retention.aborted(id) }
