package runtime

// The task: one chain of operator subtasks run by one goroutine, its
// loop, and the waits that serve its mailbox and timers meanwhile.

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/weirproject/weir/clock"
)

// task is one chain of operators of one subtask, run by one goroutine.
type task struct {
	job         *builder
	node        *Node
	index       int // in the job's tasks (the coordinator's numbering)
	subtask     int
	parallelism int
	head        instance
	chain       []instance // head first, in topological order
	gates       []any
	writers     []flusher
	mailbox     mailbox
	timers      procTimers
	align       aligner
	// idleGates are the gates of the chain's Holder operators (idlehold.go).
	idleGates []*idleGate
	// finalCheckpointDone is set (by a mailbox letter) when the final
	// checkpoint of a bounded job has completed.
	finalCheckpointDone bool
	// stopFor is the id of the stop's savepoint or checkpoint whose
	// barrier has passed the task (0: none): a source reads no more, and no
	// processing-time callback runs, until the job is cancelled or that
	// snapshot is aborted (Job.StopWithSavepoint, Job.StopWithCheckpoint).
	stopFor int64
	// current is the chain index of the operator being called (-1: none),
	// for panic reports.
	current int
	done    <-chan struct{}
	err     error
	// onBackpressure, if set, is told when an output blocks the task
	// (true) and when it may go on (false).
	onBackpressure func(blocked bool)
	// bpMicros adds up the time outputs blocked the task, bpNow is 1
	// while one does, and bpSince is when the current block began.
	bpMicros *Counter
	bpNow    *Gauge
	bpSince  time.Time
}

// Back-pressure metrics of a task, under the name of the operator heading
// its chain (a task is blocked as a whole: whichever of its outputs has
// no free buffer stops every operator of the chain).
const (
	// MetricBackPressuredMicros counts the microseconds the task spent
	// blocked on an output with no free buffer (its consumer is slower),
	// added when each block ends.
	MetricBackPressuredMicros = "backPressuredMicros"
	// MetricBackPressured is 1 while the task is blocked so, else 0.
	MetricBackPressured = "backPressured"
)

// backpressured is told when an output blocks the task and when it may go
// on: once per buffer that was not free, never per record.
func (t *task) backpressured(blocked bool) {
	if t.onBackpressure != nil {
		t.onBackpressure(blocked)
	}
	if t.bpMicros == nil {
		return
	}
	if blocked {
		t.bpSince = time.Now() // lint:allow-time a measurement of the block, not a decision
		t.bpNow.Set(1)
		return
	}
	t.bpMicros.Add(time.Since(t.bpSince).Microseconds()) // lint:allow-time as above
	t.bpNow.Set(0)
}

func (t *task) flushAll() {
	for _, w := range t.writers {
		w.flush()
	}
	t.publishCounts()
}

// publishCounts adds the record counts the task's instances keep to
// themselves (a source's records read, an input's records in) to the
// shared counters: at every flush, and when the task ends however it ends
// (a stop, a failure), so that the metrics of a stopped job, and a stopped
// `weir run`'s summary, count every record its operators saw.
func (t *task) publishCounts() {
	for _, inst := range t.chain {
		if p, ok := inst.(interface{ publish() }); ok {
			p.publish()
		}
	}
}

func (t *task) run(ctx context.Context) (err error) {
	t.done = ctx.Done()
	opened := 0
	defer func() {
		t.publishCounts()
		if r := recover(); r != nil {
			name := t.node.name
			if t.current >= 0 && t.current < len(t.chain) {
				name = t.chain[t.current].name()
			}
			err = t.opError(name, PhasePanic, &PanicError{Value: r, Stack: debug.Stack()})
		}
		for i := range opened {
			if cerr := t.chain[i].close(); cerr != nil && err == nil {
				err = t.opError(t.chain[i].name(), PhaseClose, cerr)
			}
		}
	}()
	// Open tail first so that every operator's consumers are ready before
	// it can emit.
	for i := len(t.chain) - 1; i >= 0; i-- {
		if err := t.chain[i].open(); err != nil {
			// Close everything instantiated, opened or not (close is
			// idempotent and releases what instantiation acquired, such as
			// a source's reader).
			for j := range t.chain {
				t.chain[j].close()
			}
			return t.opError(t.chain[i].name(), PhaseOpen, err)
		}
	}
	opened = len(t.chain)
	// The periodic flush also publishes chained operators' record counts,
	// so every task has it.
	if t.job.cfg.BufferTimeout > 0 {
		t.scheduleFlush()
	}
	if err := t.head.run(t); err != nil {
		return err
	}
	if t.err != nil {
		return t.err
	}
	// The head's input ended: end the inputs of the chained operators in
	// order, so each can emit what it still holds.
	for _, inst := range t.chain[1:] {
		if err := inst.endInput(); err != nil {
			return t.opError(inst.name(), PhaseEndInput, err)
		}
		if t.err != nil {
			return t.err
		}
	}
	t.job.coord.taskFinished(t)
	t.flushAll()
	for _, w := range t.writers {
		w.end()
	}
	return ctx.Err()
}

func (t *task) scheduleFlush() {
	d := t.job.cfg.BufferTimeout.Milliseconds()
	if d <= 0 {
		d = 1
	}
	var tick func(now int64)
	tick = func(now int64) {
		t.flushAll()
		t.timers.register(now+d, posAny, tick)
	}
	// The flush calls no operator, so any Yield may run it: output keeps
	// flowing while an operator waits.
	t.timers.register(clock.NowMillis(t.job.cfg.Clock)+d, posAny, tick)
}

// serve runs the queued mailbox letters and the due timers without
// blocking; it reports whether the job is being cancelled. Both are served
// on every call (a select would pick one at random and leave the other for
// after the next, possibly long, poll).
func (t *task) serve() bool {
	select {
	case <-t.done:
		return false
	default:
	}
	select {
	case <-t.mailbox.wake:
		t.runLetters()
	default:
	}
	select {
	case <-t.timers.C():
		t.fireTimers()
	default:
	}
	return true
}

// yield blocks until a mailbox letter or a timer has run: any letter or
// timer, for the task's own waits (the final checkpoint). It returns the
// task's failure, if any, so a wait stops.
func (t *task) yield() error {
	if t.err != nil {
		return t.err
	}
	select {
	case <-t.mailbox.wake:
		t.runLetters()
	case <-t.timers.C():
		t.fireTimers()
	case <-t.done:
		return context.Canceled
	}
	return t.err
}

// yieldAt is Context.Yield of the operator at chain position p: it blocks
// until a letter or timer of position >= p has run, and runs no other
// (M2): neither upstream operators nor task letters run inside an
// operator's call. It returns the task's failure, if any, so an operator
// waiting for work stops waiting.
func (t *task) yieldAt(p int32) error {
	defer t.timers.settle()
	for {
		if t.err != nil {
			return t.err
		}
		if !t.mailbox.await(p) {
			t.mailbox.runFrom(p)
			return t.err
		}
		select {
		case <-t.mailbox.yieldWake:
			// The Post that woke us ended the wait; await finds its letter.
		case <-t.timers.C():
			t.mailbox.unawait()
			if t.timers.fireFrom(p) > 0 {
				return t.err
			}
		case <-t.done:
			t.mailbox.unawait()
			return context.Canceled
		}
	}
}

// errCancelled is what a loop returns when the job is cancelled under it.
var errCancelled = context.Canceled

// postTask queues f as a task letter (posTask): it runs from the task loop
// only, never inside an operator's Yield (M2). Any goroutine may call it.
func (t *task) postTask(f func()) { t.mailbox.post(f, posTask) }
