package sim

import (
	"strings"
	"testing"

	"github.com/weirproject/weir/cluster"
)

// The C2 check on task events (InvClusterOwner): a task started in m1
// while m0 runs it must stop with SessionLost in m0, or in m1 (a process
// the group had removed restarting its failed run before it learned:
// seed 402235); a finish in m0 in between is judged at that stop (m0
// cannot know it was removed from the group before its next group call),
// not at the finish.
func TestOwnershipJudgesAFinishAtTheStop(t *testing.T) {
	ev := func(task string, kind cluster.TaskEventKind, lost bool) cluster.TaskEvent {
		return cluster.TaskEvent{Task: task, Kind: kind, SessionLost: lost}
	}
	for _, c := range []struct {
		name string
		old  []cluster.TaskEvent // m0's events after m1 started the task
		by   []cluster.TaskEvent // then m1's
		want string              // in the failure; "" for none
	}{
		{"stopped lost", []cluster.TaskEvent{ev("k", cluster.TaskStopped, true)}, nil, ""},
		{"stopped", []cluster.TaskEvent{ev("k", cluster.TaskStopped, false)}, nil, "m0 then stopped it, and neither reported a lost session"},
		{"finished, stopped lost", []cluster.TaskEvent{ev("k", cluster.TaskFinished, false), ev("k", cluster.TaskStopped, true)}, nil, ""},
		{"finished, stopped", []cluster.TaskEvent{ev("k", cluster.TaskFinished, false), ev("k", cluster.TaskStopped, false)}, nil,
			"m0 finished it, then stopped it, and neither reported a lost session"},
		{"finished, never stopped", []cluster.TaskEvent{ev("k", cluster.TaskFinished, false)}, nil,
			"m0 finished it and never reported stopping it"},
		{"never stopped", nil, nil, "m0 never reported stopping it"},
		{"stopped, the starter stopped lost", []cluster.TaskEvent{ev("k", cluster.TaskStopped, false)},
			[]cluster.TaskEvent{ev("k", cluster.TaskStopped, true)}, ""},
		{"stopped, the starter finished and stopped lost", []cluster.TaskEvent{ev("k", cluster.TaskStopped, false)},
			[]cluster.TaskEvent{ev("k", cluster.TaskFinished, false), ev("k", cluster.TaskStopped, true)}, ""},
		{"stopped, the starter stopped", []cluster.TaskEvent{ev("k", cluster.TaskStopped, false)},
			[]cluster.TaskEvent{ev("k", cluster.TaskStopped, false)}, "m0 then stopped it, and neither reported a lost session"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cr := &clusterRun{}
			m0, m1 := &clusterMember{index: 0}, &clusterMember{index: 1}
			cr.onTask(m0, 0, ev("k", cluster.TaskStarted, false))
			cr.onTask(m1, 1, ev("k", cluster.TaskStarted, false))
			for _, e := range c.old {
				cr.onTask(m0, 0, e)
			}
			for _, e := range c.by {
				cr.onTask(m1, 1, e)
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
