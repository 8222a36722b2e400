package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/mutant"
)

// CheckpointMode is the guarantee checkpoints give.
type CheckpointMode int

const (
	// ExactlyOnce aligns barriers: state reflects each record exactly once.
	ExactlyOnce CheckpointMode = iota
	// AtLeastOnce does not align: after a restore some records may be
	// processed twice, none is lost. Lower latency under skew.
	AtLeastOnce
)

// CheckpointConfig is how a job checkpoints. The zero value takes no
// checkpoints (savepoints can still be triggered when Dir is set).
type CheckpointConfig struct {
	// Interval between checkpoints; 0 disables periodic checkpoints.
	Interval time.Duration
	// Timeout after which a checkpoint still in progress is aborted;
	// 0 means 10 minutes.
	Timeout time.Duration
	// MinPause is the least time between the end of one checkpoint and
	// the start of the next; 0 means none.
	MinPause time.Duration
	// Mode is ExactlyOnce (default) or AtLeastOnce.
	Mode CheckpointMode
	// Dir is where checkpoints are stored (DIR/chk-<id>): a directory path,
	// or a URL (file:///path, s3://bucket/prefix, gs://bucket/prefix,
	// azblob://container/prefix; see package checkpoint). Required when
	// Interval > 0.
	Dir string
	// Retain is how many completed checkpoints to keep; 0 means 3.
	Retain int
	// RestoreFrom is the location (a directory path or a URL, like Dir) of
	// a checkpoint or savepoint to start from, or of the directory holding
	// checkpoints (chk-N), whose newest complete one is then restored
	// (checkpoint.Resolve). "" restores nothing unless Resume. Flink's
	// execution.savepoint.path.
	RestoreFrom string
	// Resume, when RestoreFrom is "", restores the newest complete
	// snapshot under Dir if there is one (the highest id among the
	// checkpoints chk-N and the savepoints under Dir/SavepointsDir), and
	// starts fresh if there is none; with RestoreFrom, it restores that
	// newest snapshot instead when it continues a run restored from
	// RestoreFrom (its checkpoint.Snapshot.Origin). That is the rule a restarted Kafka
	// Streams application (or a Flink job recovering from its own
	// checkpoints) follows, so that a job started again with the same
	// configuration after a crash continues where it was. The checkpoint must be the same job's: when it records a job
	// name (JobName, written with every snapshot) other than this job's,
	// Start refuses it (a checkpoint without a name, or a job without one,
	// is accepted); its operator state is then matched by uid as for any
	// restore (AllowNonRestoredState). false (the default) starts fresh.
	// Checkpoints are numbered after the newest complete one under Dir
	// either way, so that a fresh start never writes over, nor is retired
	// in favour of, an older run's checkpoints.
	Resume bool
	// JobName names the job in its snapshots (checkpoint.Snapshot.Job),
	// which Resume checks. "" writes none.
	JobName string
	// AllowNonRestoredState lets a restore skip state of operators that
	// are no longer in the job: by default a snapshot with state for an
	// operator uid the job does not have is refused (Flink's
	// --allowNonRestoredState).
	AllowNonRestoredState bool
	// origin, with keepOrigin, is the Origin a restart of the job keeps
	// writing (the supervisor restores its own checkpoint explicitly).
	origin     string
	keepOrigin bool
	// Storage reads and writes the snapshots; the zero value uses the
	// operating system's file system for paths and gocloud.dev/blob for
	// bucket URLs (tests inject faults through Storage.FS).
	Storage checkpoint.Storage
}

func (c CheckpointConfig) withDefaults() CheckpointConfig {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Retain == 0 {
		c.Retain = 3
	}
	return c
}

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
	done chan cpResult
}

type cpResult struct {
	id   int64
	path string
	err  error
}

type pendingCP struct {
	id      int64
	req     *cpRequest
	started time.Time
	waiting map[*task]bool
	states  map[*Node][]*checkpoint.SubtaskState
	timer   clock.Timer
	maxSync time.Duration
}

