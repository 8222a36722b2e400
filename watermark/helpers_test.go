package watermark

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// recorder is an Output that records what it receives as readable strings:
// "wm <ts>", "idle", "active".
type recorder struct {
	events []string
}

func (r *recorder) EmitWatermark(ts int64) { r.events = append(r.events, fmt.Sprintf("wm %d", ts)) }
func (r *recorder) MarkIdle()              { r.events = append(r.events, "idle") }
func (r *recorder) MarkActive()            { r.events = append(r.events, "active") }

// take returns the events recorded since the last take.
func (r *recorder) take() []string {
	e := r.events
	r.events = nil
	return e
}

// expect fails the test if the events since the last take differ from want.
func (r *recorder) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	got := r.take()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// nopOutput discards everything; used where allocations are measured.
type nopOutput struct{ n int }

func (o *nopOutput) EmitWatermark(int64) { o.n++ }
func (o *nopOutput) MarkIdle()           { o.n++ }
func (o *nopOutput) MarkActive()         { o.n++ }

// at returns 2024-01-01 h:m:s.milli UTC in Unix milliseconds.
func at(h, m, s, milli int) int64 {
	return time.Date(2024, 1, 1, h, m, s, milli*int(time.Millisecond), time.UTC).UnixMilli()
}

func wm(ts int64) string { return fmt.Sprintf("wm %d", ts) }

// step is one line of a Combiner script: an operation, the input it applies
// to, its argument, and the output events it must produce.
type step struct {
	op   string // "wm", "idle", "active", "add", "remove"
	in   int
	ts   int64
	want []string
}

// runScript plays steps against a fresh Combiner of n inputs.
func runScript(t *testing.T, n int, steps []step) *Combiner {
	t.Helper()
	r := &recorder{}
	c := NewCombiner(n, r)
	for k, s := range steps {
		what := fmt.Sprintf("step %d (%s %d %d)", k, s.op, s.in, s.ts)
		switch s.op {
		case "wm":
			c.Watermark(s.in, s.ts)
		case "idle":
			c.Idle(s.in)
		case "active":
			c.Active(s.in)
		case "add":
			if got := c.Add(); got != s.in {
				t.Fatalf("%s: Add returned %d, want %d", what, got, s.in)
			}
		case "remove":
			c.Remove(s.in)
		default:
			t.Fatalf("bad op %q", s.op)
		}
		r.expect(t, what, s.want...)
	}
	return c
}
