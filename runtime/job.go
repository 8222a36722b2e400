package runtime

// The job API: Start and Execute, and Job, the handle on a running job
// (its attempts and restarts are in restart.go).

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/weirproject/weir/checkpoint"
)

// ErrEmptyJob is returned by Execute for a graph without operators.
var ErrEmptyJob = errors.New("runtime: the job has no operators; add a source and a sink")

// Execute runs the graph until every source has ended and all data has
// drained, or until ctx is cancelled (then it returns ctx's error), or until
// an operator fails (then it returns an *OperatorError naming the operator,
// subtask and phase and wrapping its error, after cancelling the rest).
func Execute(ctx context.Context, g *Graph, cfg Config) error {
	j, err := Start(ctx, g, cfg)
	if err != nil {
		return err
	}
	return j.Wait()
}

// Job is a running job: its current attempt and, with a RestartStrategy,
// the ones that replace it after a failure (restart.go).
type Job struct {
	g      *Graph
	cfg    Config // with defaults
	cancel context.CancelCauseFunc
	done   chan struct{}
	err    error
	// restored is what the first attempt restored (Restored).
	restored RestoredFrom
	restarts *Counter
	mu       struct {
		sync.Mutex
		// b is the builder of the current attempt (written by the
		// supervising goroutine when it starts another).
		b *builder
		// restarting is the failure the job is restarting after, from
		// the failure until the next attempt has started (Restarting).
		restarting error
	}
}

// Restarting returns the failure the job is restarting after while it is
// between attempts (the restart strategy's pause, then the next attempt's
// restore), and nil otherwise. A readiness probe answers "not ready"
// meanwhile.
func (j *Job) Restarting() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.restarting
}

// current returns the builder of the current attempt.
func (j *Job) current() *builder {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.mu.b
}

// Start builds the graph's tasks (restoring state if configured) and starts
// them; the job runs until Wait returns. After a task fails, the job is
// started again as Config.Restart says, from its newest checkpoint.
//
// Start first checks cfg and every operator's parallelism (see
// ValidateConfig), and fails with one error naming each bad field, its
// value and what is accepted, before any work is done.
func Start(ctx context.Context, g *Graph, cfg Config) (*Job, error) {
	if len(g.nodes) == 0 {
		return nil, ErrEmptyJob
	}
	if err := cfg.validate(g); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(g)
	ctx, cancel := context.WithCancelCause(ctx)
	j := &Job{g: g, cfg: cfg, cancel: cancel, done: make(chan struct{}),
		restarts: cfg.Metrics.counter("job", 0, "restarts")} // MetricRestarts
	a, err := j.startAttempt(ctx, cfg)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	j.mu.b = a.b
	j.restored = a.b.restored
	go j.supervise(ctx, a)
	return j, nil
}

// attempt is one run of the job's tasks; done is closed when every task
// has ended and a checkpoint being persisted is finished, err is then the
// first task's error.
type attempt struct {
	b    *builder
	done chan struct{}
	err  error
}

// startAttempt builds the tasks of the graph with cfg and starts them,
// under a context of their own (a failing task cancels its attempt, not
// the job).
func (j *Job) startAttempt(parent context.Context, cfg Config) (*attempt, error) {
	ctx, cancel := context.WithCancelCause(parent)
	b, err := newBuilder(j.g, cfg, ctx.Done())
	if err != nil {
		cancel(nil)
		return nil, err
	}
	tasks, err := b.build()
	if err != nil {
		cancel(nil)
		return nil, err
	}
	a := &attempt{b: b, done: make(chan struct{})}
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		b.coord.run(ctx)
	}()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := t.run(ctx)
			if err != nil {
				once.Do(func() {
					first = err
					cancel(err)
				})
			}
		}()
	}
	go func() {
		wg.Wait()
		if first != nil && ctx.Err() != nil && errors.Is(first, context.Canceled) {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				first = cause
			}
		}
		a.err = first
		cancel(nil)
		// A checkpoint being persisted finishes before the attempt ends,
		// so that a restart sees it (or its absence) for certain.
		<-coordDone
		close(a.done)
	}()
	return a, nil
}