// coordinator triggers checkpoints, collects the tasks' acknowledgements,
// persists completed checkpoints, and tells the tasks. It runs on its own
// goroutine; tasks talk to it through channels, it talks to tasks through
// their mailboxes.
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
	// lastCompleted is the id of the newest completed checkpoint (owned by
	// the coordinator goroutine).
	lastCompleted int64
	// savepoints holds the ids of savepoints in progress, for kindOf
	// (read by task goroutines, once per checkpoint).
	savepoints sync.Map
	// finalID is the id of the final checkpoint once it has started (0
	// before), for isFinal (read by task goroutines).
	finalID atomic.Int64
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
// barrier overtook it). Called from task goroutines.
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

// trigger asks for a checkpoint (kind checkpoint) or a savepoint into dir.
// A request that run accepted is always answered (run's exit answers the
// pending and queued ones); one asked after run returned gets errStopped.
func (c *coordinator) trigger(ctx context.Context, kind checkpoint.Kind, dir string) (int64, string, error) {
	req := &cpRequest{kind: kind, dir: dir, done: make(chan cpResult, 1)}
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
	var p *pendingCP
	var queued []*cpRequest
	var lastEnd time.Time
	var timeout <-chan time.Time
	anyFinished := false
	// The final checkpoint: once every source's input has ended, one
	// more checkpoint covers everything, and only when it completes do the
	// sources end their output (so two-phase-commit sinks commit nothing
	// that a restart would replay).
	done := map[*task]bool{}
	var finalID int64
	finalTries := 0
	releaseSources := func() {
		for t := range done {
			t.postTask(func() { t.finalCheckpointDone = true })
		}
	}
	fail := func(err error) {
		if p == nil {
			return
		}
		c.aborted.Inc()
		c.history.failed(p, clk.Now(), err)
		if p.timer != nil {
			p.timer.Stop()
		}
		id := p.id
		for _, t := range c.tasks {
			t.postTask(func() { t.abortCheckpoint(id) })
		}
		if p.req != nil {
			p.req.done <- cpResult{id: id, err: err}
		}
		c.savepoints.Delete(p.id)
		p, timeout = nil, nil
		lastEnd = clk.Now()
		c.inProgress.Set(0)
		c.pending.Set(0)
	}
	start := func(req *cpRequest, final bool) {
		if anyFinished {
			if req != nil {
				req.done <- cpResult{err: fmt.Errorf("%w: part of the job has already finished", ErrCheckpointAborted)}
			}
			return
		}
		id := c.nextID
		c.nextID++
		if req != nil && req.kind == checkpoint.KindSavepoint {
			c.savepoints.Store(id, true)
		}
		if final {
			// Before the barrier leaves: every task asks isFinal at it.
			c.finalID.Store(id)
		}
		p = &pendingCP{id: id, req: req, started: clk.Now(), waiting: map[*task]bool{}, states: map[*Node][]*checkpoint.SubtaskState{}}
		for _, t := range c.tasks {
			p.waiting[t] = true
		}
		c.inProgress.Set(id)
		c.pending.Set(int64(len(p.waiting)))
		kind := checkpoint.KindCheckpoint
		if req != nil {
			kind = req.kind
		}
		c.history.started(p, kind, len(c.tasks))
		p.timer = clk.NewTimer(c.cfg.Timeout)
		timeout = p.timer.C()
		for _, t := range c.sources {
			t.postTask(func() { t.checkpoint(id) })
		}
	}
	defer func() {
		close(c.stopped)
		fail(errStopped)
		for _, r := range queued {
			r.done <- cpResult{err: errStopped}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			ticker.Reset(c.cfg.Interval)
			if p == nil && clk.Now().Sub(lastEnd) >= c.cfg.MinPause {
				start(nil, false)
			}
		case req := <-c.requests:
			if p == nil {
				start(req, false)
			} else {
				queued = append(queued, req)
			}
		case t := <-c.finished:
			anyFinished = true
			if p != nil && p.waiting[t] {
				fail(fmt.Errorf("%w: task %q finished before acknowledging checkpoint %d", ErrCheckpointAborted, t.node.name, p.id))
			}
		case t := <-c.sourcesDone:
			done[t] = true
		case id := <-c.declines:
			if p != nil && p.id == id {
				fail(fmt.Errorf("%w: checkpoint %d was overtaken", ErrCheckpointAborted, id))
			}
		case <-timeout:
			fail(fmt.Errorf("%w: checkpoint %d timed out after %v", ErrCheckpointAborted, p.id, c.cfg.Timeout))
		case a := <-c.acks:
			if p == nil || a.id != p.id || !p.waiting[a.t] {
				continue
			}
			if a.err != nil {
				fail(fmt.Errorf("%w: %w", ErrCheckpointAborted, a.err))
				continue
			}
			delete(p.waiting, a.t)
			c.pending.Set(int64(len(p.waiting)))
			p.maxSync = max(p.maxSync, a.sync)
			c.history.acknowledged(p)
			for n, st := range a.states {
				subs := p.states[n]
				if subs == nil {
					subs = make([]*checkpoint.SubtaskState, c.b.par(n))
					p.states[n] = subs
				}
				subs[st0(a.t, n)] = st
			}
			if len(p.waiting) == 0 {
				c.persist(p)
				c.savepoints.Delete(p.id)
				p, timeout = nil, nil
				lastEnd = clk.Now()
				c.inProgress.Set(0)
			}
		}
		if p == nil && len(queued) > 0 {
			req := queued[0]
			queued = queued[1:]
			start(req, false)
		}
		if len(done) == len(c.sources) && len(done) > 0 && finalID >= 0 {
			switch {
			case finalID > 0 && c.lastCompleted >= finalID:
				releaseSources()
				finalID = -1
			case p == nil && finalTries < 3:
				finalTries++
				start(nil, true)
				if p != nil {
					finalID = p.id
				}
			case p == nil:
				// The final checkpoint keeps failing: end anyway (sinks then
				// commit at end of input).
				c.b.cfg.Logger.Warn("final checkpoint failed; ending without it", "tries", finalTries)
				releaseSources()
				finalID = -1
			}
		}
	}
}

