package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
)

// ErrCheckpointAborted is the error of a checkpoint or savepoint that did
// not complete (it timed out, a task finished or failed, or a newer one
// overtook it).
var ErrCheckpointAborted = errors.New("runtime: checkpoint aborted")

// ErrJobStopped is the error of a checkpoint or savepoint asked of a job
// that has ended (or ends before the request completes): a stopped job takes
// none, so TriggerCheckpoint and TriggerSavepoint return it at once instead
// of waiting on their context. The error also matches ErrCheckpointAborted.
var ErrJobStopped = errors.New("runtime: the job has stopped; trigger checkpoints and savepoints before Wait returns")

// errStopped is what triggers get from a stopped coordinator: ErrJobStopped,
// which also matches ErrCheckpointAborted.
var errStopped error = stoppedError{}

type stoppedError struct{}

func (stoppedError) Error() string { return ErrJobStopped.Error() }

func (stoppedError) Is(target error) bool {
	return target == ErrJobStopped || target == ErrCheckpointAborted
}

type ack struct {
	t      *task
	id     int64
	states map[*Node]*checkpoint.SubtaskState
	err    error
	sync   time.Duration // how long the task paused to snapshot
}

type cpRequest struct {
	kind checkpoint.Kind
	dir  string // savepoint target
	stop bool   // a stop: sources read nothing after its barrier (Job.StopWithSavepoint, StopWithCheckpoint)
	done chan cpResult
}

type cpResult struct {
	id   int64
	path string
	err  error
}

// pendingCP is the driver's record of the checkpoint in flight: what the
// state machine (cpMachine) leaves to it.
type pendingCP struct {
	id      int64
	req     *cpRequest
	started time.Time
	left    int // tasks that have not acknowledged
	states  map[*Node][]*checkpoint.SubtaskState
	timer   clock.Timer
	maxSync time.Duration
	// path and size: of the snapshot written (persist).
	path string
	size int64
}

// coordinator triggers checkpoints, collects the tasks' acknowledgements,
// persists completed checkpoints, and tells the tasks. What it decides is
// the state machine cpMachine (its design and invariants, CP1..CP6, are in
// its comment); coordinator is its driver: one goroutine (run) turns the
// channels the tasks and triggers send on, the interval ticker and the
// time-out into the machine's inputs, and carries out its actions: posts to
// the tasks' mailboxes, writes snapshots (on this goroutine: a checkpoint
// is written before the next input is taken), answers requests, and keeps
// the metrics and the history.
type coordinator struct {
	b        *builder
	cfg      CheckpointConfig
	tasks    []*task
	sources  []*task
	acks     chan ack
	requests chan *cpRequest
	finished chan *task
	declines chan int64
	// sourcesDone receives source tasks whose input has ended and that
	// wait for the final checkpoint.
	sourcesDone chan *task
	nextID      int64
	// stopped is closed when run returns: no request is accepted after
	// that, and trigger returns errStopped instead of waiting.
	stopped   chan struct{}
	completed *Counter
	aborted   *Counter
	lastSize  *Gauge
	lastMs    *Gauge
	lastSync  *Gauge
	// inProgress is the id of the checkpoint or savepoint in progress (0:
	// none) and pending the tasks that have not acknowledged it yet: for
	// progress displays, written by the coordinator goroutine.
	inProgress *Gauge
	pending    *Gauge
	// p is the checkpoint in flight (owned by the coordinator goroutine).
	p *pendingCP
	// savepoints holds the ids of savepoints in progress, for kindOf
	// (read by task goroutines, once per checkpoint).
	savepoints sync.Map
	// finalID is the id of the final checkpoint once it has started (0
	// before), for isFinal (read by task goroutines).
	finalID atomic.Int64
	// stopID is the id of the stop's savepoint or checkpoint once it has
	// started (0 before), for isStop (read by task goroutines).
	stopID atomic.Int64
	// history is what Job.Checkpoints reports.
	history checkpointHistory
}

// kindOf tells whether id is a checkpoint or a savepoint.
func (c *coordinator) kindOf(id int64) checkpoint.Kind {
	if _, ok := c.savepoints.Load(id); ok {
		return checkpoint.KindSavepoint
	}
	return checkpoint.KindCheckpoint
}

// isStop tells whether id is the savepoint or checkpoint of a stop
// (Job.StopWithSavepoint, Job.StopWithCheckpoint).
func (c *coordinator) isStop(id int64) bool {
	return id > 0 && c.stopID.Load() == id
}

// isFinal tells whether id is the final checkpoint of a bounded job.
func (c *coordinator) isFinal(id int64) bool {
	return id > 0 && c.finalID.Load() == id
}

