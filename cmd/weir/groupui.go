package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/dashboard"
	"github.com/weirproject/weir/runtime"
)

// groupUI is the dashboard's view (a dashboard.Source) of the tasks one
// process of a clustered job runs: each task is a job of its own, shown as
// one job whose operators are named "TASK/OPERATOR" (keyed-0/window). A
// task shows from its start in this process until it is handed over; the
// task events (cluster.TaskEvent, from any goroutine) keep the set.
type groupUI struct {
	group, member string
	mu            sync.Mutex
	jobs          map[string]*runtime.Job // by task
	describeGroup func(context.Context) ([]cluster.GroupMember, error)
	done          chan struct{} // closed when the process leaves the job
}

func newGroupUI(group, member string) *groupUI {
	return &groupUI{group: group, member: member, jobs: map[string]*runtime.Job{}, done: make(chan struct{})}
}

// onGroup keeps the group's description (cluster.Config.OnGroup).
func (g *groupUI) onGroup(describe func(context.Context) ([]cluster.GroupMember, error)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.describeGroup = describe
}

// describe is the group page's view (dashboard.Options.Group): the group
// as its brokers describe it, each member with its tasks and the URL of
// its dashboard.
func (g *groupUI) describe(ctx context.Context) (dashboard.Group, error) {
	g.mu.Lock()
	describe := g.describeGroup
	g.mu.Unlock()
	if describe == nil {
		return dashboard.Group{}, fmt.Errorf("weir run: member %s has not joined group %s yet", g.member, g.group)
	}
	ms, err := describe(ctx)
	if err != nil {
		return dashboard.Group{}, err
	}
	out := dashboard.Group{Group: g.group, Self: g.member, Members: make([]dashboard.GroupMember, 0, len(ms))}
	for _, m := range ms {
		out.Members = append(out.Members, dashboard.GroupMember{Member: m.Member, Host: m.Host, URL: m.URL, Tasks: m.Tasks})
	}
	return out, nil
}

// advertisedURL is the dashboard URL a member shows the others for the
// address it listens on: an unspecified host (0.0.0.0, ::) becomes this
// machine's host name.
func advertisedURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if h, err := os.Hostname(); err == nil && h != "" {
				host = h
			}
		}
		addr = net.JoinHostPort(host, port)
	}
	return "http://" + addr + "/"
}

func (g *groupUI) onTask(ev cluster.TaskEvent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch ev.Kind {
	case cluster.TaskStarted:
		if ev.Job != nil {
			g.jobs[ev.Task] = ev.Job
		}
	case cluster.TaskStopped:
		delete(g.jobs, ev.Task)
	}
}

// tasks returns the tasks shown now, by name.
func (g *groupUI) tasks() ([]string, map[string]*runtime.Job) {
	g.mu.Lock()
	defer g.mu.Unlock()
	jobs := make(map[string]*runtime.Job, len(g.jobs))
	names := make([]string, 0, len(g.jobs))
	for t, j := range g.jobs {
		jobs[t] = j
		names = append(names, t)
	}
	slices.Sort(names)
	return names, jobs
}

func (g *groupUI) Snapshot() []runtime.Metric {
	names, jobs := g.tasks()
	var out []runtime.Metric
	for _, t := range names {
		for _, m := range jobs[t].Metrics().Snapshot() {
			m.Operator = t + "/" + m.Operator
			out = append(out, m)
		}
	}
	return out
}

func (g *groupUI) Notes() []runtime.Note {
	names, jobs := g.tasks()
	var out []runtime.Note
	for _, t := range names {
		for _, n := range jobs[t].Metrics().Notes() {
			n.Operator = t + "/" + n.Operator
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(a, b runtime.Note) int { return int(a.AtMs - b.AtMs) })
	for i := range out {
		out[i].Seq = int64(i + 1)
	}
	return out
}

func (g *groupUI) Topology() runtime.Topology {
	names, jobs := g.tasks()
	var top runtime.Topology
	for _, t := range names {
		jt := jobs[t].Topology()
		top.MaxParallelism = max(top.MaxParallelism, jt.MaxParallelism)
		for _, op := range jt.Operators {
			op.Name, op.UID, op.Task = t+"/"+op.Name, t+"/"+op.UID, t+"/"+op.Task
			ins := make([]runtime.EdgeInfo, len(op.Inputs))
			for i, e := range op.Inputs {
				e.From, e.FromUID = t+"/"+e.From, t+"/"+e.FromUID
				ins[i] = e
			}
			op.Inputs = ins
			top.Operators = append(top.Operators, op)
		}
	}
	return top
}

func (g *groupUI) Checkpoints() []runtime.CheckpointStats {
	names, jobs := g.tasks()
	var out []runtime.CheckpointStats
	for _, t := range names {
		out = append(out, jobs[t].Checkpoints()...)
	}
	slices.SortStableFunc(out, func(a, b runtime.CheckpointStats) int { return int(a.StartedMs - b.StartedMs) })
	return out
}

func (g *groupUI) Done() <-chan struct{} { return g.done }

// noAgentStatus is the dashboard's agent status in group mode: none. The
// agent registry of a process names operators without their task, and the
// keyed tasks' agent operators share a name and subtask 0, so their
// answers cannot be told apart; the agent gauges still show per task.
func noAgentStatus(context.Context, []string) []agent.SubtaskStatus { return nil }
