package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/cluster"
)

// InvClusterOwner is the clustered form's check of cluster C2, part of
// S16: no task is started by a live member while another live member
// runs it, unless that member had lost its group session, as the members'
// task events (Config.OnTask) tell: a task that another member started
// before this one stopped it must stop here with SessionLost (no
// hand-over checkpoint, a hand-over past the rebalance time-out, or a
// session the member learned it had lost). A member cannot know it was
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
	// fenced: the instances whose run of the task failed because another
	// start of it claimed its checkpoints (checkpoint.ErrFenced), by
	// task: another member started it while this one ran it, which only
	// a lost session allows, so each must stop it with SessionLost (or be
	// killed). The overlap itself may be too short for overlaps to see
	// (the fence strikes at the old run's next checkpoint).
	fenced map[string][]*clusterMember
	fail   *Failure
}

// overlap is a task started in instance by while instance old ran it;
// finished once old's run of it finished (judged at old's stop of it).
type overlap struct {
	old, by  *clusterMember
	finished bool
}

// onTask records ev of instance m (called by m's Run, on its goroutines).
func (cr *clusterRun) onTask(m *clusterMember, i int, ev cluster.TaskEvent) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	o := &cr.own
	if o.running == nil {
		o.running, o.overlaps, o.fenced = map[string][]*clusterMember{}, map[string][]overlap{}, map[string][]*clusterMember{}
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
			if strings.Contains(ev.Err, checkpoint.ErrFenced.Error()) && !slices.Contains(o.fenced[ev.Task], m) {
				o.fenced[ev.Task] = append(o.fenced[ev.Task], m)
			}
			return // started again while m owns it (M4): judged at its stop
		}
		if ev.Kind == cluster.TaskStopped && slices.Contains(o.fenced[ev.Task], m) {
			o.fenced[ev.Task] = slices.DeleteFunc(o.fenced[ev.Task], func(x *clusterMember) bool { return x == m })
			if !ev.SessionLost && o.fail == nil {
				o.fail = &Failure{Invariant: InvClusterOwner, Detail: fmt.Sprintf("task %s failed in member m%d because another start of it claimed its checkpoints, "+
					"and m%d then stopped it without having lost its session", ev.Task, i, i)}
			}
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
		o.overlaps[ev.Task] = slices.DeleteFunc(o.overlaps[ev.Task], func(x overlap) bool {
			if x.old != m {
				return false
			}
			if !ev.SessionLost && o.fail == nil {
				how := "then stopped it"
				if x.finished {
					how = "finished it, then stopped it"
				}
				o.fail = &Failure{Invariant: InvClusterOwner, Detail: fmt.Sprintf("task %s started in member m%d while member m%d ran it, "+
					"and m%d %s without having lost its session", ev.Task, x.by.index, i, i, how)}
			}
			return true
		})
	}
}

// ownerFailure is C2's verdict once every member has stopped: an overlap
// whose old instance never stopped the task (and was not killed) fails
// too.
func (cr *clusterRun) ownerFailure() *Failure {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	o := &cr.own
	if o.fail != nil {
		return o.fail
	}
	for task, ms := range o.fenced {
		for _, m := range ms {
			if !m.killed {
				return &Failure{Invariant: InvClusterOwner, Detail: fmt.Sprintf("task %s failed in member m%d because another start of it claimed its checkpoints, "+
					"and m%d never reported stopping it with its session lost", task, m.index, m.index)}
			}
		}
	}
	for task, xs := range o.overlaps {
		for _, x := range xs {
			if !x.old.killed {
				how := "never reported stopping it"
				if x.finished {
					how = "finished it and never reported that it had lost its session"
				}
				return &Failure{Invariant: InvClusterOwner, Detail: fmt.Sprintf("task %s started in member m%d while member m%d ran it, "+
					"and m%d %s", task, x.by.index, x.old.index, x.old.index, how)}
			}
		}
	}
	return nil
}
