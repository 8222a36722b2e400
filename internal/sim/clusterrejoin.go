package sim

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/cluster"
)

// InvClusterOwner is the clustered form's check of cluster C2, part of
// S16: no task is started by a live member while another live member
// runs it, unless one of the two had lost its group session, as the
// members' task events (Config.OnTask) tell: a task that another member
// started before this one stopped it must stop, here or in the starter,
// with SessionLost (no hand-over checkpoint, a hand-over past the
// rebalance time-out, or a session the member learned it had lost; the
// starter is the one when a process the group removed restarts its failed
// run before it learns, cluster M4 and "Not guaranteed"). A member cannot know it was
// removed from the group before its next group call: a run that finishes
// (TaskFinished) meanwhile is not judged at its finish but at the task's
// stop in that member, which must then say SessionLost (cluster stops a
// finished task's runner, too, when it learns). And a member that reports
// a task revoked (TaskRevoked: its revoke callback has handed the task
// over) must not run it any more, its TaskStopped having come first.
// Before the form's rebalance time-out outlasted its hand-over
// checkpoint, 8 of the first 100 clustered seeds under load broke it,
// each with exactly-once output all the same (the new owner's claim
// fenced the old one's checkpoints, C4, and its transactional ids its
// transactions).
const InvClusterOwner = "S16 one owner per task (cluster C2, task events)"

// FaultMemberRejoin starts a killed static member (member-kill of
// Subtask) again under its own name, DelayMS after the kill: within its
// session (simSessionTimeout), so the group hands its tasks back to it
// without giving them to another member (cluster M6).
const FaultMemberRejoin FaultKind = "member-rejoin"

// generateClusterRejoin draws, for a form of static members, which killed
// members come back under their own name within their session: each kill
// in half the cases, 10-600ms after it, from a stream of its own
// (rand.NewPCG(seed, 0xc1e0)) after every other draw of the form, so a
// seed's kills, joins and broker faults stay. A member that comes back is
// not removed from the group by the harness (expire).
func generateClusterRejoin(seed uint64, c *ClusterSpec) []Fault {
	if !c.Static {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0xc1e0))
	var fs []Fault
	for _, f := range c.Faults {
		if f.Kind != FaultMemberKill {
			continue
		}
		if rng.IntN(2) == 0 {
			fs = append(fs, Fault{Kind: FaultMemberRejoin, Subtask: f.Subtask, At: f.At, DelayMS: 10 + rng.Int64N(591)})
		}
	}
	return fs
}

// rejoinOf returns the rejoin drawn for member i's kill, if any.
func (cr *clusterRun) rejoinOf(i int) *Fault {
	for j := range cr.c.Faults {
		if f := &cr.c.Faults[j]; f.Kind == FaultMemberRejoin && f.Subtask == i {
			return f
		}
	}
	return nil
}

