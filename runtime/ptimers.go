package runtime

import (
	"container/heap"
	"time"

	"github.com/weirproject/weir/clock"
)

// procTimers is a subtask's processing-time scheduler: a heap of callbacks
// ordered by (time, registration order) and one clock timer armed for the
// earliest. It belongs to the subtask goroutine.
//
// Invariant: when the heap is not empty, armed is true and armedAt is at
// most the head's time (the clock timer is re-armed only when a callback
// earlier than armedAt is registered, or after the head ran).
type procTimers struct {
	clk     clock.Clock
	h       ptHeap
	seq     uint64
	timer   clock.Timer
	armed   bool
	armedAt int64
}

type ptEntry struct {
	ts  int64
	seq uint64
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

func (t *procTimers) register(ts int64, f func(now int64)) {
	t.seq++
	heap.Push(&t.h, ptEntry{ts, t.seq, f})
	if !t.armed || ts < t.armedAt {
		t.arm(ts)
	}
}

func (t *procTimers) arm(ts int64) {
	d := time.Duration(ts-clock.NowMillis(t.clk)) * time.Millisecond
	if d < 0 {
		d = 0
	}
	t.timer.Reset(d)
	t.armed, t.armedAt = true, ts
}

// C is the channel the subtask loop selects on.
func (t *procTimers) C() <-chan time.Time { return t.timer.C() }

// fire runs every due callback (including those registered by callbacks
// that are already due) and re-arms for the next one.
func (t *procTimers) fire() {
	t.armed = false
	for len(t.h) > 0 {
		now := clock.NowMillis(t.clk)
		if t.h[0].ts > now {
			break
		}
		e := heap.Pop(&t.h).(ptEntry)
		e.f(now)
	}
	// A callback may have armed the timer for a callback it registered
	// that is later than the head: re-arm for the head then too.
	if len(t.h) > 0 && (!t.armed || t.h[0].ts < t.armedAt) {
		t.arm(t.h[0].ts)
	}
}
