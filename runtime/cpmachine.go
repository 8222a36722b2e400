package runtime

import (
	"fmt"
	"time"
)

// cpMachine is the checkpoint coordinator's state machine: what it decides,
// without the goroutine, channels, timers, metrics and storage that drive
// it (coordinator.run). Every input is a method that returns the actions
// the driver must take, in order; the machine itself does no I/O, reads no
// clock (each input carries now) and is tested by the scripts in
// testdata/coordinator (TestCoordinatorScripts).
//
// Tasks are numbered 0..len(names)-1; requests are the callers' *cpRequest,
// which the machine only hands back in actions.
//
// States of the checkpoint in flight (at most one, CP1):
//
//	idle ──start──▶ collecting ──last ack──▶ persisting ──persisted──▶ idle
//	                    │                        │
//	                    └─abort──▶ idle          └─persist failed──▶ idle
//
//	start:   a tick (Interval; not within MinPause of the last end), a
//	         request (queued while one is in flight, started in order), or
//	         the final checkpoint. Refused once a task has finished (bounded
//	         input): a barrier would never reach it.
//	abort:   a task's failed acknowledgement, a decline (a newer barrier
//	         overtook it in a task), the time-out, a task finishing before
//	         acknowledging, or stop.
//
// And of the final checkpoint (once every source task's input has ended,
// one more checkpoint covers everything; only when it completes do the
// sources end their output, so two-phase-commit sinks commit nothing a
// restart would replay): none yet ──all sources done──▶ tried (up to
// three starts; each failure tries again once idle) ──completed, or three
// failures──▶ released.
//
// Invariants (checked by check after every step of the scripts):
//
//	CP1. At most one checkpoint is in flight: start happens only when idle.
//	CP2. Ids are taken in increasing order, one per start; so the ids that
//	    complete increase.
//	CP3. A checkpoint completes only when every task has acknowledged it
//	    without error, and at most once; an aborted or declined one never
//	    completes (its later acknowledgements are ignored).
//	CP4. Every request the machine accepted is answered exactly once: by
//	    complete, abort or reject (stop rejects the queued ones).
//	CP5. The sources are released once, and only after every source is done.
//	CP6. After stop, no input has an effect.
type cpMachine struct {
	names    []string // of the tasks, for errors
	sources  int      // number of source tasks
	timeout  time.Duration
	minPause time.Duration

	nextID int64
	cur    *cpFlight // the checkpoint in flight; nil: idle
	queued []*cpRequest
	// lastEnd is when the last checkpoint completed or was aborted (for
	// MinPause).
	lastEnd time.Time
	// anyFinished: a task has finished; no checkpoint can start.
	anyFinished   bool
	lastCompleted int64
	sourcesDone   map[int]bool
	// finalID is the id of the final checkpoint last started (0: none
	// yet; -1: the sources are released); finalTries counts its starts.
	finalID    int64
	finalTries int
	stopped    bool
	out        []cpAction
}

// cpFlight is the checkpoint in flight.
type cpFlight struct {
	id         int64
	req        *cpRequest // nil: periodic or final
	final      bool
	waiting    map[int]bool // tasks that have not acknowledged
	persisting bool
}

// maxFinalTries is how often the final checkpoint is started before the
// sources are released without it (sinks then commit at end of input).
const maxFinalTries = 3

func newCPMachine(names []string, sources int, cfg CheckpointConfig, firstID int64) *cpMachine {
	return &cpMachine{names: names, sources: sources, timeout: cfg.Timeout, minPause: cfg.MinPause,
		nextID: firstID, sourcesDone: map[int]bool{}}
}

// cpActionKind is what the driver must do.
type cpActionKind int

const (
	// actStart: checkpoint id has started (req: the request; final: the
	// final checkpoint). Record its kind, arm its time-out, and post the
	// trigger to every source task.
	actStart cpActionKind = iota + 1
	// actAcked: task's acknowledgement of id is accepted; left tasks
	// have not acknowledged yet. Keep its state.
	actAcked
	// actPersist: every task has acknowledged id. Disarm the time-out,
	// write the snapshot, and report Persisted.
	actPersist
	// actComplete: id is written. Tell every task (CheckpointListener)
	// and answer req.
	actComplete
	// actAbort: id is aborted with err. Disarm the time-out, tell every
	// task, answer req.
	actAbort
	// actPersistFailed: writing id failed with err. Tell every task (and
	// fail them if err is checkpoint.ErrFenced), answer req.
	actPersistFailed
	// actReject: req is answered with err; no checkpoint started.
	actReject
	// actRelease: the final checkpoint is complete (gaveUp false) or was
	// given up after tries starts: tell the done sources to end their
	// output.
	actRelease
)

