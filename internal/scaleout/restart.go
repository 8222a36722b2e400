package scaleout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/weirproject/weir/cluster"
)

// RestartResult is one restart run (Config.RestartMember): Processes
// workers run the kill run's job, one of them (running tasks of both
// stages) is stopped with Signal once Config.KillAfter of the input has
// reached the exchange topic, and is started again with the same member
// name Config.RestartDelay after it has exited, as an orchestrator
// restarts a container; the job then runs to its end. Once with static members (cluster M6),
// once with dynamic ones.
type RestartResult struct {
	// Static tells whether the workers were static members of the group
	// (group.instance.id = member name) or dynamic ones.
	Static bool `json:"static"`
	// Signal stopped the restarted worker: "TERM" (its tasks are
	// checkpointed first, as in a rolling restart) or "KILL".
	Signal                string  `json:"signal"`
	Processes             int     `json:"processes"`
	SessionTimeoutSeconds float64 `json:"sessionTimeoutSeconds"`
	// Tasks is how many unfinished tasks the restarted worker ran at the
	// signal; TasksBack how many of them it ran again after its restart.
	Tasks     int `json:"tasks"`
	TasksBack int `json:"tasksBack"`
	// TasksMoved counts the assignment changes the other workers saw
	// from the signal to the job's end: a task started in one of them
	// (given to it) or stopped in one of them (taken from it, with a
	// hand-over checkpoint). A task that finished, and a restart after a
	// failure in the same worker, are not changes.
	TasksMoved int `json:"tasksMoved"`
	// PauseSeconds runs from the signal to the moment every one of the
	// restarted worker's tasks ran again, in any worker.
	PauseSeconds float64 `json:"pauseSeconds"`
	// TaskDownSeconds sums, over every task, the time from the signal to
	// the job's end during which it ran nowhere: a task moved away and
	// back (a dynamic restart) is down twice.
	TaskDownSeconds float64 `json:"taskDownSeconds"`
	// RestartSeconds runs from the signal to the restarted process's
	// start (its predecessor's exit, then Config.RestartDelay).
	RestartSeconds      float64 `json:"restartSeconds"`
	RestartDelaySeconds float64 `json:"restartDelaySeconds"`
	// The committed output against the single-process run's.
	LostOutputs               int  `json:"lostOutputs"`
	DuplicateOutputs          int  `json:"duplicateOutputs"`
	ResultsMatchSingleProcess bool `json:"resultsMatchSingleProcess"`
}

// OK reports whether the run kept exactly-once.
func (r RestartResult) OK() bool {
	return r.LostOutputs == 0 && r.DuplicateOutputs == 0 && r.ResultsMatchSingleProcess
}

// restartRun runs one restart run of spec s (its Static set or not) and
// measures it from the workers' task events; the caller compares the
// output.
func restartRun(ctx context.Context, cfg Config, s WorkerSpec, sig syscall.Signal, logf func(string, ...any)) (RestartResult, error) {
	res := RestartResult{Static: s.Static, Signal: signalName(sig), Processes: cfg.Processes, SessionTimeoutSeconds: s.SessionTimeout.Seconds(),
		RestartDelaySeconds: cfg.RestartDelay.Seconds()}
	exchange := cluster.Config{Group: s.Group}.ExchangeTopic()
	if err := createTopic(ctx, s.Brokers, exchange, s.KeyedTasks); err != nil {
		return res, err
	}
	g := newGang(ctx, cfg, s)
	for range cfg.Processes {
		g.start()
	}
	deadline := time.Now().Add(cfg.Timeout)
	if err := g.waitProgress(ctx, exchange, deadline, logf, nil); err != nil {
		return res, err
	}
	victim, tasks := g.busiest()
	if victim == nil {
		g.killAll()
		return res, fmt.Errorf("scaleout: no worker owned an unfinished task to restart (ended %v)", g.errs())
	}
	sort.Strings(tasks)
	res.Tasks = len(tasks)
	at := time.Now()
	victim.cmd.Process.Signal(sig)
	select {
	case <-victim.done:
	case <-time.After(time.Until(deadline)):
		g.killAll()
		return res, fmt.Errorf("scaleout: worker %s did not exit after SIG%s", victim.name, res.Signal)
	}
	if sig == syscall.SIGTERM && victim.err != nil {
		g.killAll()
		return res, fmt.Errorf("scaleout: worker %s after SIGTERM: %w", victim.name, victim.err)
	}
	select {
	case <-time.After(cfg.RestartDelay):
	case <-ctx.Done():
		g.killAll()
		return res, ctx.Err()
	}
	restartAt := time.Now()
	g.startNamed(victim.name)
	res.RestartSeconds = restartAt.Sub(at).Seconds()
	logf("SIG%s to %s owning %v; started again after %.2fs", res.Signal, victim.name, tasks, res.RestartSeconds)
	if err := g.waitAll(time.Until(deadline)); err != nil {
		return res, err
	}
	g.mu.Lock()
	evs := append([]cluster.TaskEvent(nil), g.evs...)
	g.mu.Unlock()
	m := measureRestart(evs, victim.name, tasks, at, restartAt, sig == syscall.SIGKILL)
	res.TasksBack, res.TasksMoved, res.PauseSeconds, res.TaskDownSeconds = m.back, m.moved, m.pause.Seconds(), m.down.Seconds()
	if m.pause < 0 {
		return res, fmt.Errorf("scaleout: the restarted worker's tasks %v did not all run again", tasks)
	}
	return res, nil
}

