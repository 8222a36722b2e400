package runtime

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/weirproject/weir/checkpoint"
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

// ErrOtherJob is the error of a job that would resume
// (CheckpointConfig.Resume) from a checkpoint another job wrote.
var ErrOtherJob = errors.New("runtime: checkpoint of another job")

// RestoredFrom says what a job was started from.
type RestoredFrom struct {
	// Path is the snapshot's location ("" when the job started fresh).
	Path string
	// ID is the snapshot's checkpoint id.
	ID int64
	// Kind is checkpoint.KindCheckpoint or checkpoint.KindSavepoint.
	Kind checkpoint.Kind
	// Resumed is set when the snapshot was found by
	// CheckpointConfig.Resume (the newest under Dir) rather than given by
	// RestoreFrom.
	Resumed bool
}

// loadRestore finds the snapshot to restore from, if any: RestoreFrom,
// resolved by checkpoint.Resolve; with Resume, the newest complete
// snapshot under Dir (newestOwn) instead when RestoreFrom is "" or that
// snapshot's Origin is RestoreFrom (a restart of a job restored from it).
// It reads it and checks it against the job: a resumed
// snapshot must be this job's (JobName), the max parallelism must match
// (I3 of package checkpoint), and every operator state in it must have an
// operator unless AllowNonRestoredState. It also sets the id the job's
// first checkpoint takes: after the restored one and after the newest
// complete one under Dir.
func (b *builder) loadRestore() error {
	if err := b.assignUIDs(); err != nil {
		return err
	}
	cp := b.cfg.Checkpoint
	b.firstID = 1
	if cp.Dir != "" {
		ids, err := cp.Storage.List(cp.Dir)
		if err != nil {
			return fmt.Errorf("runtime: listing the checkpoints in %s: %w", cp.Dir, err)
		}
		if len(ids) > 0 {
			b.firstID = ids[len(ids)-1] + 1
		}
	}
	from := cp.RestoreFrom
	var snap *checkpoint.Snapshot
	if from != "" {
		loc, err := cp.Storage.Resolve(from)
		if err != nil {
			return err
		}
		from = loc
		b.origin = loc
	}
	if cp.Resume && cp.Dir != "" {
		// The newest snapshot is resumed when nothing else is asked for,
		// and also when it continues a run that was restored from
		// RestoreFrom: the same command, started again after a crash.
		latestLoc, latest, err := b.newestOwn()
		if err != nil {
			return err
		}
		if latest != nil && latestLoc != from && (from == "" || latest.Origin == from) {
			from, snap = latestLoc, latest
			b.restored.Resumed = true
			b.origin = latest.Origin
		}
	}
	if from == "" {
		return nil
	}
	if snap == nil {
		var err error
		if snap, err = cp.Storage.Read(from); err != nil {
			return err
		}
	}
	// The job will commit the snapshot's pending transactions and go on
	// from it: it must survive a crash as long as that output does
	// (checkpoint.Storage.Persist; found by the simulator, seed
	// 2930115022513460645: a snapshot whose last fsync had failed was
	// restored, its transactions committed, then a crash lost it and the
	// next run started over).
	if err := cp.Storage.Persist(from); err != nil {
		return err
	}
	if b.restored.Resumed && snap.Job != "" && cp.JobName != "" && snap.Job != cp.JobName {
		return fmt.Errorf("%w: the newest snapshot in %s is of job %q, not of this job %q: give this job a checkpoint directory of its own, or start it without resuming",
			ErrOtherJob, cp.Dir, snap.Job, cp.JobName)
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
		if !known[o.UID] && o.Size() > 0 && !cp.AllowNonRestoredState {
			return fmt.Errorf("runtime: the snapshot in %s has state for operator uid %q, which the job does not have; give the operator that uid, or set AllowNonRestoredState to drop the state", from, o.UID)
		}
	}
	if cp.keepOrigin {
		b.origin = cp.origin
	}
	b.restore = snap
	b.restored.Path, b.restored.ID, b.restored.Kind = from, snap.ID, snap.Kind
	if snap.ID >= b.firstID {
		b.firstID = snap.ID + 1
	}
	return nil
}

// SavepointsDir is the directory under CheckpointConfig.Dir where a job's
// own savepoints may be kept (weir run takes its stop savepoint there):
// Resume considers the complete ones there as well as the checkpoints.
const SavepointsDir = "savepoints"

// newestOwn returns the newest complete snapshot (highest id) among the
// checkpoints under Dir and the savepoints under Dir/SavepointsDir, and
// its location; nil if there is none. Checkpoint and savepoint ids of one
// job and its restarts grow together, so the highest id is the newest.
func (b *builder) newestOwn() (string, *checkpoint.Snapshot, error) {
	cp := b.cfg.Checkpoint
	var locs []string
	if ids, err := cp.Storage.List(cp.Dir); err != nil {
		return "", nil, err
	} else if len(ids) > 0 {
		locs = append(locs, checkpoint.Dir(cp.Dir, ids[len(ids)-1]))
	}
	sps, err := cp.Storage.Complete(checkpoint.Join(cp.Dir, SavepointsDir))
	if err != nil {
		return "", nil, err
	}
	locs = append(locs, sps...)
	var (
		best    *checkpoint.Snapshot
		bestLoc string
	)
	for _, loc := range locs {
		s, err := cp.Storage.Read(loc)
		if err != nil {
			return "", nil, err
		}
		if best == nil || s.ID > best.ID {
			best, bestLoc = s, loc
		}
	}
	return bestLoc, best, nil
}
