package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/retry"
)

// RestartKind selects a RestartStrategy.
type RestartKind int

const (
	// RestartNone ends the job at its first task failure, with that
	// failure as its error (the default).
	RestartNone RestartKind = iota
	// RestartFixedDelay starts the job again Delay after each failure, at
	// most Attempts times.
	RestartFixedDelay
	// RestartExponentialBackoff starts the job again after a pause that
	// starts at Delay and is multiplied by Multiplier after each failure,
	// up to MaxDelay, at most Attempts times in a row; a run that lasted
	// ResetAfter without failing resets both.
	RestartExponentialBackoff
)

// MetricRestarts counts the times a job was started again after a failure
// (operator "job").
const MetricRestarts = "restarts"

// RestartStrategy says whether and when a job whose task failed is started
// again, in the same process, from its newest completed checkpoint (or, if
// it completed none, from what it was first started from): Flink's restart
// strategies for a local job. Its zero value restarts nothing.
//
// A restart stops every task of the failed run (the operators are closed,
// a checkpoint being persisted is finished) before the pause, then builds
// the tasks anew; records read after the restored checkpoint are read
// again, so outputs that are exactly once (two-phase sinks) stay so, and
// the metrics, one set for the job, count the replayed records again.
// A savepoint or checkpoint asked for while the job is between two runs
// fails with ErrJobStopped.
type RestartStrategy struct {
	// Kind is RestartNone (default), RestartFixedDelay or
	// RestartExponentialBackoff.
	Kind RestartKind
	// Attempts is how many restarts are allowed (in a row, for exponential
	// back-off) before a failure ends the job. 0 means 3.
	Attempts int
	// Delay is the pause before a restart: every restart's with a fixed
	// delay, the first one's with back-off. 0 means 1s.
	Delay time.Duration
	// MaxDelay bounds the back-off's pause. 0 means 1m.
	MaxDelay time.Duration
	// Multiplier grows the back-off's pause after each restart; at least
	// 1. 0 means 2.
	Multiplier float64
	// ResetAfter: with back-off, a run that lasted this long before it
	// failed counts as the first failure again (the pause is Delay and the
	// attempts start over). 0 means 1h; a negative value never resets.
	ResetAfter time.Duration
}

func (r RestartStrategy) withDefaults() RestartStrategy {
	if r.Attempts == 0 {
		r.Attempts = 3
	}
	if r.Delay == 0 {
		r.Delay = time.Second
	}
	if r.MaxDelay == 0 {
		r.MaxDelay = time.Minute
	}
	if r.Multiplier == 0 {
		r.Multiplier = 2
	}
	if r.ResetAfter == 0 {
		r.ResetAfter = time.Hour
	}
	return r
}

// validate adds what is wrong with r to bad.
func (r RestartStrategy) validate(bad func(format string, args ...any)) {
	switch r.Kind {
	case RestartNone, RestartFixedDelay, RestartExponentialBackoff:
	default:
		bad("RestartStrategy.Kind %d: want RestartNone, RestartFixedDelay or RestartExponentialBackoff", r.Kind)
	}
	if r.Attempts < 0 {
		bad("RestartStrategy.Attempts %d: want 0 (meaning 3) or a positive number of restarts", r.Attempts)
	}
	if r.Delay < 0 {
		bad("RestartStrategy.Delay %v: want 0 (meaning 1s) or a positive duration", r.Delay)
	}
	if r.MaxDelay < 0 {
		bad("RestartStrategy.MaxDelay %v: want 0 (meaning 1m) or a positive duration", r.MaxDelay)
	}
	if r.Multiplier != 0 && (r.Multiplier < 1 || math.IsNaN(r.Multiplier) || math.IsInf(r.Multiplier, 0)) {
		bad("RestartStrategy.Multiplier %v: want 0 (meaning 2) or a number >= 1", r.Multiplier)
	}
	if d := r.withDefaults(); r.Kind == RestartExponentialBackoff && d.MaxDelay < d.Delay {
		bad("RestartStrategy.MaxDelay %v is shorter than Delay %v: want MaxDelay >= Delay", d.MaxDelay, d.Delay)
	}
}

// restartState is where a job is in its strategy.
type restartState struct {
	inARow int // restarts since the last reset
}

// next says whether the job, whose run lasted ran before it failed, is
// started again, and after what pause.
func (r RestartStrategy) next(st *restartState, ran time.Duration) (time.Duration, bool) {
	switch r.Kind {
	case RestartFixedDelay:
		st.inARow++
		return r.Delay, st.inARow <= r.Attempts
	case RestartExponentialBackoff:
		if r.ResetAfter > 0 && ran >= r.ResetAfter {
			*st = restartState{}
		}
		st.inARow++
		// Package internal/retry's back-off without jitter: restarts are
		// one job's, nothing to spread.
		p := retry.Policy{Initial: r.Delay, Max: r.MaxDelay, Multiplier: r.Multiplier}
		return p.Delay(st.inARow), st.inARow <= r.Attempts
	}
	return 0, false
}

// supervise waits for each attempt to end and, after a task failure,
// starts the next one as Config.Restart says; it ends the job when an
// attempt ends without failing, the job is cancelled, the strategy allows
// no more restarts, or a restart cannot be built.
func (j *Job) supervise(ctx context.Context, a *attempt) {
	defer func() {
		j.cancel(nil)
		close(j.done)
	}()
	rs := j.cfg.Restart // defaulted (Config.withDefaults)
	var st restartState
	firstID := a.b.firstID
	origin := a.b.origin
	restarts := 0
	for {
		began := j.cfg.Clock.Now()
		<-a.done
		err := a.err
		if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) {
			j.err = err
			return
		}
		pause, ok := rs.next(&st, j.cfg.Clock.Now().Sub(began))
		if !ok {
			if restarts > 0 {
				err = fmt.Errorf("%w (the job had been restarted %d times; the restart strategy allows no more)", err, restarts)
			}
			j.err = err
			return
		}
		cfg := j.cfg
		cp := &cfg.Checkpoint
		from := a.b.restored.Path
		if cp.Dir != "" {
			// The newest checkpoint this job completed, if any: a restart
			// never takes another run's (--fresh left them there).
			if ids, lerr := cp.Storage.List(cp.Dir); lerr == nil && len(ids) > 0 && ids[len(ids)-1] >= firstID {
				from = checkpoint.Dir(cp.Dir, ids[len(ids)-1])
			}
		}
		cp.RestoreFrom, cp.Resume = from, false
		cp.origin, cp.keepOrigin = origin, true
		j.cfg.Logger.Warn("job failed; restarting it", "restart", restarts+1, "pause", pause, "from", orFresh(from), "err", err)
		j.mu.Lock()
		j.mu.restarting = err
		j.mu.Unlock()
		if retry.Sleep(ctx, j.cfg.Clock, pause) != nil {
			j.err = context.Canceled
			return
		}
		next, serr := j.startAttempt(ctx, cfg)
		if serr != nil {
			j.err = fmt.Errorf("runtime: restarting the job after %v: %w", err, serr)
			return
		}
		restarts++
		j.restarts.Inc()
		j.mu.Lock()
		j.mu.b = next.b
		j.mu.restarting = nil
		j.mu.Unlock()
		a = next
	}
}

func orFresh(loc string) string {
	if loc == "" {
		return "(nothing: a fresh start)"
	}
	return loc
}
