package groupcommit

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// memLog is a Flusher writing batches of ints to a slice: the log a store
// would write, in memory. failAt makes the flush of that batch (1-based,
// counting Flush calls) fail; when held is set, the first Flush sends on
// it and waits until release is closed.
type memLog struct {
	mu      sync.Mutex // the store's lock
	log     []int      // written by Flush (the writer's goroutine only)
	flushes int
	failAt  int
	held    chan struct{}
	release chan struct{}
	flushed []int // per FlushedLocked: the batch's size (mu)
}

var errDisk = errors.New("disk gone")

func (m *memLog) Flush(b *[]int) error {
	m.flushes++
	if m.held != nil && m.flushes == 1 {
		m.held <- struct{}{}
		<-m.release
	}
	if m.flushes == m.failAt {
		return errDisk
	}
	m.log = append(m.log, *b...)
	return nil
}

func (m *memLog) FlushedLocked(b *[]int, err error) error {
	m.flushed = append(m.flushed, len(*b))
	return err
}

// queue adds v to the accumulating batch as a store does.
func queue(t interface{ Fatalf(string, ...any) }, w *Writer[[]int], m *memLog, v int, wake bool) *Batch[[]int] {
	m.mu.Lock()
	if err := w.ErrLocked(); err != nil {
		m.mu.Unlock()
		t.Fatalf("queue %d: %v", v, err)
	}
	b := w.QueueLocked()
	b.Data = append(b.Data, v)
	m.mu.Unlock()
	if wake {
		w.Wake()
	}
	return b
}

// TestWritesQueuedDuringAFlushShareTheNext (G1, G5): while the first batch
// is held in its flush, writes from many goroutines queue into the second;
// it is flushed as one, after the first, in queue order.
func TestWritesQueuedDuringAFlushShareTheNext(t *testing.T) {
	m := &memLog{held: make(chan struct{}), release: make(chan struct{})}
	w := New[[]int](&m.mu, m, "test")
	first := queue(t, w, m, 0, true)
	<-m.held // the writer has taken batch 1 and is in its Flush
	var wg sync.WaitGroup
	var order []int // queue order, as the lock saw it
	for g := 1; g <= 32; g++ {
		wg.Go(func() {
			m.mu.Lock()
			b := w.QueueLocked()
			b.Data = append(b.Data, g)
			order = append(order, g)
			m.mu.Unlock()
			w.Wake()
		})
	}
	wg.Wait()
	close(m.release)
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	second := queue(t, w, m, 100, false) // behind the 32, in batch 2 or 3
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(); err != nil {
		t.Fatal(err)
	}
	want := append(append([]int{0}, order...), 100)
	if !slices.Equal(m.log, want) {
		t.Fatalf("log %v, want the queue order %v", m.log, want)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.flushed) < 2 || m.flushed[0] != 1 || m.flushed[1] < 32 {
		t.Fatalf("batch sizes %v: want 1, then the 32 writes queued during its flush together", m.flushed)
	}
	if w.BatchesLocked() != int64(len(m.flushed)) {
		t.Fatalf("BatchesLocked %d, flushed %d batches", w.BatchesLocked(), len(m.flushed))
	}
}

// TestAFailureFailsEveryLaterBatch (G2): the batch queued while a failing
// batch is in its flush fails with the same error and is not written;
// later writes are refused with it.
func TestAFailureFailsEveryLaterBatch(t *testing.T) {
	m := &memLog{held: make(chan struct{}), release: make(chan struct{}), failAt: 1}
	w := New[[]int](&m.mu, m, "test")
	first := queue(t, w, m, 1, true)
	<-m.held
	second := queue(t, w, m, 2, true)
	close(m.release)
	if err := first.Wait(); !errors.Is(err, errDisk) {
		t.Fatalf("failed batch: %v", err)
	}
	if err := second.Wait(); !errors.Is(err, errDisk) {
		t.Fatalf("batch queued behind a failed one: %v, want its error", err)
	}
	m.mu.Lock()
	err := w.ErrLocked()
	m.mu.Unlock()
	if !errors.Is(err, errDisk) {
		t.Fatalf("ErrLocked after a failure: %v", err)
	}
	if err := w.Close(nil); !errors.Is(err, errDisk) {
		t.Fatalf("Close: %v, want the sticky error", err)
	}
	if len(m.log) != 0 || m.flushes != 1 {
		t.Fatalf("log %v after %d flushes: nothing after a failure may be written", m.log, m.flushes)
	}
}

