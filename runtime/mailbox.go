package runtime

import (
	"math"
	"sync"
)

// Invariants of the mailbox (M1..M5 are cited by the code and tests):
//
//	M1. Every letter carries the chain position of whoever posted it: the
//	    operator at index i of the task's chain (head = 0, downstream
//	    larger) posts at i; the task itself (checkpoint trigger, complete,
//	    abort, final-checkpoint notice) posts at posTask, below every
//	    operator.
//	M2. The task loop (runAll) runs every queued letter, in posting order.
//	    The Yield of the operator at position p (runFrom(p)) runs only the
//	    letters of position >= p, in posting order, and leaves the others
//	    queued. So an operator's Yield never runs a letter of an operator
//	    upstream of it (which could call into it again mid-call) nor a
//	    task letter (a checkpoint would see it mid-call). Letters of one
//	    position therefore still run in the order they were posted.
//	M3. Every letter runs exactly once: a letter is removed from the queue
//	    (under the lock) before it runs, one at a time, so a Yield nested
//	    inside a letter sees every letter not yet taken, including those
//	    posted before the outer run started (a batch taken out at once
//	    would hide them, and a Yield waiting for one of them would wait
//	    forever).
//	M4. wake has a value whenever a letter was posted since the task loop
//	    last received from it: a Yield that leaves letters queued never
//	    consumes wake, so the task loop runs them afterwards.
//	M5. At most one Yield waits at a time (one goroutine; nested Yields are
//	    inside letters, which do not wait). While it waits at p, the first
//	    Post of position >= p signals yieldWake; no other Post wakes it.

// posTask is the position of the task's own letters: below every operator,
// so no operator's Yield runs them (M1, M2).
const posTask int32 = -1

// posAny is the position of task work that may run inside any Yield
// because it calls no operator (the periodic flush of output buffers).
const posAny int32 = math.MaxInt32

// Mailbox is an operator subtask's handle on its subtask's mailbox:
// through it other goroutines hand work to the subtask goroutine. Post
// never blocks; letters run on the subtask goroutine, between records or
// from a Context.Yield, never concurrently with an operator.
//
// Letters are tagged with the position of the operator in its chain. The
// subtask loop runs all letters in the order they were posted; the Yield of
// an operator runs only its own letters and those of operators downstream
// of it in the chain (Flink's MailboxExecutor rule), so while an operator
// waits in Yield, no operator upstream of it runs (and so cannot call it
// again) and no checkpoint is taken.
//
// A mailbox is unbounded: whoever posts bounds its own in-flight work (the
// async I/O operator by its capacity, the agent operator by its in-flight
// limit), so the number of letters is bounded by that.
type Mailbox struct {
	m   *mailbox
	pos int32
}

// Post queues f to run on the subtask goroutine. Any goroutine may call it.
// f runs exactly once (unless the job ends first), after every letter this
// operator posted before it.
func (mb *Mailbox) Post(f func()) { mb.m.post(f, mb.pos) }

// letter is a queued piece of work and who posted it.
type letter struct {
	f   func()
	pos int32  // chain position of the poster (M1)
	seq uint64 // posting order, 1, 2, ...
}

// mailbox is a subtask's queue of letters, shared by the operators of its
// chain (each posts through its own Mailbox handle) and the task.
type mailbox struct {
	mu struct {
		sync.Mutex
		q    []letter // q[head:] are queued, oldest first
		head int
		seq  uint64 // seq of the last letter posted
		// waitPos is the position of the waiting Yield (M5); waiting
		// says whether one waits.
		waitPos int32
		waiting bool
	}
	wake      chan struct{} // capacity 1: "letters were posted" (M4), for the task loop
	yieldWake chan struct{} // capacity 1: "a letter the waiting Yield may run" (M5)
}

func (m *mailbox) init() {
	m.wake = make(chan struct{}, 1)
	m.yieldWake = make(chan struct{}, 1)
}

func (m *mailbox) post(f func(), pos int32) {
	m.mu.Lock()
	if len(m.mu.q) == cap(m.mu.q) && m.mu.head > 0 {
		// Reuse the front of the backing array before growing it.
		n := copy(m.mu.q, m.mu.q[m.mu.head:])
		clear(m.mu.q[n:])
		m.mu.q = m.mu.q[:n]
		m.mu.head = 0
	}
	m.mu.seq++
	m.mu.q = append(m.mu.q, letter{f: f, pos: pos, seq: m.mu.seq})
	if m.mu.waiting && pos >= m.mu.waitPos {
		m.mu.waiting = false
		select {
		case m.yieldWake <- struct{}{}:
		default:
		}
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// runAll runs every letter queued so far, in posting order (M2), and
// reports how many ran. Letters posted while running wait for the next
// call (and have re-signalled wake).
func (m *mailbox) runAll() int { return m.runFrom(posTask) }

// runFrom runs the letters of position >= p queued so far, in posting
// order, and reports how many ran. A letter may itself run the mailbox (an
// operator that yields from inside a letter): each letter is taken out
// before it runs (M3).
func (m *mailbox) runFrom(p int32) int {
	m.mu.Lock()
	limit := m.mu.seq
	m.mu.Unlock()
	n := 0
	for {
		f := m.take(p, limit)
		if f == nil {
			return n
		}
		f()
		n++
	}
}

// take removes and returns the oldest letter of position >= p posted no
// later than limit, or nil.
func (m *mailbox) take(p int32, limit uint64) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.mu.q
	for i := m.mu.head; i < len(q); i++ {
		if q[i].seq > limit {
			return nil
		}
		if q[i].pos < p {
			continue
		}
		f := q[i].f
		// Close the gap by moving the skipped letters (of upstream
		// operators or the task, usually none) one place on.
		copy(q[m.mu.head+1:i+1], q[m.mu.head:i])
		q[m.mu.head] = letter{}
		m.mu.head++
		if m.mu.head == len(q) {
			m.mu.q, m.mu.head = q[:0], 0
		}
		return f
	}
	return nil
}

// await registers a Yield at p as waiting (M5) and returns true, or returns
// false if a letter it may run is queued already (then it does not wait).
func (m *mailbox) await(p int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.mu.q[m.mu.head:] {
		if l.pos >= p {
			return false
		}
	}
	// Drop a signal left by an earlier wait that ended another way; no
	// Post can signal now (waiting is false and we hold the lock).
	select {
	case <-m.yieldWake:
	default:
	}
	m.mu.waitPos, m.mu.waiting = p, true
	return true
}

// unawait ends a wait that await began and that no Post ended.
func (m *mailbox) unawait() {
	m.mu.Lock()
	m.mu.waiting = false
	m.mu.Unlock()
}
