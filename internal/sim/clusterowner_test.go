package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/weirproject/weir/checkpoint"
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
			wantVerdict(t, cr.ownerFailure(), c.want)
		})
	}
}

// The C2 check on fenced runs: a run of task k in m1 that a newer claim
// of k's checkpoints fenced (checkpoint.ErrFenced) is excused only by a
// lost session (or a kill) of m1 itself or of an instance whose start
// claimed an epoch after m1's run's, up to the one that fenced it; not by
// any instance's.
func TestOwnershipExcusesAFencedRunByItsClaimant(t *testing.T) {
	fencedErr := fenceError(t, 5, 7) // epoch 7 fenced a run at epoch 5
	ev := func(kind cluster.TaskEventKind, epoch int64, lost bool, err string) cluster.TaskEvent {
		return cluster.TaskEvent{Task: "k", Kind: kind, Epoch: epoch, SessionLost: lost, Err: err}
	}
	type step struct {
		m  int
		ev cluster.TaskEvent
	}
	for _, c := range []struct {
		name  string
		steps []step
		kill  int // a member killed at the end, -1 for none
		want  string
	}{
		{"the claimant of the fencing epoch lost its session", []step{
			{0, ev(cluster.TaskStarted, 6, false, "")}, {2, ev(cluster.TaskStarted, 7, false, "")},
			{1, ev(cluster.TaskFailed, 0, false, fencedErr)},
			{2, ev(cluster.TaskStopped, 0, true, "")}, {0, ev(cluster.TaskStopped, 0, false, "")}}, -1, ""},
		{"the claimant of an epoch between lost its session, before the fence struck", []step{
			{0, ev(cluster.TaskStarted, 6, false, "")}, {0, ev(cluster.TaskStopped, 0, true, "")},
			{2, ev(cluster.TaskStarted, 7, false, "")}, {1, ev(cluster.TaskFailed, 0, false, fencedErr)},
			{2, ev(cluster.TaskStopped, 0, false, "")}}, -1, ""},
		{"the fenced run's own member lost its session", []step{
			{0, ev(cluster.TaskStarted, 6, false, "")}, {2, ev(cluster.TaskStarted, 7, false, "")},
			{1, ev(cluster.TaskFailed, 0, false, fencedErr)}, {1, ev(cluster.TaskStopped, 0, true, "")},
			{0, ev(cluster.TaskStopped, 0, false, "")}, {2, ev(cluster.TaskStopped, 0, false, "")}}, -1, ""},
		{"the claimant was killed", []step{
			{0, ev(cluster.TaskStarted, 6, false, "")}, {2, ev(cluster.TaskStarted, 7, false, "")},
			{1, ev(cluster.TaskFailed, 0, false, fencedErr)}, {0, ev(cluster.TaskStopped, 0, false, "")}}, 2, ""},
		{"only a member that claimed no newer epoch lost its session", []step{
			{0, ev(cluster.TaskStarted, 6, false, "")}, {2, ev(cluster.TaskStarted, 7, false, "")},
			{1, ev(cluster.TaskFailed, 0, false, fencedErr)},
			{3, ev(cluster.TaskStarted, 4, false, "")}, {3, ev(cluster.TaskStopped, 0, true, "")},
			{0, ev(cluster.TaskStopped, 0, false, "")}, {2, ev(cluster.TaskStopped, 0, false, "")}}, -1,
			"task k failed in member m1 because member m2's start of it (epoch 7; the run's was 5) claimed its checkpoints"},
		{"an unreported claim between: any lost session excuses it", []step{
			{2, ev(cluster.TaskStarted, 7, false, "")}, {1, ev(cluster.TaskFailed, 0, false, fencedErr)},
			{3, ev(cluster.TaskStarted, 4, false, "")}, {3, ev(cluster.TaskStopped, 0, true, "")},
			{2, ev(cluster.TaskStopped, 0, false, "")}}, -1, ""},
		{"an unreported claim between and no lost session", []step{
			{2, ev(cluster.TaskStarted, 7, false, "")}, {1, ev(cluster.TaskFailed, 0, false, fencedErr)},
			{2, ev(cluster.TaskStopped, 0, false, "")}}, -1, "task k failed in member m1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cr := &clusterRun{}
			ms := []*clusterMember{{index: 0}, {index: 1}, {index: 2}, {index: 3}}
			cr.onTask(ms[1], 1, ev(cluster.TaskStarted, 5, false, ""))
			for _, s := range c.steps {
				cr.onTask(ms[s.m], s.m, s.ev)
			}
			if c.kill >= 0 {
				ms[c.kill].killed = true
			}
			// The overlaps the starts made are C2's other rule (judged
			// as they stop, or at the end): only the fenced runs, which
			// are judged at the end, are tested here.
			cr.own.overlaps, cr.own.fail = nil, nil
			wantVerdict(t, cr.ownerFailure(), c.want)
		})
	}
}

// fenceError returns the error a checkpoint writer at epoch own gets once
// epoch by has claimed its base, made by package checkpoint itself.
func fenceError(t *testing.T, own, by int64) string {
	t.Helper()
	base := t.TempDir()
	var f *checkpoint.Fence
	for e := int64(1); e <= by; e++ {
		g, _, _, err := checkpoint.Storage{}.ClaimLatest(base)
		if err != nil {
			t.Fatal(err)
		}
		if e == own {
			f = g
		}
	}
	err := f.Check()
	if !errors.Is(err, checkpoint.ErrFenced) || fencedEpochs.FindStringSubmatch(err.Error()) == nil {
		t.Fatalf("a fenced writer's error %v does not name the epochs as ownership reads them", err)
	}
	return "cluster: task k: " + err.Error()
}

// wantVerdict fails t unless f is C2's verdict want: no failure for "",
// else a failure whose detail holds want.
func wantVerdict(t *testing.T, f *Failure, want string) {
	t.Helper()
	switch {
	case want == "" && f != nil:
		t.Fatalf("failed: %s", f.Detail)
	case want != "" && f == nil:
		t.Fatalf("passed, want a failure with %q", want)
	case want != "" && !strings.Contains(f.Detail, want):
		t.Fatalf("failure %q, want %q in it", f.Detail, want)
	}
}
