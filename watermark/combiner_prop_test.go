package watermark

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// model is a deliberately naive reference for the Combiner: plain slices,
// every minimum and maximum recomputed by scanning, no heap, no counters.
// It states the rules of I2-I9 as directly as possible.
type model struct {
	in     []modelInput
	last   int64
	idle   bool
	events []string
}

type modelInput struct {
	wm      int64
	idle    bool
	aligned bool
	removed bool
}

func newModel(n int) *model {
	m := &model{last: Min}
	for range n {
		m.in = append(m.in, modelInput{wm: Min, aligned: true})
	}
	return m
}

func (m *model) anyActive() bool {
	for _, s := range m.in {
		if !s.removed && !s.idle {
			return true
		}
	}
	return false
}

func (m *model) emit(ts int64) {
	m.last = ts
	m.events = append(m.events, wm(ts))
}

// recompute emits the minimum over aligned active inputs if it rose.
func (m *model) recompute() {
	found, lo := false, Max
	for _, s := range m.in {
		if !s.removed && !s.idle && s.aligned {
			found = true
			lo = min(lo, s.wm)
		}
	}
	if found && lo > m.last {
		m.emit(lo)
	}
}

func (m *model) watermark(i int, ts int64) {
	if m.in[i].removed {
		return
	}
	if m.in[i].idle {
		m.active(i)
	}
	s := &m.in[i]
	if ts <= s.wm {
		return
	}
	s.wm = ts
	if !s.aligned && ts >= m.last {
		s.aligned = true
	}
	m.recompute()
}

func (m *model) idleInput(i int) {
	s := &m.in[i]
	if s.removed || s.idle {
		return
	}
	heldMin := s.aligned && s.wm <= m.last
	s.idle, s.aligned = true, false
	if !m.anyActive() {
		if heldMin {
			hi := m.last
			for _, x := range m.in {
				if !x.removed {
					hi = max(hi, x.wm)
				}
			}
			if hi > m.last {
				m.emit(hi)
			}
		}
		m.idle = true
		m.events = append(m.events, "idle")
		return
	}
	if heldMin {
		m.recompute()
	}
}

func (m *model) active(i int) {
	s := &m.in[i]
	if s.removed || !s.idle {
		return
	}
	s.idle = false
	s.aligned = s.wm >= m.last
	if m.idle {
		m.idle = false
		m.events = append(m.events, "active")
	}
}

// add creates input i, which must be a removed slot or the next new one.
func (m *model) add(i int) error {
	switch {
	case i == len(m.in):
		m.in = append(m.in, modelInput{})
	case i < len(m.in) && m.in[i].removed:
	default:
		return fmt.Errorf("Add returned %d, which is neither free nor new (%d slots)", i, len(m.in))
	}
	m.in[i] = modelInput{wm: Min, aligned: true}
	if m.idle {
		m.idle = false
		m.events = append(m.events, "active")
	}
	return nil
}

func (m *model) remove(i int) {
	if m.in[i].removed {
		return
	}
	m.idleInput(i)
	m.in[i].removed = true
}

func (m *model) live() int {
	n := 0
	for _, s := range m.in {
		if !s.removed {
			n++
		}
	}
	return n
}

func (m *model) take() []string {
	e := m.events
	m.events = nil
	return e
}

var tsGen = rapid.OneOf(
	rapid.Int64Range(-3, 12), // small range: many ties and repeats
	rapid.SampledFrom([]int64{Min, Max}),
)