// rejoin starts member i again under its own Config after f's delay,
// unless the run is over by then.
func (cr *clusterRun) rejoin(i int, f *Fault) {
	t := time.NewTimer(time.Duration(f.DelayMS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-cr.ctx.Done():
		return
	case <-t.C:
	}
	cr.mu.Lock()
	f.Struck = cr.mu.members != nil
	cr.mu.Unlock()
	cr.start(cr.ctx, i)
}

// ownership is the check of C2 on the members' task events (Config.OnTask):
// which live member instances run each task. A killed instance is as dead
// (cut off the broker; what it still does in this process is fenced, and
// S16 checks its effect): its tasks count as stopped at the kill.
type ownership struct {
	// running: the instances whose TaskStarted for the task has not been
	// followed by their TaskStopped, TaskFailed or TaskFinished. Guarded
	// by clusterRun.mu.
	running map[string][]*clusterMember
	// overlaps: the instances another instance started the task beside,
	// by task; each must stop it with SessionLost (or be killed).
	overlaps map[string][]overlap
	// fenced: the runs of the task that failed because a newer start of
	// it claimed its checkpoints (checkpoint.ErrFenced), by task. Another
	// member started it while this one ran it, which only a lost session
	// allows: by the end of the run the fenced instance, or an instance
	// whose start claimed one of the epochs after the fenced run's (the
	// fencing start may be the one of a process the group had removed),
	// must have stopped the task with SessionLost or been killed. The
	// overlap itself may be too short for overlaps to see (the fence
	// strikes at the old run's next checkpoint).
	fenced map[string][]fencedRun
	// claims: the instance whose start of the task claimed each epoch of
	// its checkpoint location (TaskEvent.Epoch), by task.
	claims map[string]map[int64]*clusterMember
	// lost: the instances that stopped the task with SessionLost, by task.
	lost map[string][]*clusterMember
	fail *Failure
}

// fencedRun is a run of a task in instance m, at epoch own of the task's
// checkpoint location, that failed because the newer epoch by had been
// claimed (the newest at its check: the epochs between were claimed too).
type fencedRun struct {
	m       *clusterMember
	own, by int64
}

// fencedEpochs finds the two epochs in a checkpoint.ErrFenced message
// (checkpoint.Fence.Check): the newest claim's and the fenced writer's.
var fencedEpochs = regexp.MustCompile(`is owned by epoch (\d+), this writer's is (\d+)`)

// overlap is a task started in instance by while instance old ran it;
// finished once old's run of it finished, stopped once old stopped it
// without SessionLost. One of the two must have lost its session, and say
// so at its stop of the task: old (the group gave the task away), or by
// (a process the group had removed restarted its failed run, M4, before
// it learned: cluster's "Not guaranteed"). Judged once both have stopped,
// or at the end.
type overlap struct {
	old, by           *clusterMember
	finished, stopped bool
}

// onTask records ev of instance m (called by m's Run, on its goroutines).
func (cr *clusterRun) onTask(m *clusterMember, i int, ev cluster.TaskEvent) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	o := &cr.own
	if o.running == nil {
		o.running, o.overlaps, o.fenced = map[string][]*clusterMember{}, map[string][]overlap{}, map[string][]fencedRun{}
		o.claims, o.lost = map[string]map[int64]*clusterMember{}, map[string][]*clusterMember{}
	}
	if m.killed {
		return
	}
	switch ev.Kind {
	case cluster.TaskStarted:
		for _, prev := range o.running[ev.Task] {
			if prev != m && !prev.killed {
				o.overlaps[ev.Task] = append(o.overlaps[ev.Task], overlap{old: prev, by: m})
			}
		}
		if !slices.Contains(o.running[ev.Task], m) {
			o.running[ev.Task] = append(o.running[ev.Task], m)
		}
		if ev.Epoch != 0 {
			if o.claims[ev.Task] == nil {
				o.claims[ev.Task] = map[int64]*clusterMember{}
			}
			o.claims[ev.Task][ev.Epoch] = m
		}
	case cluster.TaskRevoked:
		// Reported once the member has handed the task over: its run
		// must have ended (C2 at the revoke, not only at a later start
		// elsewhere: a revoked run that finishes before its new owner
		// starts overlaps no start).
		if slices.Contains(o.running[ev.Task], m) && o.fail == nil {
			o.fail = &Failure{Invariant: InvClusterOwner, Detail: fmt.Sprintf("the group revoked task %s from member m%d, "+
				"and m%d still ran it when its revoke was done", ev.Task, i, i)}
		}
	case cluster.TaskStopped, cluster.TaskFailed, cluster.TaskFinished:
		o.running[ev.Task] = slices.DeleteFunc(o.running[ev.Task], func(x *clusterMember) bool { return x == m })
		if ev.Kind == cluster.TaskFailed {
			if strings.Contains(ev.Err, checkpoint.ErrFenced.Error()) {
				fr := fencedRun{m: m}
				if g := fencedEpochs.FindStringSubmatch(ev.Err); g != nil {
					fr.by, _ = strconv.ParseInt(g[1], 10, 64)
					fr.own, _ = strconv.ParseInt(g[2], 10, 64)
				}
				o.fenced[ev.Task] = append(o.fenced[ev.Task], fr)
			}
			return // started again while m owns it (M4): judged at its stop
		}
		if ev.Kind == cluster.TaskStopped && ev.SessionLost && !slices.Contains(o.lost[ev.Task], m) {
			// m had lost its session: its own fenced runs are excused,
			// and its starts may be the ones that fenced the others' (a
			// removed process restarting its failed run before it
			// learned): those are too (judged at the end).
			o.lost[ev.Task] = append(o.lost[ev.Task], m)
		}
		if ev.Kind == cluster.TaskFinished {
			// m may not know yet that it lost its session: judged at
			// its stop of the task.
			for j := range o.overlaps[ev.Task] {
				if x := &o.overlaps[ev.Task][j]; x.old == m {
					x.finished = true
				}
			}
			return
		}
		xs := o.overlaps[ev.Task][:0]
		for _, x := range o.overlaps[ev.Task] {
			switch {
			case ev.SessionLost && (x.old == m || x.by == m):
				continue // one of the two had lost its session
			case x.old == m:
				x.stopped = true
			case x.by == m && x.stopped && o.fail == nil:
				o.fail = x.failure(ev.Task, "")
			}
			if x.by == m && x.stopped {
				continue
			}
			xs = append(xs, x)
		}
		o.overlaps[ev.Task] = xs
	}
}

