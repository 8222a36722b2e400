package runtime

// The task side of a checkpoint: snapshotting the chain at the barrier,
// and acting on the coordinator's complete, abort and final-checkpoint
// notices. They run on the task goroutine.

import (
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/mutant"
)

// checkpoint snapshots the task's operators for checkpoint id, forwards the
// barrier, and acknowledges. It runs on the task goroutine: from a
// mailbox letter in source tasks, on alignment in the others. The
// asynchronous parts of the snapshot (SnapshotWriter.Async) run on a
// goroutine of their own after the barrier is forwarded; the acknowledgement
// follows them.
func (t *task) checkpoint(id int64) {
	if t.err != nil {
		// A failed task's state is not consistent: never snapshot it.
		t.job.coord.ack(ack{t: t, id: id, err: t.err})
		return
	}
	began := time.Now() // lint:allow-time a measurement of the pause, not a decision
	states := map[*Node]*checkpoint.SubtaskState{}
	var writers []*SnapshotWriter
	var names []string // of writers' operators
	var err error
	kind := t.job.coord.kindOf(id)
	final := t.job.coord.isFinal(id)
	for _, inst := range t.chain {
		ctx := inst.context()
		w := newSnapshotWriter(id, kind, ctx.KeyGroups)
		if t.job.coord.cfg.Storage.Store == nil {
			// Shared files go to the base's own store (checkpoint.NewUploader);
			// with an injected Store, snapshots stay canonical.
			w.base = t.job.coord.cfg.Dir
		}
		w.final = final
		for _, p := range inst.parts() {
			if s, ok := p.(Snapshotter); ok && err == nil {
				if e := s.SnapshotState(w); e != nil {
					err = t.opError(ctx.Name, PhaseSnapshot, e)
				}
			}
			if s, ok := p.(SplitSnapshotter); ok && err == nil {
				items, e := s.SnapshotSplits(id)
				if mutant.On(mutant.SourceForgetsSplit) && len(items) > 0 {
					items = items[:len(items)-1]
				}
				if e != nil {
					err = t.opError(ctx.Name, PhaseSnapshotSplits, e)
				}
				w.List(SplitsList, checkpoint.EvenSplit, items)
			}
		}
		states[ctx.node] = w.st
		if len(w.async) > 0 {
			writers = append(writers, w)
			names = append(names, ctx.Name)
		}
	}
	sync := time.Since(began) // lint:allow-time
	for _, w := range t.writers {
		w.barrier(id)
	}
	if final {
		// Nothing may follow the final barrier: processing-time
		// callbacks stop here (procTimers.quiesce).
		t.timers.quiesce()
	}
	if t.job.coord.isStop(id) {
		// Nor a stop's, unless it is aborted: a source stops
		// reading (sourceInstance.run), callbacks wait (procTimers.pause).
		t.stopFor = id
		t.timers.pause()
	}
	if len(writers) == 0 {
		t.job.coord.ack(ack{t: t, id: id, states: states, err: err, sync: sync})
		return
	}
	go func() {
		for i, w := range writers {
			for _, f := range w.async {
				// Every f runs, even after a failure, to release what the
				// synchronous part pinned.
				if e := f(); e != nil && err == nil {
					err = t.opError(names[i], PhaseSnapshotAsync, e)
				}
			}
		}
		t.job.coord.ack(ack{t: t, id: id, states: states, err: err, sync: sync})
	}()
}

func (t *task) completeCheckpoint(id int64) {
	for _, inst := range t.chain {
		for _, p := range inst.parts() {
			if l, ok := p.(CheckpointListener); ok {
				if err := l.NotifyCheckpointComplete(id); err != nil {
					e := t.opError(inst.name(), PhaseNotifyComplete, err)
					e.Checkpoint = id
					t.failWith(e)
				}
			}
		}
	}
}

func (t *task) abortCheckpoint(id int64) {
	t.align.abort(id)
	if t.stopFor == id {
		// The stop did not happen: read and run callbacks again.
		t.stopFor = 0
		t.timers.resume()
	}
	for _, inst := range t.chain {
		for _, p := range inst.parts() {
			if l, ok := p.(CheckpointListener); ok {
				l.NotifyCheckpointAborted(id)
			}
		}
	}
}

// awaitFinalCheckpoint is called by a source task whose input has ended.
// With periodic checkpoints it waits, serving its mailbox (checkpoint
// triggers included), until the coordinator reports the final checkpoint
// done; the task then ends its output.
func (t *task) awaitFinalCheckpoint() error {
	c := t.job.coord
	if !c.finalCheckpoints() {
		return nil
	}
	select {
	case c.sourcesDone <- t:
	case <-t.done:
		return errCancelled
	}
	for !t.finalCheckpointDone {
		t.flushAll()
		if err := t.yield(); err != nil {
			return err
		}
	}
	return nil
}