// Wait waits for the job to end and returns its error.
func (j *Job) Wait() error {
	<-j.done
	return j.err
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Cancel stops the job; Wait then returns context.Canceled.
func (j *Job) Cancel() { j.cancel(context.Canceled) }

// TriggerCheckpoint takes a checkpoint now (into CheckpointConfig.Dir) and
// returns its id and directory once it is complete. On a job that has
// ended it returns ErrJobStopped at once.
// On a job without CheckpointConfig.Dir it returns ErrNoCheckpointDir at
// once, before any task snapshots anything.
func (j *Job) TriggerCheckpoint(ctx context.Context) (int64, string, error) {
	return j.checkpointNow(ctx, false)
}

// StopWithCheckpoint is TriggerCheckpoint for a stop, as StopWithSavepoint
// is TriggerSavepoint's: nothing is read, and no processing-time callback
// runs, after the checkpoint's barrier, so that the next owner of the job's
// work restores exactly what the outputs hold (a group member handing its
// tasks over). The job stays idle until cancelled; if the checkpoint does
// not complete, it reads on.
func (j *Job) StopWithCheckpoint(ctx context.Context) (int64, string, error) {
	return j.checkpointNow(ctx, true)
}

func (j *Job) checkpointNow(ctx context.Context, stop bool) (int64, string, error) {
	if j.cfg.Checkpoint.Dir == "" {
		return 0, "", ErrNoCheckpointDir
	}
	return j.current().coord.trigger(ctx, &cpRequest{kind: checkpoint.KindCheckpoint, stop: stop})
}

// ErrNoCheckpointDir is what TriggerCheckpoint returns on a job configured
// without CheckpointConfig.Dir.
var ErrNoCheckpointDir = errors.New("runtime: checkpoint has no directory; set CheckpointConfig.Dir")

// TriggerSavepoint takes a savepoint into dir (a directory path or a URL,
// see CheckpointConfig.Dir; it must not hold one) and returns its id once
// it is complete. Savepoints work whether or not
// periodic checkpoints are configured. On a job that has ended it returns
// ErrJobStopped at once.
func (j *Job) TriggerSavepoint(ctx context.Context, dir string) (int64, error) {
	return j.savepoint(ctx, dir, false)
}

// savepoint takes a savepoint into dir, a stop's if stop is set.
func (j *Job) savepoint(ctx context.Context, dir string, stop bool) (int64, error) {
	b := j.current()
	if b.cfg.Checkpoint.Storage.Store == nil {
		if err := checkpoint.CheckLocation(dir); err != nil {
			return 0, fmt.Errorf("runtime: savepoint: %w", err)
		}
	}
	id, _, err := b.coord.trigger(ctx, &cpRequest{kind: checkpoint.KindSavepoint, dir: dir, stop: stop})
	return id, err
}

// StopWithSavepoint takes a savepoint into dir, as TriggerSavepoint does,
// for a stop: each source subtask reads nothing after it has sent the
// savepoint's barrier, and each subtask stops its processing-time
// callbacks (timers, periodic watermarks, buffer flushes) once the barrier
// has passed it, so that no record or watermark follows the savepoint
// into the outputs. An at-least-once output then holds exactly what the
// savepoint covers, and a job resumed from it writes nothing twice
// (Flink's stop-with-savepoint, without draining). Records an operator
// emits from a mailbox letter after the barrier (the answers of
// asynchronous calls in flight) still go out, at least once as before.
//
// The job keeps running, idle, until the caller cancels it (what the
// savepoint covers is committed as for any savepoint: at its completion
// notice, or by the job that resumes from it). If the savepoint does not
// complete, the sources read on and the callbacks run again, as if it had
// not been asked.
func (j *Job) StopWithSavepoint(ctx context.Context, dir string) (int64, error) {
	return j.savepoint(ctx, dir, true)
}

// Restored says which snapshot the job was started from (a zero Path:
// none, it started fresh); restarts after failures are not counted.
func (j *Job) Restored() RestoredFrom { return j.restored }

// Metrics returns the job's metrics (one set over all its attempts).
func (j *Job) Metrics() *Metrics { return j.cfg.Metrics }
