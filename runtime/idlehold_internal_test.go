package runtime

import (
	"testing"

	"pgregory.net/rapid"
)

type holdsFlag struct{ holds bool }

func (h *holdsFlag) Holds() bool { return h.holds }

// TestIdleGateModel checks H1 and H2 against a model over random
// sequences of input status changes, changes of what the operator holds,
// and rechecks (letters and timers running).
func TestIdleGateModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := &holdsFlag{}
		var seen []bool // statuses the operator was told
		g := &idleGate{h: h, deliver: func(idle bool) error { seen = append(seen, idle); return nil }}
		inIdle := false
		opIdle := func() bool { return len(seen) > 0 && seen[len(seen)-1] }
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 2).Draw(t, "what") {
			case 0: // the input's status changes (a combiner reports changes only)
				inIdle = !inIdle
				before := len(seen)
				if err := g.status(inIdle); err != nil {
					t.Fatal(err)
				}
				if inIdle && h.holds && len(seen) != before {
					t.Fatalf("step %d: idle delivered while the operator holds output", i)
				}
				if inIdle && !h.holds && !opIdle() {
					t.Fatalf("step %d: idle withheld from an operator holding nothing", i)
				}
				if !inIdle && opIdle() {
					t.Fatalf("step %d: the operator still sees its active input idle", i)
				}
			case 1: // the operator's holding changes (records, timers)
				h.holds = rapid.Bool().Draw(t, "holds")
			case 2: // letters or timers ran
				if err := g.recheck(); err != nil {
					t.Fatal(err)
				}
				if inIdle && !h.holds && !opIdle() {
					t.Fatalf("step %d: a recheck left idle withheld from an operator holding nothing", i)
				}
			}
			// H1: the operator's view alternates, starting with idle.
			for j := range seen {
				if seen[j] != (j%2 == 0) {
					t.Fatalf("step %d: the operator was told %v twice in a row (%v)", i, seen[j], seen)
				}
			}
			if opIdle() && !inIdle {
				t.Fatalf("step %d: the operator sees idle while its input is active", i)
			}
		}
	})
}
