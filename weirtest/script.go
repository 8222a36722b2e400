package weirtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/weirproject/weir/runtime"
)

// StepKind says what a Step does.
type StepKind int

const (
	// Record emits Value with timestamp TS on Split.
	Record StepKind = iota
	// Watermark sets Split's watermark to TS (SourceOutput.EmitWatermark).
	Watermark
	// Idle marks Split idle (SourceOutput.SetSplitIdle(split, true)).
	Idle
	// Active marks Split active again (SourceOutput.SetSplitIdle(split, false)).
	Active
	// Finish ends Split (SourceOutput.FinishSplit): it no longer holds the
	// subtask's watermark.
	Finish
	// Pause makes the subtask's reader return runtime.Wait until the step is
	// released: by Gate.Release when Gate is set, else by closing Release.
	// A Pause step with neither set is a no-op.
	Pause
)

// Wait is another name for Pause.
const Wait = Pause

func (k StepKind) String() string {
	switch k {
	case Record:
		return "record"
	case Watermark:
		return "watermark"
	case Idle:
		return "idle"
	case Active:
		return "active"
	case Finish:
		return "finish"
	case Pause:
		return "pause"
	}
	return fmt.Sprintf("StepKind(%d)", int(k))
}

// Step is one action of a scripted source subtask. Split is the split it
// concerns (ignored by Pause); Value and TS are the record of a Record step,
// TS the watermark of a Watermark step.
type Step[T any] struct {
	Split int
	Kind  StepKind
	Value T
	TS    int64
	// Gate releases a Pause step.
	Gate *Gate
	// Release releases a Pause step without a Gate when it is closed.
	Release <-chan struct{}
}

func (s Step[T]) String() string {
	switch s.Kind {
	case Record:
		return fmt.Sprintf("record(split %d, %v @%d)", s.Split, s.Value, s.TS)
	case Watermark:
		return fmt.Sprintf("watermark(split %d, %d)", s.Split, s.TS)
	case Pause:
		return "pause"
	}
	return fmt.Sprintf("%v(split %d)", s.Kind, s.Split)
}

// Rec returns a Record step: value v with timestamp ts on split.
func Rec[T any](split int, v T, ts int64) Step[T] {
	return Step[T]{Split: split, Kind: Record, Value: v, TS: ts}
}

// WM returns a Watermark step: split's watermark becomes ts.
func WM[T any](split int, ts int64) Step[T] { return Step[T]{Split: split, Kind: Watermark, TS: ts} }

// IdleStep returns a step that marks split idle.
func IdleStep[T any](split int) Step[T] { return Step[T]{Split: split, Kind: Idle} }

// ActiveStep returns a step that marks split active again.
func ActiveStep[T any](split int) Step[T] { return Step[T]{Split: split, Kind: Active} }

// FinishStep returns a step that finishes split.
func FinishStep[T any](split int) Step[T] { return Step[T]{Split: split, Kind: Finish} }

// PauseOn returns a step that pauses the subtask until g is released.
func PauseOn[T any](g *Gate) Step[T] { return Step[T]{Kind: Pause, Gate: g} }

// PauseUntil returns a step that pauses the subtask until ch is closed.
func PauseUntil[T any](ch <-chan struct{}) Step[T] { return Step[T]{Kind: Pause, Release: ch} }

// Gate releases the Pause steps that wait on it. A Gate is released once,
// for good: every Pause step on it, reached before or after the release,
// passes. Its methods are safe for concurrent use.
type Gate struct {
	mu       sync.Mutex
	open     chan struct{} // closed on Release
	arrived  int
	changed  chan struct{} // closed and replaced when arrived changes
	released bool
}

// NewGate returns a closed (not yet released) gate.
func NewGate() *Gate {
	return &Gate{open: make(chan struct{}), changed: make(chan struct{})}
}

// Release opens the gate. Releasing it again does nothing.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.released {
		g.released = true
		close(g.open)
	}
}

