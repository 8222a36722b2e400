package agent

import (
	"fmt"

	"github.com/weirproject/weir/clock"
)

func (o *operator[K, IN, OUT]) gauges() {
	o.gHeld.Set(int64(o.q.Held()))
	o.gAge.Set(o.q.OldestAge())
	o.gInFlight.Set(int64(o.unfinished))
	o.gRunning.Set(int64(o.running))
}

// status describes the subtask (on the subtask goroutine).
func (o *operator[K, IN, OUT]) status() SubtaskStatus {
	s := SubtaskStatus{Operator: o.Ctx.Name, Subtask: o.Ctx.Subtask, HeldWatermarks: o.q.Held(),
		RunningKeys: o.running, WaitingInputs: o.waiting, InFlightInputs: o.unfinished,
		PendingWaits: o.pendingWaits(clock.NowMillis(o.Ctx.Clock))}
	if m, _, ok := o.q.Oldest(); ok {
		s.OldestHeldWatermark = m.ts
		s.OldestHeldIsStatus = m.kind != markWatermark
		s.OldestHeldAgeMs = o.q.OldestAge()
		s.OldestHeldByCount = o.q.OldestKeyCount()
		for k, n := range o.q.OldestKeys(statusKeys) {
			s.OldestHeldBy = append(s.OldestHeldBy, HeldKey{Key: fmt.Sprint(k), Inputs: n})
		}
		sortHeld(s.OldestHeldBy)
	}
	return s
}

const statusKeys = 20
