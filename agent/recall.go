package agent

import (
	"errors"
	"fmt"
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
// know while it knows later ones of the key is a divergence.
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
