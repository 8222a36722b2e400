package sim

import (
	"strings"
	"testing"

	"github.com/weirproject/weir/cluster"
)

// The C2 check on task events (InvClusterOwner): a task started in m1
// while m0 runs it must stop in m0 with SessionLost; a finish in m0 in
// between is judged at that stop (m0 cannot know it was removed from the
// group before its next group call), not at the finish.
func TestOwnershipJudgesAFinishAtTheStop(t *testing.T) {
	ev := func(task string, kind cluster.TaskEventKind, lost bool) cluster.TaskEvent {
		return cluster.TaskEvent{Task: task, Kind: kind, SessionLost: lost}
	}
	for _, c := range []struct {
		name string
		old  []cluster.TaskEvent // m0's events after m1 started the task
		want string              // in the failure; "" for none
	}{
		{"stopped lost", []cluster.TaskEvent{ev("k", cluster.TaskStopped, true)}, ""},
		{"stopped", []cluster.TaskEvent{ev("k", cluster.TaskStopped, false)}, "m0 then stopped it without having lost its session"},
		{"finished, stopped lost", []cluster.TaskEvent{ev("k", cluster.TaskFinished, false), ev("k", cluster.TaskStopped, true)}, ""},
		{"finished, stopped", []cluster.TaskEvent{ev("k", cluster.TaskFinished, false), ev("k", cluster.TaskStopped, false)},
			"m0 finished it, then stopped it without having lost its session"},
		{"finished, never stopped", []cluster.TaskEvent{ev("k", cluster.TaskFinished, false)},
			"m0 finished it and never reported that it had lost its session"},
		{"never stopped", nil, "m0 never reported stopping it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cr := &clusterRun{}
			m0, m1 := &clusterMember{index: 0}, &clusterMember{index: 1}
			cr.onTask(m0, 0, ev("k", cluster.TaskStarted, false))
			cr.onTask(m1, 1, ev("k", cluster.TaskStarted, false))
			for _, e := range c.old {
				cr.onTask(m0, 0, e)
			}
			f := cr.ownerFailure()
			switch {
			case c.want == "" && f != nil:
				t.Fatalf("failed: %s", f.Detail)
			case c.want != "" && f == nil:
				t.Fatalf("passed, want a failure with %q", c.want)
			case c.want != "" && !strings.Contains(f.Detail, c.want):
				t.Fatalf("failure %q, want %q in it", f.Detail, c.want)
			}
		})
	}
}