// ownerFailure is C2's verdict once every member has stopped: an overlap
// or a fenced run that no stop with SessionLost excused, its old instance
// not killed, fails.
func (cr *clusterRun) ownerFailure() *Failure {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	o := &cr.own
	if o.fail != nil {
		return o.fail
	}
	for task, frs := range o.fenced {
		for _, fr := range frs {
			if f := o.fencedFailure(task, fr); f != nil {
				return f
			}
		}
	}
	for task, xs := range o.overlaps {
		for _, x := range xs {
			if !x.old.killed {
				return x.failure(task, " (by the end of the run)")
			}
		}
	}
	return nil
}

// fencedFailure is C2's verdict on fenced run fr of task: excused when
// its instance, or one whose start claimed an epoch after fr's up to the
// one that fenced it, lost its session (stopped the task with
// SessionLost) or was killed. An epoch in that range that no reported
// start claimed (a claim whose start failed before it was reported)
// leaves the claimant unknown: any instance's lost session excuses fr
// then. Called with cr.mu held.
func (o *ownership) fencedFailure(task string, fr fencedRun) *Failure {
	excused := func(x *clusterMember) bool { return x.killed || slices.Contains(o.lost[task], x) }
	if excused(fr.m) {
		return nil
	}
	known := fr.by > fr.own
	for e := fr.own + 1; known && e <= fr.by; e++ {
		x := o.claims[task][e]
		if x == nil {
			known = false
			break
		}
		if excused(x) {
			return nil
		}
	}
	if !known && len(o.lost[task]) > 0 {
		return nil
	}
	by := "a newer start of it"
	if x := o.claims[task][fr.by]; x != nil {
		by = fmt.Sprintf("member m%d's start of it (epoch %d; the run's was %d)", x.index, fr.by, fr.own)
	}
	return &Failure{Invariant: InvClusterOwner, Detail: fmt.Sprintf("task %s failed in member m%d because %s claimed its checkpoints, "+
		"and neither m%d nor a member whose start claimed a newer epoch lost its session or was killed", task, fr.m.index, by, fr.m.index)}
}

// failure is C2's verdict on an overlap neither side excused.
func (x overlap) failure(task, when string) *Failure {
	how := "never reported stopping it"
	switch {
	case x.finished && x.stopped:
		how = "finished it, then stopped it"
	case x.finished:
		how = "finished it and never reported stopping it"
	case x.stopped:
		how = "then stopped it"
	}
	return &Failure{Invariant: InvClusterOwner, Detail: fmt.Sprintf("task %s started in member m%d while member m%d ran it; m%d %s, "+
		"and neither reported a lost session at its stop of it%s", task, x.by.index, x.old.index, x.old.index, how, when)}
}
