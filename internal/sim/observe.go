package sim

import (
	"fmt"

	"github.com/weirproject/weir/weirtest"
)

// checkObserved checks S2 and S3 on what the observer behind the window
// operator received in one attempt, per subtask (one channel each: the
// observer is chained to the window operator): watermarks strictly rise;
// a record at or behind the last watermark received is allowed only as a
// late firing, a window whose cleanup time (end - 1 + lateness) the
// watermark has not reached. The late side output is not observed: its
// records are behind the watermark by definition.
func checkObserved(spec *Spec, o observed) *Failure {
	if f := checkWindow(spec, o.window); f != nil {
		return f
	}
	if f := checkSorted(o.sort); f != nil {
		return f
	}
	if f := checkTimers(o.timers); f != nil {
		return f
	}
	if f := checkSessions(spec, o.session); f != nil {
		return f
	}
	if f := checkAgentObserved(spec, o.agent); f != nil {
		return f
	}
	if o.expired != nil {
		return o.expired
	}
	return o.restore
}

func checkWindow(spec *Spec, obs *weirtest.Observation[string]) *Failure {
	if obs == nil {
		return nil
	}
	return checkWindowLateness(obs, spec.LatenessMS, "window")
}

// checkWindowLateness is checkWindow for the operator name with allowed
// lateness L.
func checkWindowLateness(obs *weirtest.Observation[string], L int64, name string) *Failure {
	for sub := range obs.Subtasks() {
		last, have := int64(minWM), false
		var lastRec string
		for i, e := range obs.Events(sub) {
			switch e.Kind {
			case weirtest.WatermarkEvent:
				if have && e.TS <= last {
					return &Failure{Invariant: InvWatermarks,
						Detail:  fmt.Sprintf("%s subtask %d, event %d: watermark %d after %d", name, sub, i, e.TS, last),
						Records: nonEmpty(lastRec)}
				}
				last, have = e.TS, true
			case weirtest.RecordEvent:
				lastRec = fmt.Sprintf("%s @%d", e.Value, e.TS)
				if have && e.TS <= last && sat(e.TS, L) <= last {
					return &Failure{Invariant: InvBehindWM,
						Detail:  fmt.Sprintf("%s subtask %d, event %d: a result at %d emitted after watermark %d, beyond the allowed lateness %dms", name, sub, i, e.TS, last, L),
						Records: []string{lastRec}}
				}
			}
		}
	}
	return nil
}

// checkSorted checks S5 on what the observer right behind the sort
// received in one attempt, per subtask (chained: one channel each). The
// sort releases the records a watermark W passes before it forwards W, so
// a record is on time if it is above the last watermark received, and an
// order violation (emitted at once, ordering/doc.go S3) if it is at or
// behind it. Per key, the records on time come in non-decreasing
// timestamp order; and each was released only once the watermark had
// passed it: the watermark that follows it is at or above its timestamp.
// That every record is there exactly once, and which are violations, S1
// checks on the committed output against the oracle.
func checkSorted(obs *weirtest.Observation[event]) *Failure {
	if obs == nil {
		return nil
	}
	for sub := range obs.Subtasks() {
		wm, have := int64(minWM), false
		last := map[string]event{} // per key, the last record on time
		var pending []event        // on time, since the last watermark
		for i, e := range obs.Events(sub) {
			switch e.Kind {
			case weirtest.WatermarkEvent:
				for _, p := range pending {
					if p.TS > e.TS {
						return &Failure{Invariant: InvSorted,
							Detail:  fmt.Sprintf("sort subtask %d, event %d: a record at %d was released before watermark %d, which does not pass it", sub, i, p.TS, e.TS),
							Records: []string{sortLine(p.Key, p.TS, p.ID)}}
					}
				}
				pending = pending[:0]
				wm, have = e.TS, true
			case weirtest.RecordEvent:
				r := e.Value
				if have && e.TS <= wm {
					continue // an order violation, emitted at once
				}
				if p, ok := last[r.Key]; ok && e.TS < p.TS {
					return &Failure{Invariant: InvSorted,
						Detail:  fmt.Sprintf("sort subtask %d, event %d: key %s released at %d after %d", sub, i, r.Key, e.TS, p.TS),
						Records: []string{sortLine(p.Key, p.TS, p.ID), sortLine(r.Key, e.TS, r.ID)}}
				}
				last[r.Key] = event{Key: r.Key, ID: r.ID, TS: e.TS}
				pending = append(pending, event{Key: r.Key, ID: r.ID, TS: e.TS})
			}
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{"last record before it: " + s}
}