func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "KILL"
	}
	return "TERM"
}

type restartMeasure struct {
	back, moved int
	pause, down time.Duration // pause < 0: some task never ran again
}

// measureRestart reads a restart run's task events: victim, running tasks
// at the signal (at), was signalled (killed: its tasks stopped at at
// without events) and started again at restartAt.
func measureRestart(evs []cluster.TaskEvent, victim string, tasks []string, at, restartAt time.Time, killed bool) restartMeasure {
	evs = slices.Clone(evs)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time < evs[j].Time })
	type mt struct{ member, task string }
	last := map[mt]cluster.TaskEventKind{} // each member's last event of each task
	running := map[string]string{}         // task -> member
	downSince := map[string]int64{}
	var m restartMeasure
	firstRun := map[string]int64{} // victim's task -> its first start after at
	back := map[string]bool{}
	apply := func(ev cluster.TaskEvent, after bool) {
		k := mt{ev.Member, ev.Task}
		prev := last[k]
		last[k] = ev.Kind
		other := ev.Member != victim
		switch ev.Kind {
		case cluster.TaskStarted, cluster.TaskFinished:
			if since, ok := downSince[ev.Task]; ok && after {
				m.down += time.Duration(ev.Time-since) * time.Millisecond
				delete(downSince, ev.Task)
			}
			if after {
				if _, ok := firstRun[ev.Task]; !ok {
					firstRun[ev.Task] = ev.Time
				}
			}
			if ev.Kind == cluster.TaskFinished {
				delete(running, ev.Task)
				return
			}
			running[ev.Task] = ev.Member
			if after && other && prev != cluster.TaskFailed {
				m.moved++
			}
			if after && !other && ev.Time >= restartAt.UnixMilli() {
				back[ev.Task] = true
			}
		case cluster.TaskStopped, cluster.TaskFailed:
			if prev == cluster.TaskFinished {
				return
			}
			if running[ev.Task] == ev.Member {
				delete(running, ev.Task)
				if after {
					downSince[ev.Task] = ev.Time
				}
			}
			if after && other && ev.Kind == cluster.TaskStopped {
				m.moved++
			}
		}
	}
	i := 0
	for ; i < len(evs) && evs[i].Time < at.UnixMilli(); i++ {
		apply(evs[i], false)
	}
	if killed {
		for _, t := range tasks {
			if running[t] == victim {
				delete(running, t)
				downSince[t] = at.UnixMilli()
			}
		}
	}
	for ; i < len(evs); i++ {
		apply(evs[i], true)
	}
	m.pause = -1
	var latest int64
	for _, t := range tasks {
		ft, ok := firstRun[t]
		if !ok {
			return m
		}
		latest = max(latest, ft)
		if back[t] {
			m.back++
		}
	}
	m.pause = max(0, time.Duration(latest-at.UnixMilli())*time.Millisecond)
	return m
}

// runRestarts runs the restart runs of cfg (static, then dynamic) on the
// experiment's broker, each compared with the single-process run's totals
// by check.
func runRestarts(ctx context.Context, cfg Config, spec func(group string) WorkerSpec,
	check func(WorkerSpec) (int, int, bool, error), logf func(string, ...any)) ([]RestartResult, error) {
	sig := syscall.SIGTERM
	if cfg.RestartSignal == "KILL" {
		sig = syscall.SIGKILL
	}
	var out []RestartResult
	for _, static := range []bool{true, false} {
		group := "restart-dynamic"
		if static {
			group = "restart-static"
		}
		s := spec(group)
		s.Pace, s.Static, s.SessionTimeout = cfg.Pace, static, cfg.RestartSessionTimeout
		if err := createTopic(ctx, s.Brokers, s.OutTopic, 2); err != nil {
			return out, err
		}
		r, err := restartRun(ctx, cfg, s, sig, logf)
		if err != nil {
			return out, fmt.Errorf("scaleout: restart run (static %v): %w", static, err)
		}
		if r.LostOutputs, r.DuplicateOutputs, r.ResultsMatchSingleProcess, err = check(s); err != nil {
			return out, err
		}
		logf("restart run, static %v: %d of %d tasks back, %d moved at the others, pause %.2fs, tasks down %.2fs in all",
			static, r.TasksBack, r.Tasks, r.TasksMoved, r.PauseSeconds, r.TaskDownSeconds)
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("scaleout: no restart run")
	}
	return out, nil
}
