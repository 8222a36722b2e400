package runtime

import "sync"

// Mailbox hands work from other goroutines to a subtask goroutine. Post
// never blocks; letters run in the order they were posted, between records,
// never concurrently with the operator.
//
// A mailbox is unbounded: whoever posts bounds its own in-flight work (the
// async I/O operator by its capacity, the agent operator by its in-flight
// limit), so the number of letters is bounded by that.
type Mailbox struct {
	mu struct {
		sync.Mutex
		letters []func()
	}
	wake    chan struct{} // capacity 1: "there are letters"
	spare   []func()      // recycled backing array, owned by the subtask goroutine
	running int           // letters running now (nested runs count), subtask goroutine only
}

// Running reports whether a mailbox letter is running right now. Call it
// from the subtask goroutine only. An operator called from inside a letter
// (an upstream operator emitting from its completion) must not wait for
// its own letters through Context.Yield, which could call back into the
// operator upstream mid-call; it waits for its completions directly.
func (m *Mailbox) Running() bool { return m.running > 0 }

func (m *Mailbox) init() { m.wake = make(chan struct{}, 1) }

// Post queues f to run on the subtask goroutine.
func (m *Mailbox) Post(f func()) {
	m.mu.Lock()
	m.mu.letters = append(m.mu.letters, f)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// runAll runs every letter queued so far and reports how many ran. Letters
// posted while running wait for the next call (and have re-signalled wake).
// A letter may itself run the mailbox (an operator that yields from inside
// a letter): the batch being iterated is never handed back to Post until
// its loop is over.
func (m *Mailbox) runAll() int {
	m.mu.Lock()
	letters := m.mu.letters
	m.mu.letters = m.spare[:0]
	m.spare = nil
	m.mu.Unlock()
	m.running++
	for i, f := range letters {
		f()
		letters[i] = nil
	}
	m.running--
	if m.spare == nil {
		m.spare = letters[:0]
	}
	return len(letters)
}