func newCoordinator(b *builder, firstID int64) *coordinator {
	c := &coordinator{b: b, cfg: b.cfg.Checkpoint, nextID: firstID,
		acks: make(chan ack, 64), requests: make(chan *cpRequest),
		finished: make(chan *task, 64), declines: make(chan int64, 64),
		sourcesDone: make(chan *task, 64), stopped: make(chan struct{})}
	m := b.cfg.Metrics
	c.completed = m.counter("job", 0, "checkpointsCompleted")
	c.aborted = m.counter("job", 0, "checkpointsAborted")
	c.lastSize = m.gauge("job", 0, "lastCheckpointBytes")
	c.lastMs = m.gauge("job", 0, "lastCheckpointMillis")
	c.lastSync = m.gauge("job", 0, "lastCheckpointSyncMicros")
	c.inProgress = m.gauge("job", 0, "checkpointInProgress")
	c.pending = m.gauge("job", 0, "checkpointTasksPending")
	return c
}

// declined tells the coordinator a task gave up checkpoint id (a newer
// barrier overtook it). Called from task goroutines, it never blocks.
// Dropping a decline when 64 are queued loses nothing: a task sees a
// barrier newer than id only after the coordinator started a newer
// checkpoint, which it does only once id is no longer in flight (CP1), so
// a decline is a late notice the machine ignores; were id still in
// flight, its time-out would abort it.
func (c *coordinator) declined(id int64) {
	select {
	case c.declines <- id:
	default:
	}
}

func (c *coordinator) ack(a ack) {
	select {
	case c.acks <- a:
	case <-c.b.done:
	}
}

func (c *coordinator) taskFinished(t *task) {
	select {
	case c.finished <- t:
	case <-c.b.done:
	}
}

// trigger asks for what req says: a checkpoint, or a savepoint into
// req.dir (a stop's, with req.stop). A request that run accepted is always answered (run's exit answers the
// pending and queued ones); one asked after run returned gets errStopped.
func (c *coordinator) trigger(ctx context.Context, req *cpRequest) (int64, string, error) {
	req.done = make(chan cpResult, 1)
	select {
	case c.requests <- req:
	case <-c.stopped:
		return 0, "", errStopped
	case <-ctx.Done():
		return 0, "", ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.id, r.path, r.err
	case <-ctx.Done():
		return 0, "", ctx.Err()
	}
}

func (c *coordinator) run(ctx context.Context) {
	// All time comes from the job's clock, so tests can drive it.
	clk := c.b.cfg.Clock
	var tick <-chan time.Time
	var ticker clock.Timer
	if c.cfg.Interval > 0 {
		ticker = clk.NewTimer(c.cfg.Interval)
		defer ticker.Stop()
		tick = ticker.C()
	}
	names := make([]string, len(c.tasks))
	for i, t := range c.tasks {
		names[i] = t.node.name
	}
	m := newCPMachine(names, len(c.sources), c.cfg, c.nextID)
	defer func() {
		close(c.stopped)
		c.do(m, m.stop(clk.Now()), nil)
	}()
	for {
		var timeout <-chan time.Time
		if c.p != nil && c.p.timer != nil {
			timeout = c.p.timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
			ticker.Reset(c.cfg.Interval)
			c.do(m, m.tick(clk.Now()), nil)
		case req := <-c.requests:
			c.do(m, m.request(req, clk.Now()), nil)
		case t := <-c.finished:
			c.do(m, m.taskFinished(t.index, clk.Now()), nil)
		case t := <-c.sourcesDone:
			c.do(m, m.sourceDone(t.index, clk.Now()), nil)
		case id := <-c.declines:
			c.do(m, m.decline(id, clk.Now()), nil)
		case <-timeout:
			c.do(m, m.timedOut(c.p.id, clk.Now()), nil)
		case a := <-c.acks:
			c.do(m, m.ack(a.t.index, a.id, a.err, clk.Now()), &a)
		}
	}
}

// do carries out the machine's actions, in order; a is the acknowledgement
// being handled, if any (its states are kept on actAcked).
func (c *coordinator) do(m *cpMachine, acts []cpAction, a *ack) {
	clk := c.b.cfg.Clock
	for _, act := range acts {
		switch act.kind {
		case actStart:
			id := act.id
			kind := checkpoint.KindCheckpoint
			if act.req != nil {
				kind = act.req.kind
			}
			if kind == checkpoint.KindSavepoint {
				c.savepoints.Store(id, true)
			}
			if act.final {
				// Before the barrier leaves: every task asks isFinal at it.
				c.finalID.Store(id)
			}
			if act.req != nil && act.req.stop {
				c.stopID.Store(id) // as finalID: before the barrier leaves
			}
			c.p = &pendingCP{id: id, req: act.req, started: clk.Now(), left: len(c.tasks),
				states: map[*Node][]*checkpoint.SubtaskState{}}
			c.inProgress.Set(id)
			c.pending.Set(int64(len(c.tasks)))
			c.history.started(c.p, kind, len(c.tasks))
			c.p.timer = clk.NewTimer(c.cfg.Timeout)
			for _, t := range c.sources {
				t.postTask(func() { t.checkpoint(id) })
			}
		case actAcked:
			p := c.p
			p.left = act.left
			c.pending.Set(int64(p.left))
			p.maxSync = max(p.maxSync, a.sync)
			c.history.acknowledged(p)
			for n, st := range a.states {
				subs := p.states[n]
				if subs == nil {
					subs = make([]*checkpoint.SubtaskState, c.b.par(n))
					p.states[n] = subs
				}
				subs[a.t.subtask] = st // chained operators share the task's subtask
			}
		case actPersist:
			c.p.timer.Stop()
			_, err := c.persist(c.p)
			c.do(m, m.persisted(act.id, err, clk.Now()), nil)
		case actComplete:
			c.completeCP(c.p)
			c.ended()
		case actPersistFailed:
			c.failPersist(c.p, act.err)
			c.ended()
		case actAbort:
			p := c.p
			c.aborted.Inc()
			c.history.failed(p, clk.Now(), act.err)
			p.timer.Stop()
			for _, t := range c.tasks {
				t.postTask(func() { t.abortCheckpoint(act.id) })
			}
			if p.req != nil {
				p.req.done <- cpResult{id: act.id, err: act.err}
			}
			c.ended()
			c.pending.Set(0)
		case actReject:
			act.req.done <- cpResult{err: act.err}
		case actRelease:
			if act.gaveUp {
				// Sinks then commit at end of input.
				c.b.cfg.Logger.Warn("final checkpoint failed; ending without it", "tries", act.tries)
			}
			for _, t := range c.sources {
				t.postTask(func() { t.finalCheckpointDone = true })
			}
		}
	}
}

