package watermark

import (
	"fmt"
	"math"

	"github.com/weirproject/weir/internal/mutant"
)

// Combiner combines the watermarks and idle status of several inputs into one
// monotone output, with the semantics of Flink's StatusWatermarkValve
// (invariants I1-I10 in the package documentation). The same mechanism
// serves the channels of one input, the two inputs of a two-input operator
// and the splits of a source (through Splits).
//
// Inputs are identified by small integers: 0..n-1 for the n inputs given to
// NewCombiner, and whatever Add returns for later ones. Passing an index that
// was never handed out panics; calls for a removed input are ignored.
//
// Watermark, Idle and Active allocate nothing. A Combiner is not safe for
// concurrent use: it belongs to one subtask goroutine.
type Combiner struct {
	out Output

	in   []combinerInput
	heap []int32 // indexed min-heap (by watermark) of the aligned inputs
	free []int32 // removed input slots, reused by Add

	last   int64 // last emitted output watermark
	idle   bool  // output status
	active int   // live inputs that are not idle
	live   int   // inputs not removed
}

type combinerInput struct {
	wm      int64 // highest watermark received
	pos     int32 // position in heap; -1 when not aligned
	idle    bool
	removed bool
}

// NewCombiner returns a Combiner of n inputs that reports to out. Every input
// starts at Min, active and aligned; the output starts at Min and active.
// It panics if n is negative or out is nil.
func NewCombiner(n int, out Output) *Combiner {
	if n < 0 {
		panic(fmt.Sprintf("watermark: NewCombiner with %d inputs", n))
	}
	if out == nil {
		panic("watermark: NewCombiner with a nil Output")
	}
	c := &Combiner{
		out:    out,
		in:     make([]combinerInput, n),
		heap:   make([]int32, 0, n),
		last:   Min,
		active: n,
		live:   n,
	}
	for i := range c.in {
		c.in[i] = combinerInput{wm: Min, pos: -1}
		c.push(i)
	}
	return c
}

// Watermark feeds watermark ts of input i (I2, I3, I5, I8). If the input is
// idle it first becomes active, exactly as if Active(i) had been called,
// because in weir emitting a watermark implies being active. A ts not above
// the input's previous watermark changes nothing else. An aligned input
// updates the minimum; an unaligned one realigns once ts reaches the last
// output. The output watermark is emitted if the minimum over aligned
// inputs rose above it.
func (c *Combiner) Watermark(i int, ts int64) {
	s := &c.in[i]
	if s.removed {
		return
	}
	if s.idle {
		c.Active(i)
	}
	if ts <= s.wm {
		return
	}
	s.wm = ts
	if s.pos >= 0 {
		c.down(int(s.pos))
	} else if ts >= c.last {
		c.push(i)
	}
	c.emitMin()
}

// Idle marks input i idle (I4, I6). It leaves the minimum; if it was holding
// the minimum the output may advance. If it was the last active input, the
// output goes idle: first, if this input was holding the minimum, the output
// advances to the highest watermark of all inputs (when that is higher),
// then MarkIdle is sent. Marking an idle input idle does nothing.
func (c *Combiner) Idle(i int) {
	s := &c.in[i]
	if s.removed || s.idle {
		return
	}
	s.idle = true
	c.active--
	// An aligned input never lies below the output except a freshly added
	// one, which holds the output where it is; either way it holds the
	// minimum when its watermark is not above the output.
	heldMin := s.pos >= 0 && s.wm <= c.last
	if s.pos >= 0 {
		c.remove(int(s.pos))
	}
	if c.active == 0 {
		if heldMin {
			c.flushMax()
		}
		c.idle = true
		c.out.MarkIdle()
		return
	}
	if heldMin {
		c.emitMin()
	}
}

// Active marks input i active again (I5, I7). It rejoins the minimum at once
// if its watermark is not below the last output, otherwise it stays
// unaligned until a watermark of it reaches the output. If the output was
// idle, MarkActive is sent. No watermark is emitted by this call. Marking an
// active input active does nothing.
func (c *Combiner) Active(i int) {
	s := &c.in[i]
	if s.removed || !s.idle {
		return
	}
	s.idle = false
	c.active++
	if s.wm >= c.last {
		c.push(i)
	}
	if c.idle {
		c.idle = false
		c.out.MarkActive()
	}
}

