package completions

import (
	"sync"
	"testing"
)

type item struct {
	worker, n int
	next      *item
}

func (it *item) Next() **item { return &it.next }

// TestStackBatches: items pushed by concurrent workers while a consumer
// takes them come out exactly once each, each worker's in the order it
// pushed them (C2, C3), and a letter is asked for exactly when a batch
// starts: never while the previous batch has not been taken, and once
// for each batch taken.
func TestStackBatches(t *testing.T) {
	const workers, per = 4, 20000
	var s Stack[item, *item]
	letters := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range per {
				if s.Push(&item{worker: w, n: n}) {
					select {
					case letters <- struct{}{}:
					default:
						t.Error("Push asked for a letter while one was outstanding")
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	last := make([]int, workers)
	for i := range last {
		last[i] = -1
	}
	got, batches := 0, 0
	for got < workers*per {
		select {
		case <-letters:
		case <-done:
			select {
			case <-letters:
			default:
				if s.TakeAll() != nil {
					t.Fatal("items on the stack with no letter asked for")
				}
				t.Fatalf("%d items taken of %d", got, workers*per)
			}
		}
		batches++
		list := s.TakeAll()
		if list == nil {
			t.Fatal("a letter for an empty stack")
		}
		for it := list; it != nil; it = it.next {
			if it.n != last[it.worker]+1 {
				t.Fatalf("worker %d: item %d after %d", it.worker, it.n, last[it.worker])
			}
			last[it.worker] = it.n
			got++
		}
	}
	<-done
	if s.TakeAll() != nil {
		t.Fatal("items left after every item was taken")
	}
	t.Logf("%d items in %d batches", got, batches)
}

// TestTakeAllOrder: one goroutine's pushes come back oldest first, and
// only the first push of a batch asks for a letter.
func TestTakeAllOrder(t *testing.T) {
	var s Stack[item, *item]
	for n := range 5 {
		if first := s.Push(&item{n: n}); first != (n == 0) {
			t.Fatalf("push %d: first %v", n, first)
		}
	}
	n := 0
	for it := s.TakeAll(); it != nil; it = it.next {
		if it.n != n {
			t.Fatalf("item %d at position %d", it.n, n)
		}
		n++
	}
	if n != 5 || s.TakeAll() != nil {
		t.Fatalf("%d items taken, want 5 and an empty stack", n)
	}
	if !s.Push(&item{}) {
		t.Fatal("the first push after TakeAll did not ask for a letter")
	}
}