// ended forgets the checkpoint in flight, which completed or was aborted.
func (c *coordinator) ended() {
	c.savepoints.Delete(c.p.id)
	c.p = nil
	c.inProgress.Set(0)
}

// persist writes p's snapshot and returns its path.
func (c *coordinator) persist(p *pendingCP) (string, error) {
	snap := &checkpoint.Snapshot{ID: p.id, Kind: checkpoint.KindCheckpoint, TimestampMs: checkpoint.Now(),
		MaxParallelism: c.b.maxParallelism, Job: c.cfg.JobName, Origin: c.b.origin}
	for _, n := range c.b.g.nodes {
		subs := p.states[n]
		if subs == nil {
			subs = make([]*checkpoint.SubtaskState, c.b.par(n))
		}
		snap.Operators = append(snap.Operators, &checkpoint.OperatorState{UID: c.b.uid(n), Name: n.name, Parallelism: c.b.par(n), Subtasks: subs})
	}
	dir := ""
	if p.req != nil && p.req.kind == checkpoint.KindSavepoint {
		snap.Kind = checkpoint.KindSavepoint
		dir = p.req.dir
	} else {
		// Dir is set: periodic and final checkpoints need it (validate)
		// and TriggerCheckpoint refuses a job without it.
		dir = checkpoint.Dir(c.cfg.Dir, p.id)
	}
	path, err := c.cfg.Storage.Write(dir, snap)
	if err != nil {
		return "", err
	}
	if snap.Kind == checkpoint.KindCheckpoint {
		if err := c.cfg.Storage.Retain(c.cfg.Dir, c.cfg.Retain); err != nil {
			c.b.cfg.Logger.Warn("checkpoint retention failed", "err", err)
		}
	}
	p.path, p.size = path, snap.Size()
	return path, nil
}

// completeCP tells the tasks and the requester that p is complete.
func (c *coordinator) completeCP(p *pendingCP) {
	c.completed.Inc()
	c.lastSize.Set(p.size)
	c.lastMs.Set(c.b.cfg.Clock.Now().Sub(p.started).Milliseconds())
	c.lastSync.Set(p.maxSync.Microseconds())
	c.history.completed(p, c.b.cfg.Clock.Now(), p.size)
	id := p.id
	for _, t := range c.tasks {
		t.postTask(func() { t.completeCheckpoint(id) })
	}
	if p.req != nil {
		p.req.done <- cpResult{id: id, path: p.path}
	}
}

func (c *coordinator) failPersist(p *pendingCP, err error) {
	c.aborted.Inc()
	c.history.failed(p, c.b.cfg.Clock.Now(), err)
	c.b.cfg.Logger.Error("checkpoint failed", "id", p.id, "err", err)
	id := p.id
	// A fenced writer (checkpoint.Fence: another process owns the job's
	// checkpoints now) must commit nothing more and stop: every task
	// fails, so no later checkpoint completes and the job ends with err.
	fenced := errors.Is(err, checkpoint.ErrFenced)
	for _, t := range c.tasks {
		t.postTask(func() {
			t.abortCheckpoint(id)
			if fenced {
				e := t.opError(t.node.name, PhaseCheckpoint, err)
				e.Checkpoint = id
				t.failWith(e)
			}
		})
	}
	if p.req != nil {
		p.req.done <- cpResult{id: id, err: err}
	}
}

// finalCheckpoints reports whether the job takes a final checkpoint at the
// end of bounded input: when it checkpoints periodically.
func (c *coordinator) finalCheckpoints() bool {
	return c.cfg.Interval > 0 && c.cfg.Dir != ""
}
