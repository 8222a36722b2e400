package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/runtime"
)

// finishedFile marks a task whose input ended and whose output is
// committed; a process that is given such a task does not run it again.
const finishedFile = "FINISHED"

// taskSpec builds a task's job: a fresh environment, restored from the
// task's latest checkpoint if it has one (returned, "" if none).
type taskSpec struct {
	id    string
	build func() (*weir.Environment, string, error)
}

// taskRunner runs one task in this process from the moment the process is
// given the task until it is taken away (stop). A task that fails is
// started again from its latest checkpoint after Config.RestartDelay.
//
// Goroutines: loop (started by startTask) owns the job; stop runs on the
// group's callback goroutine or the shutdown path and waits for loop to
// end.
type taskRunner struct {
	spec   taskSpec
	m      *member
	cancel context.CancelFunc
	done   chan struct{}
	mu     struct {
		sync.Mutex
		job *runtime.Job
	}
}

func (t *taskRunner) loop(ctx context.Context) {
	defer close(t.done)
	for ctx.Err() == nil {
		if done, _ := (checkpoint.Storage{}).HasMarker(taskDir(t.m.cfg, t.spec.id), finishedFile); done {
			t.m.event(TaskEvent{Task: t.spec.id, Kind: TaskFinished})
			return
		}
		err := t.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil || mutant.On(mutant.ClusterFailedTaskFinished) {
			if err := t.markFinished(); err != nil {
				t.m.cfg.Logger.Error("cluster: mark task finished", "task", t.spec.id, "err", err)
			}
			t.m.event(TaskEvent{Task: t.spec.id, Kind: TaskFinished})
			return
		}
		t.m.cfg.Logger.Warn("cluster: task failed; restarting from its latest checkpoint", "task", t.spec.id, "err", err)
		t.m.event(TaskEvent{Task: t.spec.id, Kind: TaskFailed, Err: err.Error()})
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.m.cfg.RestartDelay):
		}
	}
}

// runOnce builds, starts and waits for the task's job.
func (t *taskRunner) runOnce(ctx context.Context) error {
	env, restored, err := t.spec.build()
	if err != nil {
		return err
	}
	job, err := env.Start(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.mu.job = job
	t.mu.Unlock()
	t.m.event(TaskEvent{Task: t.spec.id, Kind: TaskStarted, Restored: restored, Job: job, Epoch: fenceEpoch(env)})
	err = job.Wait()
	t.mu.Lock()
	t.mu.job = nil
	t.mu.Unlock()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// fenceEpoch returns the epoch of the claim on its checkpoint location
// that env's task made (taskEnv), 0 if it made none.
func fenceEpoch(env *weir.Environment) int64 {
	if f := env.Config().Checkpoint.Storage.Fence; f != nil {
		return f.Epoch()
	}
	return 0
}

func (t *taskRunner) markFinished() error {
	return checkpoint.Storage{}.PutMarker(taskDir(t.m.cfg, t.spec.id), finishedFile)
}

// stop takes a stop's checkpoint of the running job (bounded by
// Config.RevokeCheckpointTimeout; none with checkpoint false), then stops
// the job and waits until it has ended. revoked is when the group's revoke
// began (zero if this is no revoke); the TaskStopped event has SessionLost
// when there was no checkpoint (a lost session) or the stop ended after
// the rebalance timeout.
func (t *taskRunner) stop(checkpoint bool, revoked time.Time) {
	t.mu.Lock()
	job := t.mu.job
	t.mu.Unlock()
	if job != nil && checkpoint && t.m.cfg.RevokeCheckpointTimeout > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), t.m.cfg.RevokeCheckpointTimeout)
		// A stop's checkpoint: nothing is read after it, so the next owner
		// restores exactly what the outputs hold (runtime.Job.StopWithCheckpoint).
		if _, _, err := job.StopWithCheckpoint(ctx); err != nil && !errors.Is(err, runtime.ErrJobStopped) {
			t.m.cfg.Logger.Info("cluster: no checkpoint at hand-over; the next owner restores an older one", "task", t.spec.id, "err", err)
		}
		cancel()
	}
	t.cancel()
	<-t.done
	late := !revoked.IsZero() && time.Since(revoked) >= t.m.cfg.RebalanceTimeout
	t.m.event(TaskEvent{Task: t.spec.id, Kind: TaskStopped, SessionLost: !checkpoint || late})
}