// TestCombinerMatchesModel plays random Watermark/Idle/Active (and
// Add/Remove) sequences over 1..5 inputs against the Combiner and the naive
// model: the emitted sequences must be equal (I2-I9). Independently of the
// model it checks I1 (strictly increasing output), that every emitted value
// was reported by some input, I7 (alternating status, no watermark while
// idle) and that the output is idle exactly when no input is active.
func TestCombinerMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(rt, "n")
		addRemove := rapid.Bool().Draw(rt, "addRemove")
		ops := 5
		if addRemove {
			ops = 7
		}
		r := &recorder{}
		c := NewCombiner(n, r)
		m := newModel(n)
		reported := map[int64]bool{}
		prevOut, outIdle := Min, false
		steps := rapid.IntRange(1, 150).Draw(rt, "steps")
		for k := range steps {
			op := rapid.IntRange(0, ops-1).Draw(rt, "op")
			i := rapid.IntRange(0, len(m.in)-1).Draw(rt, "input")
			var desc string
			switch op {
			case 0, 1, 2: // watermarks are the common case
				ts := tsGen.Draw(rt, "ts")
				desc = fmt.Sprintf("Watermark(%d, %d)", i, ts)
				if !m.in[i].removed {
					reported[ts] = true
				}
				c.Watermark(i, ts)
				m.watermark(i, ts)
			case 3:
				desc = fmt.Sprintf("Idle(%d)", i)
				c.Idle(i)
				m.idleInput(i)
			case 4:
				desc = fmt.Sprintf("Active(%d)", i)
				c.Active(i)
				m.active(i)
			case 5:
				j := c.Add()
				desc = fmt.Sprintf("Add() = %d", j)
				if err := m.add(j); err != nil {
					rt.Fatalf("step %d: %v", k, err)
				}
			case 6:
				desc = fmt.Sprintf("Remove(%d)", i)
				c.Remove(i)
				m.remove(i)
			}
			got, want := r.take(), m.take()
			if !slices.Equal(got, want) {
				rt.Fatalf("step %d %s: combiner emitted %q, model %q", k, desc, got, want)
			}
			for _, e := range got {
				switch e {
				case "idle":
					if outIdle {
						rt.Fatalf("step %d %s: idle while idle", k, desc)
					}
					outIdle = true
				case "active":
					if !outIdle {
						rt.Fatalf("step %d %s: active while active", k, desc)
					}
					outIdle = false
				default:
					var ts int64
					fmt.Sscanf(e, "wm %d", &ts)
					if outIdle {
						rt.Fatalf("step %d %s: watermark %d while idle", k, desc, ts)
					}
					if ts <= prevOut {
						rt.Fatalf("step %d %s: output %d after %d (I1)", k, desc, ts, prevOut)
					}
					if !reported[ts] {
						rt.Fatalf("step %d %s: output %d was never reported by an input", k, desc, ts)
					}
					prevOut = ts
				}
			}
			if c.Current() != prevOut || c.IsIdle() != outIdle {
				rt.Fatalf("step %d %s: Current=%d IsIdle=%v, stream says %d %v",
					k, desc, c.Current(), c.IsIdle(), prevOut, outIdle)
			}
			if c.IsIdle() == m.anyActive() {
				rt.Fatalf("step %d %s: IsIdle=%v but an input active=%v", k, desc, c.IsIdle(), m.anyActive())
			}
			if c.Len() != m.live() {
				rt.Fatalf("step %d %s: Len=%d, want %d", k, desc, c.Len(), m.live())
			}
		}
	})
}

// TestCombinerWithoutIdlenessIsPlainMinimum checks I3 without the model:
// when no input ever goes idle, the output is exactly the minimum over the
// inputs of the highest watermark each reported.
func TestCombinerWithoutIdlenessIsPlainMinimum(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(rt, "n")
		c := NewCombiner(n, &nopOutput{})
		high := make([]int64, n)
		for i := range high {
			high[i] = Min
		}
		for range rapid.IntRange(1, 100).Draw(rt, "steps") {
			i := rapid.IntRange(0, n-1).Draw(rt, "input")
			ts := tsGen.Draw(rt, "ts")
			c.Watermark(i, ts)
			high[i] = max(high[i], ts)
			if want := slices.Min(high); c.Current() != want {
				rt.Fatalf("Current = %d, want min%v = %d", c.Current(), high, want)
			}
		}
	})
}
