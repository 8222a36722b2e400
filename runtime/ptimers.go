package runtime

import (
	"container/heap"
	"time"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/mutant"
)

// procTimers is a subtask's processing-time scheduler: a heap of callbacks
// ordered by (time, registration order) and one clock timer armed for the
// earliest. It belongs to the subtask goroutine.
//
// Each callback carries the chain position of the operator that registered
// it, like a mailbox letter (M1 in mailbox.go): the task loop fires every
// due callback, the Yield of the operator at p only those of position >= p
// (fireFrom); the others stay due in the heap.
//
// Invariant: when the heap is not empty and no due callback was deferred,
// armed is true and armedAt is at most the head's time (the clock timer is
// re-armed only when a callback earlier than armedAt is registered, or
// after the head ran). While deferred is true (inside a Yield that left due
// callbacks in the heap) the clock timer is armed for the earliest callback
// that Yield may run, if any, so that it does not wake for nothing;
// settle, called when the Yield returns, arms it for the head again so the
// task loop fires the deferred ones.
type procTimers struct {
	clk      clock.Clock
	h        ptHeap
	seq      uint64
	timer    clock.Timer
	armed    bool
	armedAt  int64
	deferred bool
	skipped  []ptEntry // scratch for fireFrom
	// quiesced is set once the subtask has taken the final checkpoint:
	// no callback runs or is scheduled any more (see quiesce).
	quiesced bool
	// paused is set while the subtask holds at a stop's snapshot (pause):
	// callbacks are kept and scheduled but none runs.
	paused bool
}

type ptEntry struct {
	ts  int64
	seq uint64
	pos int32 // chain position of the registering operator
	f   func(now int64)
}

type ptHeap []ptEntry

func (h ptHeap) Len() int { return len(h) }
func (h ptHeap) Less(i, j int) bool {
	if h[i].ts != h[j].ts {
		return h[i].ts < h[j].ts
	}
	return h[i].seq < h[j].seq
}
func (h ptHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *ptHeap) Push(x any)   { *h = append(*h, x.(ptEntry)) }
func (h *ptHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = ptEntry{}
	*h = old[:n-1]
	return e
}
func (t *procTimers) init(c clock.Clock) {
	t.clk = c
	t.timer = c.NewTimer(time.Hour)
	t.timer.Stop()
}

// register schedules f at ts for the operator at position pos (posTask or
// posAny for the task's own callbacks).
func (t *procTimers) register(ts int64, pos int32, f func(now int64)) {
	if t.quiesced {
		return
	}
	t.seq++
	heap.Push(&t.h, ptEntry{ts, t.seq, pos, f})
	if !t.paused && (!t.armed || ts < t.armedAt) {
		t.arm(ts)
	}
}

// arm arms the clock timer for ts itself (clock.ResetAt), not for ts
// minus a reading of the clock: on a clock that moves while the subtask
// arms (a simulation's), that would fire late by the move.
func (t *procTimers) arm(ts int64) {
	clock.ResetAt(t.clk, t.timer, time.UnixMilli(ts))
	t.armed, t.armedAt = true, ts
}

// C is the channel the subtask loop selects on.
func (t *procTimers) C() <-chan time.Time { return t.timer.C() }

// fire runs every due callback (including those registered by callbacks
// that are already due) and re-arms for the next one.
func (t *procTimers) fire() { t.fireFrom(posTask) }

// fireFrom runs the due callbacks of position >= p (including those
// registered by callbacks that are already due), in (time, registration)
// order, leaves the other due ones in the heap, re-arms, and reports how
// many ran.
func (t *procTimers) fireFrom(p int32) int {
	woke, wokeFor := t.armed, t.armedAt
	t.armed = false
	if t.quiesced || t.paused {
		return 0
	}
	n := 0
	skipped := t.skipped[:0]
	for len(t.h) > 0 {
		now := clock.NowMillis(t.clk)
		if woke && mutant.On(mutant.ProcTimerTrustsWakeup) {
			now = max(now, wokeFor)
		}
		if t.h[0].ts > now {
			break
		}
		e := heap.Pop(&t.h).(ptEntry)
		if e.pos < p {
			skipped = append(skipped, e)
			continue
		}
		e.f(now)
		n++
	}
	for _, e := range skipped {
		heap.Push(&t.h, e)
	}
	clear(skipped)
	t.skipped = skipped[:0]
	if len(skipped) > 0 {
		// Due callbacks wait for the task loop: arm for the earliest
		// callback this Yield may run, not for them (it would wake at
		// once, again and again).
		t.deferred = true
		best := -1
		for i, e := range t.h {
			if e.pos >= p && (best < 0 || t.h.Less(i, best)) {
				best = i
			}
		}
		if best >= 0 {
			t.arm(t.h[best].ts)
		} else {
			t.timer.Stop()
			t.armed = false
		}
		return n
	}
	t.deferred = false
	// A callback may have armed the timer for a callback it registered
	// that is later than the head: re-arm for the head then too.
	if len(t.h) > 0 && (!t.armed || t.h[0].ts < t.armedAt) {
		t.arm(t.h[0].ts)
	}
	return n
}

// quiesce drops every callback and refuses new ones, for good. The task
// calls it when it has taken the final checkpoint of a bounded job: no
// record may follow that checkpoint's barrier (SnapshotWriter.Final), and
// a processing-time callback that emitted one (a timer of a process
// function, a processing-time window trigger) would emit output that the
// end of input commits outside any checkpoint, which a restore from the
// final checkpoint, still holding the timer, would emit again. As in
// Flink, processing-time timers pending at the end of bounded input do not
// fire. Found by the simulator (internal/sim, S9, seed 421).
func (t *procTimers) quiesce() {
	t.quiesced = true
	t.timer.Stop()
	t.armed, t.deferred = false, false
	clear(t.h)
	t.h = t.h[:0]
}

// pause stops running callbacks, keeping them (and taking new ones),
// until resume: the subtask has passed the barrier of a stop's savepoint
// or checkpoint, after which nothing may reach the outputs
// (Job.StopWithSavepoint).
func (t *procTimers) pause() {
	t.paused = true
	t.timer.Stop()
	t.armed, t.deferred = false, false
}

// resume runs callbacks again after pause (the stop's snapshot did not
// complete): the due ones at the subtask's next turn.
func (t *procTimers) resume() {
	if !t.paused {
		return
	}
	t.paused = false
	if len(t.h) > 0 && !t.quiesced {
		t.arm(t.h[0].ts)
	}
}

// settle restores the invariant after a Yield that deferred due callbacks:
// the clock timer is armed for the head, so the task loop fires them.
func (t *procTimers) settle() {
	if !t.deferred {
		return
	}
	t.deferred = false
	if len(t.h) > 0 {
		t.arm(t.h[0].ts)
	}
}