// cpAction is one thing the driver must do; which fields are set depends on
// kind.
type cpAction struct {
	kind  cpActionKind
	id    int64
	req   *cpRequest
	final bool
	task  int
	left  int
	err   error
	// gaveUp and tries: of actRelease.
	gaveUp bool
	tries  int
}

// emit returns the actions of the input just handled, after settling: a
// request queued behind a checkpoint that ended starts, and the final
// checkpoint starts or releases the sources.
func (m *cpMachine) emit(time.Time) []cpAction {
	m.settle()
	out := m.out
	m.out = nil
	return out
}

// tick is the periodic trigger (CheckpointConfig.Interval).
func (m *cpMachine) tick(now time.Time) []cpAction {
	if !m.stopped && m.cur == nil && now.Sub(m.lastEnd) >= m.minPause {
		m.start(nil, false)
	}
	return m.emit(now)
}

// request asks for a checkpoint or savepoint (req.kind).
func (m *cpMachine) request(req *cpRequest, now time.Time) []cpAction {
	switch {
	case m.stopped:
		m.out = append(m.out, cpAction{kind: actReject, req: req, err: errStopped})
	case m.cur == nil:
		m.start(req, false)
	default:
		m.queued = append(m.queued, req)
	}
	return m.emit(now)
}

// ack is task's acknowledgement of id, failed with err if not nil.
func (m *cpMachine) ack(task int, id int64, err error, now time.Time) []cpAction {
	c := m.cur
	if m.stopped || c == nil || c.id != id || !c.waiting[task] {
		// Late: of a checkpoint already aborted (CP3), or a repeat.
		return m.emit(now)
	}
	if err != nil {
		m.abort(fmt.Errorf("%w: %w", ErrCheckpointAborted, err), now)
		return m.emit(now)
	}
	delete(c.waiting, task)
	m.out = append(m.out, cpAction{kind: actAcked, id: id, task: task, left: len(c.waiting)})
	if len(c.waiting) == 0 {
		c.persisting = true
		m.out = append(m.out, cpAction{kind: actPersist, id: id, req: c.req})
	}
	return m.emit(now)
}

// persisted reports the end of actPersist: err nil if id was written.
func (m *cpMachine) persisted(id int64, err error, now time.Time) []cpAction {
	c := m.cur
	if c == nil || c.id != id || !c.persisting {
		panic(fmt.Sprintf("runtime: checkpoint %d persisted while not persisting", id))
	}
	if err != nil {
		m.out = append(m.out, cpAction{kind: actPersistFailed, id: id, req: c.req, err: err})
	} else {
		m.lastCompleted = id
		m.out = append(m.out, cpAction{kind: actComplete, id: id, req: c.req})
	}
	m.cur, m.lastEnd = nil, now
	return m.emit(now)
}

// decline: a task gave up id, overtaken by a newer barrier.
func (m *cpMachine) decline(id int64, now time.Time) []cpAction {
	if !m.stopped && m.cur != nil && m.cur.id == id && !m.cur.persisting {
		m.abort(fmt.Errorf("%w: checkpoint %d was overtaken", ErrCheckpointAborted, id), now)
	}
	return m.emit(now)
}

// timedOut: the time-out of id (armed by actStart) fired.
func (m *cpMachine) timedOut(id int64, now time.Time) []cpAction {
	if !m.stopped && m.cur != nil && m.cur.id == id && !m.cur.persisting {
		m.abort(fmt.Errorf("%w: checkpoint %d timed out after %v", ErrCheckpointAborted, id, m.timeout), now)
	}
	return m.emit(now)
}

