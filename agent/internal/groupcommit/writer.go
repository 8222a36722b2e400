package groupcommit

import (
	"errors"
	"sync"
)

// Batch is a group of writes flushed together. Data is the store's: it
// fills Data under its lock while the batch accumulates (QueueLocked
// returned it), and reads it in Flush and FlushedLocked.
type Batch[T any] struct {
	Data T
	seq  int64
	n    int // writes queued (under the store's lock)
	done chan struct{}
	err  error // set before done closes
}

// Seq numbers the batch: 1 for a writer's first, then one more for each
// (G1). A store may compare it with the accumulating batch's to tell
// whether a write has been taken by the goroutine yet.
func (b *Batch[T]) Seq() int64 { return b.seq }

// Wait returns once the batch is flushed, with nil, or with the error that
// keeps it from being durable (G2, G3). It may be called more than once,
// from any goroutine: Batch is an agent.Pending.
func (b *Batch[T]) Wait() error {
	<-b.done
	return b.err
}

// Flusher writes a store's batches.
type Flusher[T any] interface {
	// Flush writes batch b and returns once it is durable, or with why
	// not. The writer's goroutine calls it, one batch at a time, without
	// the lock; writes meanwhile queue into the next batch.
	Flush(b *T) error
	// FlushedLocked is called, under the store's lock, once Flush of b
	// returned err, or with the error of an earlier batch when b was not
	// flushed (G2). It returns the batch's error: err, or a later failure
	// of the store's own (the WAL's compaction).
	FlushedLocked(b *T, err error) error
}

// Releaser is an optional capability of a Flusher: Released is called
// with each batch once its waiters are released (Wait has returned or
// will), without the lock, on the writer's goroutine, before the next
// batch is taken: for work the writers need not wait for, such as keeping
// the batch's buffers for reuse.
type Releaser[T any] interface {
	Released(b *T)
}

// Writer is the group-commit writer of one store: the batch accumulating,
// the goroutine flushing, the sticky error, and Close.
type Writer[T any] struct {
	// mu is the store's lock; it guards the fields below it and the Data
	// of the accumulating batch.
	mu     sync.Locker
	f      Flusher[T]
	r      Releaser[T] // f, when it is one
	closed error       // ErrLocked's answer once closed

	cur      *Batch[T] // accumulating
	err      error     // G2: the first failure
	isClosed bool
	taken    int64 // batches taken by the goroutine
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

// New starts the writer of a store whose lock is mu, flushing through f;
// name prefixes the error of a write after Close ("wal: the store is
// closed").
func New[T any](mu sync.Locker, f Flusher[T], name string) *Writer[T] {
	w := &Writer[T]{mu: mu, f: f, closed: errors.New(name + ": the store is closed"),
		cur:  &Batch[T]{seq: 1, done: make(chan struct{})},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	w.r, _ = f.(Releaser[T])
	go w.run()
	return w
}

// ErrLocked returns why the store takes no more writes (G2, G4), or nil.
// The caller holds the lock.
func (w *Writer[T]) ErrLocked() error {
	if w.err != nil {
		return w.err
	}
	if w.isClosed {
		return w.closed
	}
	return nil
}

// QueueLocked returns the accumulating batch, counting a write into it:
// the caller holds the lock, has found ErrLocked nil, and adds its write
// to the batch's Data before unlocking; then calls Wake.
func (w *Writer[T]) QueueLocked() *Batch[T] {
	w.cur.n++
	return w.cur
}

// BatchesLocked returns the number of batches the goroutine has taken
// (flushed, or being flushed). The caller holds the lock.
func (w *Writer[T]) BatchesLocked() int64 { return w.taken }

// Wake tells the goroutine that the accumulating batch has writes.
func (w *Writer[T]) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run flushes batches, one at a time; writes queued while a batch is being
// flushed form the next batch (group commit).
func (w *Writer[T]) run() {
	defer close(w.done)
	for {
		select {
		case <-w.wake:
			w.flush()
		case <-w.stop:
			// Close has refused further writes: this is the last batch.
			w.flush()
			return
		}
	}
}

func (w *Writer[T]) flush() {
	w.mu.Lock()
	b := w.cur
	if b.n == 0 { // G5
		w.mu.Unlock()
		return
	}
	w.cur = &Batch[T]{seq: b.seq + 1, done: make(chan struct{})}
	w.taken++
	err := w.err
	w.mu.Unlock()
	if err == nil { // G2: after a failure, nothing more is written
		err = w.f.Flush(&b.Data)
	}
	w.mu.Lock()
	err = w.f.FlushedLocked(&b.Data, err)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	b.err = err
	close(b.done)
	if w.r != nil {
		w.r.Released(&b.Data)
	}
}

// Close refuses further writes, flushes what is queued, stops the
// goroutine and calls release (the store closing its file or client). It
// returns the store's sticky error, else release's (G4). Only the first
// call does anything; later ones return nil.
func (w *Writer[T]) Close(release func() error) error {
	w.mu.Lock()
	if w.isClosed {
		w.mu.Unlock()
		return nil
	}
	w.isClosed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if release != nil {
		if rerr := release(); err == nil {
			err = rerr
		}
	}
	return err
}
