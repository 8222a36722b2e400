package agent

import (
	"errors"
	"fmt"
	"slices"
)

// storeGap returns err, unless it only says the store lacks states a
// restore needs (ErrStatesMissing) and Options.AllowRepeatedSideEffects
// lets the job go on: then it logs a warning and returns nil.
func (o *operator[K, IN, OUT]) storeGap(err error) error {
	if err == nil || !errors.Is(err, ErrStatesMissing) {
		return err
	}
	if !o.opts.AllowRepeatedSideEffects {
		return fmt.Errorf("%w; to go on and run those actions again, with their side effects, set agent.Options.AllowRepeatedSideEffects", err)
	}
	o.logger.Warn("agent: the action-state store lacks states the restored checkpoint needs; going on (Options.AllowRepeatedSideEffects): the actions of their inputs run again, with their side effects", "err", err)
	return nil
}

// recall looks the run up in the store (on the action goroutine): a
// completed run is replayed (done is true: its memory writes and events
// are taken from the store and the action is not called), an unfinished
// one hands its recorded calls to Durable, and a run the store does not
// know while it knows later ones of the key is a divergence, unless the
// store held an earlier run of the same input (runState.known): then the
// run is a new branch of that input's tree, and the key's later inputs
// keep their recorded runs.
func (o *operator[K, IN, OUT]) recall(rc *RunnerContext, d *durableRun) (done bool, err error) {
	id, err := rc.RunID()
	if err != nil {
		return false, err
	}
	d.id = id
	st, err := d.store.Get(id)
	if err != nil {
		err = fmt.Errorf("reading the action-state store: %w", err)
		d.failed(err)
		return false, err
	}
	if st == nil {
		if d.known != nil && *d.known {
			return false, nil
		}
		if latest, ok := d.store.Latest(id.Key); ok && !latest.Less(d.pos) {
			rc.Logger().Warn("agent: the recorded run of this key diverges from this one; discarding its recorded future",
				"recorded", latest, "now", d.pos)
			o.cDiverged.Inc()
			if err := d.store.DiscardFrom(id.Key, d.pos); err != nil {
				err = fmt.Errorf("action-state store: %w", err)
				d.failed(err)
				return false, err
			}
		}
		return false, nil
	}
	if d.known != nil {
		*d.known = true
	}
	if !st.Completed {
		d.recorded = st.Calls
		return false, nil
	}
	o.cReplayed.Inc()
	rc.short.writes = st.Short.buffer()
	rc.sensory.writes = st.Sensory.buffer()
	rc.sent = append(rc.sent[:0], st.Sent...)
	return true, nil
}

// record makes the outcome of c's run durable in the store (on the action
// goroutine, before the completion is handed to the subtask goroutine, so
// that outputs never leave before their record: G10). A failed
// run's last call is settled, and a run that failed before recording
// anything is recorded empty; a completed run's state is recorded whole.
// A store error becomes the run's error and is sticky (durableRun.failed).
func (o *operator[K, IN, OUT]) record(c *completion[K, IN], d *durableRun) {
	if c.err != nil {
		// The last call's record, if queued, must be durable (or its
		// error known) before the failure is applied.
		if d.settle() == nil && len(d.calls) == 0 && len(d.recorded) == 0 {
			// A run that failed before recording anything (a time-out, an
			// error before its first durable call) is recorded, empty and
			// not completed, before its input goes on: else a restore that
			// runs it again finds the store knowing later runs of the key
			// and not this one, takes that for a divergence and discards
			// the key's recorded future, repeating the side effects of
			// every later input of the key (found by internal/sim, seed
			// 51 with the agent branch).
			if err := d.store.Put(&ActionState{ID: d.id, Pos: d.pos, KeyGroup: d.kg}); err != nil {
				d.failed(fmt.Errorf("agent: recording a failed action in the action-state store: %w", err))
			}
		}
		return
	}
	// The store may keep st: it gets its own copies of the slices (the
	// completion, and with it rc.sent's storage, is recycled).
	st := &ActionState{ID: d.id, Pos: d.pos, KeyGroup: d.kg, Completed: true, Calls: slices.Clone(d.calls),
		Short: writesOf(c.rc.short.writes), Sensory: writesOf(c.rc.sensory.writes), Sent: slices.Clone(c.rc.sent)}
	// With a Queuer the completed state is queued before waiting for the
	// last call's record, so that both are usually written together: the
	// action waits for one write, not two in a row.
	var err error
	if q, ok := d.store.(Queuer); ok && d.pending != nil {
		var p Pending
		if p, err = q.PutQueued(st); err == nil {
			if err = d.settle(); err == nil {
				err = p.Wait()
			}
		}
	} else if err = d.settle(); err == nil {
		err = d.store.Put(st)
	}
	if err != nil {
		c.err = fmt.Errorf("recording the completed action in the action-state store (its outputs are held back): %w", err)
		d.failed(c.err)
	}
}