// Released reports whether Release was called.
func (g *Gate) Released() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.released
}

// Arrived returns how many Pause steps on g have been reached (by any
// subtask of any script) before the gate was released. A step reached after
// the release does not count.
func (g *Gate) Arrived() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.arrived
}

// WaitArrived blocks until at least n Pause steps have arrived at g, or ctx
// ends (then it returns ctx's error).
func (g *Gate) WaitArrived(ctx context.Context, n int) error {
	for {
		g.mu.Lock()
		a, ch := g.arrived, g.changed
		g.mu.Unlock()
		if a >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("weirtest: %d of %d arrivals at the gate: %w", a, n, ctx.Err())
		}
	}
}

// arrive counts an arrival and reports whether the gate is still closed.
func (g *Gate) arrive() (closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return false
	}
	g.arrived++
	close(g.changed)
	g.changed = make(chan struct{})
	return true
}

// Script returns a source whose subtask i plays perSubtask[i] (a subtask
// beyond the script's length plays nothing and ends at once). The source's
// parallelism should be len(perSubtask). The steps are not copied: do not
// modify them while the job runs.
func Script[T any](perSubtask [][]Step[T]) runtime.Source[T] {
	return runtime.SourceFunc[T](func(ctx runtime.SourceContext) (runtime.Reader[T], error) {
		var steps []Step[T]
		if ctx.Subtask < len(perSubtask) {
			steps = perSubtask[ctx.Subtask]
		}
		return &scriptReader[T]{steps: steps}, nil
	})
}

// stepsPerPoll bounds the steps one Poll plays, so the subtask serves its
// mailbox and timers in between, as a real reader would.
const stepsPerPoll = 64

type scriptReader[T any] struct {
	steps   []Step[T]
	next    int
	started bool
	arrived int // index of the Pause step counted as arrived, +1
	ready   <-chan struct{}
}

func (r *scriptReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if !r.started {
		r.started = true
		seen := map[int]bool{}
		for _, s := range r.steps {
			if s.Kind != Pause && !seen[s.Split] {
				if s.Split < 0 {
					return runtime.Done, fmt.Errorf("weirtest: negative split %d in %v", s.Split, s)
				}
				seen[s.Split] = true
				out.AddSplit(s.Split)
			}
		}
	}
	for n := 0; n < stepsPerPoll; n++ {
		if r.next >= len(r.steps) {
			return runtime.Done, nil
		}
		s := &r.steps[r.next]
		switch s.Kind {
		case Record:
			out.Collect(s.Split, s.Value, s.TS)
		case Watermark:
			out.EmitWatermark(s.Split, s.TS)
		case Idle:
			out.SetSplitIdle(s.Split, true)
		case Active:
			out.SetSplitIdle(s.Split, false)
		case Finish:
			out.FinishSplit(s.Split)
		case Pause:
			if ch := r.pauseChan(s); ch != nil {
				r.ready = ch
				return runtime.Wait, nil
			}
		default:
			return runtime.Done, fmt.Errorf("weirtest: unknown step kind %v", s.Kind)
		}
		r.next++
	}
	return runtime.More, nil
}

// pauseChan returns the channel to wait on for Pause step s, or nil if the
// step is released.
func (r *scriptReader[T]) pauseChan(s *Step[T]) <-chan struct{} {
	if s.Gate != nil {
		if r.arrived != r.next+1 {
			r.arrived = r.next + 1
			if !s.Gate.arrive() {
				return nil
			}
		}
		select {
		case <-s.Gate.open:
			return nil
		default:
			return s.Gate.open
		}
	}
	if s.Release != nil {
		select {
		case <-s.Release:
			return nil
		default:
			return s.Release
		}
	}
	return nil
}

func (r *scriptReader[T]) Ready() <-chan struct{} { return r.ready }
func (r *scriptReader[T]) Close() error           { return nil }