// Add adds an input and returns its index (I9): a removed input's slot is
// reused if there is one. The new input starts at Min, active and aligned,
// so it holds the output where it is until its own watermark passes it. If
// the output was idle, MarkActive is sent.
func (c *Combiner) Add() int {
	var i int
	if n := len(c.free); n > 0 {
		i = int(c.free[n-1])
		c.free = c.free[:n-1]
	} else {
		i = len(c.in)
		c.in = append(c.in, combinerInput{})
	}
	c.in[i] = combinerInput{wm: Min, pos: -1}
	c.live++
	c.active++
	c.push(i)
	if c.idle {
		c.idle = false
		c.out.MarkActive()
	}
	return i
}

// Remove takes input i out for good (I9), as a finished split: it is marked
// idle (with everything Idle implies), then forgotten. Its slot may be
// reused by a later Add; until then calls for it are ignored. Removing a
// removed input does nothing.
func (c *Combiner) Remove(i int) {
	s := &c.in[i]
	if s.removed {
		return
	}
	c.Idle(i)
	s.removed = true
	c.live--
	c.free = append(c.free, int32(i))
}

// Current returns the last emitted output watermark (Min before any).
func (c *Combiner) Current() int64 { return c.last }

// IsIdle reports whether the output is idle.
func (c *Combiner) IsIdle() bool { return c.idle }

// Len returns the number of inputs that have not been removed.
func (c *Combiner) Len() int { return c.live }

// InputWatermark returns the highest watermark input i has reported (Min if
// none), for metrics.
func (c *Combiner) InputWatermark(i int) int64 { return c.in[i].wm }

// InputIdle reports whether input i is idle (a removed input counts as idle).
func (c *Combiner) InputIdle(i int) bool { return c.in[i].idle }

// idleIfEmpty marks the output idle if no input is left and it is not idle
// yet. Splits uses it for a source subtask without splits (I16).
func (c *Combiner) idleIfEmpty() {
	if c.live == 0 && !c.idle {
		c.idle = true
		c.out.MarkIdle()
	}
}

// emitMin emits the minimum over the aligned inputs if it is above the last
// output.
func (c *Combiner) emitMin() {
	if len(c.heap) == 0 {
		return
	}
	if mutant.On(mutant.CombinerMax) {
		c.flushMax()
		return
	}
	if m := c.in[c.heap[0]].wm; m > c.last {
		if mutant.On(mutant.CombinerEarly) && m < math.MaxInt64 {
			m++
		}
		c.last = m
		c.out.EmitWatermark(m)
	}
}

// flushMax emits the highest watermark over all live inputs if it is above
// the last output.
func (c *Combiner) flushMax() {
	m := c.last
	for k := range c.in {
		if s := &c.in[k]; !s.removed && s.wm > m {
			m = s.wm
		}
	}
	if m > c.last {
		c.last = m
		c.out.EmitWatermark(m)
	}
}

// --- indexed binary min-heap over c.heap, keyed by c.in[x].wm ---

func (c *Combiner) less(a, b int) bool { return c.in[c.heap[a]].wm < c.in[c.heap[b]].wm }

func (c *Combiner) swap(a, b int) {
	h := c.heap
	h[a], h[b] = h[b], h[a]
	c.in[h[a]].pos = int32(a)
	c.in[h[b]].pos = int32(b)
}

func (c *Combiner) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !c.less(j, p) {
			return
		}
		c.swap(j, p)
		j = p
	}
}

func (c *Combiner) down(j int) {
	n := len(c.heap)
	for {
		l := 2*j + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && c.less(r, l) {
			m = r
		}
		if !c.less(m, j) {
			return
		}
		c.swap(j, m)
		j = m
	}
}

func (c *Combiner) push(i int) {
	c.in[i].pos = int32(len(c.heap))
	c.heap = append(c.heap, int32(i))
	c.up(len(c.heap) - 1)
}

func (c *Combiner) remove(j int) {
	last := len(c.heap) - 1
	x := c.heap[j]
	if j != last {
		c.swap(j, last)
	}
	c.heap = c.heap[:last]
	c.in[x].pos = -1
	if j < last {
		c.down(j)
		c.up(j)
	}
}
