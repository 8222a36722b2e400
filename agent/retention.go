package agent

import (
	"slices"
)

// pendingPrune is what a checkpoint covers: the inputs finished before its
// snapshot, prunable from the store once it completes.
type pendingPrune struct {
	id   int64
	upTo map[string]int64
}

// NotifyCheckpointComplete implements runtime.CheckpointListener. The
// store's states of inputs finished before a checkpoint are pruned, in the
// background, once no retained checkpoint needs them: when the oldest
// checkpoint still retained (Context.RetainedCheckpoints) is that
// checkpoint or a later one. A restore from any retained checkpoint then
// finds the states of every input finished after it. Savepoints are not
// retained by the runtime: their states go with the next checkpoint that
// becomes the oldest retained one (package documentation, guarantee 11).
func (o *operator[K, IN, OUT]) NotifyCheckpointComplete(id int64) error {
	if o.store == nil {
		return nil
	}
	if o.savepoints[id] {
		delete(o.savepoints, id)
	} else {
		i, found := slices.BinarySearch(o.retained, id)
		if !found {
			o.retained = slices.Insert(o.retained, i, id)
		}
		if n := len(o.retained) - max(o.Ctx.RetainedCheckpoints, 1); n > 0 {
			o.retained = slices.Delete(o.retained, 0, n)
		}
	}
	if len(o.retained) == 0 {
		return nil
	}
	oldest := o.retained[0]
	upTo := map[string]int64{}
	horizon := int64(0)
	n := 0
	for _, p := range o.prunes {
		if p.id > oldest {
			o.prunes[n] = p
			n++
			continue
		}
		horizon = max(horizon, p.id)
		for k, s := range p.upTo {
			if cur, ok := upTo[k]; !ok || s > cur {
				upTo[k] = s
			}
		}
	}
	clear(o.prunes[n:])
	o.prunes = o.prunes[:n]
	if len(upTo) == 0 {
		return nil
	}
	list := make([]KeySeq, 0, len(upTo))
	for k, s := range upTo {
		list = append(list, KeySeq{Key: []byte(k), Seq: s})
	}
	st := o.store
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var err error
		if cp, ok := st.(Checkpointed); ok {
			err = cp.PruneCheckpoint(horizon, list)
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
func (o *operator[K, IN, OUT]) NotifyCheckpointAborted(id int64) { delete(o.savepoints, id) }
