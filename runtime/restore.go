package runtime

import (
	"fmt"
	"strconv"
)

// assignUIDs gives every node a unique uid: the one the user set, or its
// name, suffixed "#2", "#3", ... for later nodes with the same name (which
// is stable as long as the job is built the same way; set uids to be safe
// across changes of the job).
func (b *builder) assignUIDs() error {
	b.uids = map[*Node]string{}
	used := map[string]*Node{}
	for _, n := range b.g.nodes {
		if n.uid != "" {
			if o, dup := used[n.uid]; dup {
				return fmt.Errorf("runtime: operators %q and %q both have uid %q; uids must be unique", o.name, n.name, n.uid)
			}
			used[n.uid] = n
			b.uids[n] = n.uid
		}
	}
	for _, n := range b.g.nodes {
		if n.uid != "" {
			continue
		}
		uid := n.name
		for i := 2; used[uid] != nil; i++ {
			uid = n.name + "#" + strconv.Itoa(i)
		}
		used[uid] = n
		b.uids[n] = uid
	}
	return nil
}

// loadRestore reads the snapshot to restore from, if any, and checks it
// against the job: the max parallelism must match (I3 of package
// checkpoint), and every operator state in it must have an operator unless
// AllowNonRestoredState.
func (b *builder) loadRestore() error {
	if err := b.assignUIDs(); err != nil {
		return err
	}
	from := b.cfg.Checkpoint.RestoreFrom
	if from == "" {
		return nil
	}
	snap, err := b.cfg.Checkpoint.Storage.Read(from)
	if err != nil {
		return err
	}
	if b.cfg.MaxParallelism != 0 && b.cfg.MaxParallelism != snap.MaxParallelism {
		return fmt.Errorf("runtime: the snapshot in %s was taken with max parallelism %d but the job sets %d; the max parallelism is fixed for the life of the state (leave it unset or set it to %d)",
			from, snap.MaxParallelism, b.cfg.MaxParallelism, snap.MaxParallelism)
	}
	b.maxParallelism = snap.MaxParallelism
	known := map[string]bool{}
	for _, uid := range b.uids {
		known[uid] = true
	}
	for _, o := range snap.Operators {
		if !known[o.UID] && o.Size() > 0 && !b.cfg.Checkpoint.AllowNonRestoredState {
			return fmt.Errorf("runtime: the snapshot in %s has state for operator uid %q, which the job does not have; give the operator that uid, or set AllowNonRestoredState to drop the state", from, o.UID)
		}
	}
	b.restore = snap
	return nil
}