// TestCloseFlushesAndRunsOnce (G3, G4): Close flushes a batch queued
// without a wake, releases once, and refuses later writes.
func TestCloseFlushesAndRunsOnce(t *testing.T) {
	m := &memLog{}
	w := New[[]int](&m.mu, m, "test")
	b := queue(t, w, m, 7, false)
	releases := 0
	release := func() error { releases++; return errors.New("closing the file") }
	if err := w.Close(release); err == nil || err.Error() != "closing the file" {
		t.Fatalf("Close: %v, want release's error", err)
	}
	if err := b.Wait(); err != nil || !slices.Equal(m.log, []int{7}) {
		t.Fatalf("queued write: %v, log %v", err, m.log)
	}
	if err := w.Close(release); err != nil || releases != 1 {
		t.Fatalf("second Close: %v, %d releases", err, releases)
	}
	m.mu.Lock()
	err := w.ErrLocked()
	m.mu.Unlock()
	if err == nil || err.Error() != "test: the store is closed" {
		t.Fatalf("ErrLocked after Close: %v", err)
	}
}

// TestBatchesMatchModel (G1, G2) runs rounds of writes, each round queued
// without a wake and then flushed as one batch, with a failure at a random
// flush: the log holds exactly the rounds before it, every write of a
// later round fails with its error.
func TestBatchesMatchModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rounds := rapid.SliceOfN(rapid.IntRange(1, 5), 1, 12).Draw(t, "rounds")
		m := &memLog{failAt: rapid.IntRange(0, len(rounds)).Draw(t, "failAt")}
		w := New[[]int](&m.mu, m, "test")
		var want []int
		v := 0
		failed := false
		for r, n := range rounds {
			m.mu.Lock()
			err := w.ErrLocked()
			m.mu.Unlock()
			if failed != (err != nil) {
				t.Fatalf("round %d: ErrLocked %v after failure %v", r, err, failed)
			}
			if failed {
				continue
			}
			var bs []*Batch[[]int]
			for range n {
				bs = append(bs, queue(t, w, m, v, false))
				v++
			}
			w.Wake()
			failed = r+1 == m.failAt
			for i, b := range bs {
				if err := b.Wait(); failed != (err != nil) {
					t.Fatalf("round %d write %d: %v, failure %v", r, i, err, failed)
				}
				if b.Seq() != int64(r+1) {
					t.Fatalf("round %d in batch %d", r, b.Seq())
				}
			}
			if !failed {
				for i := v - n; i < v; i++ {
					want = append(want, i)
				}
			}
		}
		w.Close(nil)
		if !slices.Equal(m.log, want) {
			t.Fatalf("log %v, want %v", m.log, want)
		}
	})
}

// releasingLog is a memLog that is a Releaser.
type releasingLog struct {
	memLog
	released []int // batch sizes, in the order released
}

func (r *releasingLog) Released(b *[]int) { r.released = append(r.released, len(*b)) }

// TestReleasedAfterEachBatch: a Releaser hears of every batch flushed, in
// order, once its writers are released.
func TestReleasedAfterEachBatch(t *testing.T) {
	r := &releasingLog{}
	w := New[[]int](&r.mu, r, "test")
	for round := 1; round <= 3; round++ {
		var bs []*Batch[[]int]
		for i := range round {
			bs = append(bs, queue(t, w, &r.memLog, i, false))
		}
		w.Wake()
		for _, b := range bs {
			if err := b.Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.Close(nil) // the goroutine has ended: released is safe to read
	if !slices.Equal(r.released, []int{1, 2, 3}) {
		t.Fatalf("released %v, want each batch once, in order: [1 2 3]", r.released)
	}
}