// st0 returns the subtask index of node n in task t (chained operators
// share the task's subtask index).
func st0(t *task, _ *Node) int { return t.subtask }

func (c *coordinator) persist(p *pendingCP) {
	if p.timer != nil {
		p.timer.Stop()
	}
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
		c.failPersist(p, err)
		return
	}
	if snap.Kind == checkpoint.KindCheckpoint {
		if err := c.cfg.Storage.Retain(c.cfg.Dir, c.cfg.Retain); err != nil {
			c.b.cfg.Logger.Warn("checkpoint retention failed", "err", err)
		}
	}
	c.completed.Inc()
	c.lastCompleted = p.id
	size := snap.Size()
	c.lastSize.Set(size)
	c.lastMs.Set(c.b.cfg.Clock.Now().Sub(p.started).Milliseconds())
	c.lastSync.Set(p.maxSync.Microseconds())
	c.history.completed(p, c.b.cfg.Clock.Now(), size)
	id := p.id
	for _, t := range c.tasks {
		t.postTask(func() { t.completeCheckpoint(id) })
	}
	if p.req != nil {
		p.req.done <- cpResult{id: id, path: path}
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

// checkpoint snapshots the task's operators for checkpoint id, forwards the
// barrier, and acknowledges. It runs on the task goroutine: from a
// mailbox letter in source tasks, on alignment in the others. The
// asynchronous parts of the snapshot (SnapshotWriter.Async) run on a
// goroutine of their own after the barrier is forwarded; the acknowledgement
// follows them.
func (t *task) checkpoint(id int64) {
	if t.err != nil {
		// A failed task's state is not consistent: never snapshot it.
		t.job.coord.ack(ack{t: t, id: id, err: t.err})
		return
	}
	began := time.Now() // lint:allow-time a measurement of the pause, not a decision
	states := map[*Node]*checkpoint.SubtaskState{}
	var writers []*SnapshotWriter
	var names []string // of writers' operators
	var err error
	kind := t.job.coord.kindOf(id)
	final := t.job.coord.isFinal(id)
	for _, inst := range t.chain {
		ctx := inst.context()
		w := newSnapshotWriter(id, kind, ctx.KeyGroups)
		if t.job.coord.cfg.Storage.Store == nil {
			// Shared files go to the base's own store (checkpoint.NewUploader);
			// with an injected Store, snapshots stay canonical.
			w.base = t.job.coord.cfg.Dir
		}
		w.final = final
		for _, p := range inst.parts() {
			if s, ok := p.(Snapshotter); ok && err == nil {
				if e := s.SnapshotState(w); e != nil {
					err = t.opError(ctx.Name, PhaseSnapshot, e)
				}
			}
			if s, ok := p.(SplitSnapshotter); ok && err == nil {
				items, e := s.SnapshotSplits(id)
				if mutant.On(mutant.SourceForgetsSplit) && len(items) > 0 {
					items = items[:len(items)-1]
				}
				if e != nil {
					err = t.opError(ctx.Name, PhaseSnapshotSplits, e)
				}
				w.List(SplitsList, checkpoint.EvenSplit, items)
			}
		}
		states[ctx.node] = w.st
		if len(w.async) > 0 {
			writers = append(writers, w)
			names = append(names, ctx.Name)
		}
	}
	sync := time.Since(began) // lint:allow-time
	for _, w := range t.writers {
		w.barrier(id)
	}
	if final {
		// Nothing may follow the final barrier: processing-time
		// callbacks stop here (procTimers.quiesce).
		t.timers.quiesce()
	}
	if len(writers) == 0 {
		t.job.coord.ack(ack{t: t, id: id, states: states, err: err, sync: sync})
		return
	}
	go func() {
		for i, w := range writers {
			for _, f := range w.async {
				// Every f runs, even after a failure, to release what the
				// synchronous part pinned.
				if e := f(); e != nil && err == nil {
					err = t.opError(names[i], PhaseSnapshotAsync, e)
				}
			}
		}
		t.job.coord.ack(ack{t: t, id: id, states: states, err: err, sync: sync})
	}()
}

func (t *task) completeCheckpoint(id int64) {
	for _, inst := range t.chain {
		for _, p := range inst.parts() {
			if l, ok := p.(CheckpointListener); ok {
				if err := l.NotifyCheckpointComplete(id); err != nil {
					e := t.opError(inst.name(), PhaseNotifyComplete, err)
					e.Checkpoint = id
					t.failWith(e)
				}
			}
		}
	}
}

func (t *task) abortCheckpoint(id int64) {
	t.align.abort(id)
	for _, inst := range t.chain {
		for _, p := range inst.parts() {
			if l, ok := p.(CheckpointListener); ok {
				l.NotifyCheckpointAborted(id)
			}
		}
	}
}

// finalCheckpoints reports whether the job takes a final checkpoint at the
// end of bounded input: when it checkpoints periodically.
func (c *coordinator) finalCheckpoints() bool {
	return c.cfg.Interval > 0 && c.cfg.Dir != ""
}

// awaitFinalCheckpoint is called by a source task whose input has ended.
// With periodic checkpoints it waits, serving its mailbox (checkpoint
// triggers included), until the coordinator reports the final checkpoint
// done; the task then ends its output.
func (t *task) awaitFinalCheckpoint() error {
	c := t.job.coord
	if !c.finalCheckpoints() {
		return nil
	}
	select {
	case c.sourcesDone <- t:
	case <-t.done:
		return errCancelled
	}
	for !t.finalCheckpointDone {
		t.flushAll()
		if err := t.yield(); err != nil {
			return err
		}
	}
	return nil
}
