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
func checkObserved(spec *Spec, obs *weirtest.Observation[string]) *Failure {
	if obs == nil {
		return nil
	}
	for sub := range obs.Subtasks() {
		last, have := int64(minWM), false
		var lastRec string
		for i, e := range obs.Events(sub) {
			switch e.Kind {
			case weirtest.WatermarkEvent:
				if have && e.TS <= last {
					return &Failure{Invariant: InvWatermarks,
						Detail:  fmt.Sprintf("window subtask %d, event %d: watermark %d after %d", sub, i, e.TS, last),
						Records: nonEmpty(lastRec)}
				}
				last, have = e.TS, true
			case weirtest.RecordEvent:
				lastRec = fmt.Sprintf("%s @%d", e.Value, e.TS)
				if have && e.TS <= last && sat(e.TS, spec.LatenessMS) <= last {
					return &Failure{Invariant: InvBehindWM,
						Detail:  fmt.Sprintf("window subtask %d, event %d: a result at %d emitted after watermark %d, beyond the allowed lateness %dms", sub, i, e.TS, last, spec.LatenessMS),
						Records: []string{lastRec}}
				}
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