// taskFinished: task's input ended and it has stopped (bounded input).
func (m *cpMachine) taskFinished(task int, now time.Time) []cpAction {
	if m.stopped {
		return nil
	}
	m.anyFinished = true
	if c := m.cur; c != nil && c.waiting[task] {
		m.abort(fmt.Errorf("%w: task %q finished before acknowledging checkpoint %d", ErrCheckpointAborted, m.names[task], c.id), now)
	}
	return m.emit(now)
}

// sourceDone: source task's input ended; it waits for the final
// checkpoint.
func (m *cpMachine) sourceDone(task int, now time.Time) []cpAction {
	if !m.stopped {
		m.sourcesDone[task] = true
	}
	return m.emit(now)
}

// stop: the job is ending. The checkpoint in flight is aborted and the
// queued requests rejected, with errStopped; nothing happens after (CP6).
func (m *cpMachine) stop(now time.Time) []cpAction {
	if m.stopped {
		return nil
	}
	if m.cur != nil && !m.cur.persisting {
		m.abort(errStopped, now)
	}
	for _, r := range m.queued {
		m.out = append(m.out, cpAction{kind: actReject, req: r, err: errStopped})
	}
	m.queued = nil
	m.stopped = true
	out := m.out
	m.out = nil
	return out
}

// start starts a checkpoint (the caller has checked that none is in
// flight, CP1) unless a task has finished, which refuses it; it reports
// whether it started one.
func (m *cpMachine) start(req *cpRequest, final bool) bool {
	if m.anyFinished {
		if req != nil {
			m.out = append(m.out, cpAction{kind: actReject, req: req,
				err: fmt.Errorf("%w: part of the job has already finished", ErrCheckpointAborted)})
		}
		return false
	}
	id := m.nextID
	m.nextID++
	c := &cpFlight{id: id, req: req, final: final, waiting: make(map[int]bool, len(m.names))}
	for i := range m.names {
		c.waiting[i] = true
	}
	m.cur = c
	m.out = append(m.out, cpAction{kind: actStart, id: id, req: req, final: final})
	return true
}

func (m *cpMachine) abort(err error, now time.Time) {
	m.out = append(m.out, cpAction{kind: actAbort, id: m.cur.id, req: m.cur.req, err: err})
	m.cur, m.lastEnd = nil, now
}

// settle starts what waits for the machine to be idle: the queued
// requests, in order, then the final checkpoint; and releases the sources
// once it has completed, or failed maxFinalTries times.
func (m *cpMachine) settle() {
	if m.stopped {
		return
	}
	for m.cur == nil && len(m.queued) > 0 {
		req := m.queued[0]
		m.queued = m.queued[1:]
		m.start(req, false)
	}
	for m.sources > 0 && len(m.sourcesDone) == m.sources && m.finalID >= 0 {
		switch {
		case m.finalID > 0 && m.lastCompleted >= m.finalID:
			m.release(false)
		case m.cur != nil:
			return
		case m.finalTries < maxFinalTries:
			m.finalTries++
			if m.start(nil, true) {
				m.finalID = m.cur.id
				return
			}
		default:
			m.release(true)
		}
	}
}

func (m *cpMachine) release(gaveUp bool) {
	m.out = append(m.out, cpAction{kind: actRelease, id: m.finalID, gaveUp: gaveUp, tries: m.finalTries})
	m.finalID = -1
}

// check returns the first invariant the state breaks, or nil (scripts call
// it after every step).
func (m *cpMachine) check() error {
	if c := m.cur; c != nil {
		if c.id >= m.nextID {
			return fmt.Errorf("CP2: checkpoint %d in flight, next id %d", c.id, m.nextID)
		}
		if c.persisting != (len(c.waiting) == 0) {
			return fmt.Errorf("CP3: checkpoint %d persisting=%v with %d tasks waiting", c.id, c.persisting, len(c.waiting))
		}
	}
	if m.lastCompleted >= m.nextID {
		return fmt.Errorf("CP2: completed %d, next id %d", m.lastCompleted, m.nextID)
	}
	if m.finalID < 0 && len(m.sourcesDone) != m.sources {
		return fmt.Errorf("CP5: sources released with %d of %d done", len(m.sourcesDone), m.sources)
	}
	if m.stopped && (m.cur != nil && !m.cur.persisting || len(m.queued) > 0) {
		return fmt.Errorf("CP6: stopped with work left")
	}
	return nil
}
