package watermark

import (
	"testing"
)

// I2: a per-input watermark not above that input's previous one is dropped.
func TestCombinerDropsWatermarkNotAboveInputsLast(t *testing.T) {
	c := runScript(t, 2, []step{
		{op: "wm", in: 0, ts: 10},
		{op: "wm", in: 1, ts: 5, want: []string{wm(5)}},
		{op: "wm", in: 1, ts: 3},                          // backwards: dropped
		{op: "wm", in: 1, ts: 5},                          // equal: dropped
		{op: "wm", in: 0, ts: 4},                          // input 0 stays at 10
		{op: "wm", in: 1, ts: 12, want: []string{wm(10)}}, // proves input 0 kept 10, not 4
	})
	if got := c.InputWatermark(0); got != 10 {
		t.Fatalf("input 0 watermark = %d, want 10", got)
	}
}

// I3, seed example: an operator with two inputs takes the minimum of them,
// and emits only when that minimum rises.
func TestCombinerTwoInputOperatorTakesMinimum(t *testing.T) {
	c := runScript(t, 2, []step{
		{op: "wm", in: 0, ts: at(12, 0, 0, 0)},                                      // input 1 still at Min
		{op: "wm", in: 1, ts: at(12, 1, 0, 0), want: []string{wm(at(12, 0, 0, 0))}}, // min(12:00, 12:01)
		{op: "wm", in: 0, ts: at(12, 3, 0, 0), want: []string{wm(at(12, 1, 0, 0))}},
		{op: "wm", in: 1, ts: at(12, 2, 0, 0), want: []string{wm(at(12, 2, 0, 0))}},
		{op: "wm", in: 1, ts: at(12, 2, 30, 0), want: []string{wm(at(12, 2, 30, 0))}},
		{op: "wm", in: 1, ts: at(12, 9, 0, 0), want: []string{wm(at(12, 3, 0, 0))}}, // input 0 now the minimum
		{op: "wm", in: 1, ts: at(12, 10, 0, 0)},                                     // minimum unchanged: nothing
	})
	if got, want := c.Current(), at(12, 3, 0, 0); got != want {
		t.Fatalf("Current = %d, want %d", got, want)
	}
}

// I4: an idle input leaves the minimum; if it held it, the output advances
// to the minimum of the others.
func TestCombinerIdleInputLeavesMinimum(t *testing.T) {
	t.Run("holding the minimum", func(t *testing.T) {
		runScript(t, 3, []step{
			{op: "wm", in: 0, ts: 10},
			{op: "wm", in: 1, ts: 20},
			{op: "wm", in: 2, ts: 5, want: []string{wm(5)}},
			{op: "idle", in: 2, want: []string{wm(10)}},
			{op: "idle", in: 0, want: []string{wm(20)}},
			{op: "wm", in: 1, ts: 25, want: []string{wm(25)}},
		})
	})
	t.Run("not holding the minimum", func(t *testing.T) {
		runScript(t, 3, []step{
			{op: "wm", in: 0, ts: 10},
			{op: "wm", in: 1, ts: 20},
			{op: "wm", in: 2, ts: 5, want: []string{wm(5)}},
			{op: "idle", in: 1}, // minimum unchanged
			{op: "wm", in: 2, ts: 30, want: []string{wm(10)}},
			{op: "wm", in: 0, ts: 40, want: []string{wm(30)}}, // input 1 (at 20) no longer counts
		})
	})
}

// I5, seed example: an idle source stops holding the minimum and holds it
// again when it returns, but only once it has caught up with the output.
func TestCombinerReturningInputRejoinsOnceCaughtUp(t *testing.T) {
	c := runScript(t, 2, []step{
		{op: "wm", in: 0, ts: 100},
		{op: "wm", in: 1, ts: 50, want: []string{wm(50)}},
		{op: "idle", in: 1, want: []string{wm(100)}},        // stops holding
		{op: "wm", in: 0, ts: 200, want: []string{wm(200)}}, // output follows input 0 alone
		{op: "active", in: 1},                               // back at 50 < 200: unaligned
		{op: "wm", in: 0, ts: 300, want: []string{wm(300)}}, // input 1 does not hold
		{op: "wm", in: 1, ts: 250},                          // still behind the output
		{op: "wm", in: 1, ts: 320},                          // caught up: realigned
		{op: "wm", in: 0, ts: 400, want: []string{wm(320)}}, // input 1 holds the minimum again
		{op: "wm", in: 1, ts: 500, want: []string{wm(400)}},
	})
	if c.IsIdle() {
		t.Fatal("output idle with two active inputs")
	}
}

// I5: an input coming back with a watermark not below the output is aligned
// at once (and emits nothing by becoming active).
func TestCombinerActiveInputNotBehindAlignsAtOnce(t *testing.T) {
	runScript(t, 2, []step{
		{op: "wm", in: 0, ts: 100},
		{op: "wm", in: 1, ts: 100, want: []string{wm(100)}},
		{op: "idle", in: 1},
		{op: "active", in: 1},
		{op: "wm", in: 0, ts: 150}, // input 1 at 100 holds: it is aligned
		{op: "wm", in: 1, ts: 120, want: []string{wm(120)}},
	})
}

// I6: when the last active input goes idle while holding the minimum, the
// output first advances to the maximum over all inputs, then goes idle.
func TestCombinerAllIdleFlushesMaximumWhenLastHeldMinimum(t *testing.T) {
	c := runScript(t, 3, []step{
		{op: "wm", in: 0, ts: 10},
		{op: "wm", in: 1, ts: 30},
		{op: "wm", in: 2, ts: 20, want: []string{wm(10)}},
		{op: "idle", in: 1}, // 30 was not the minimum
		{op: "idle", in: 2}, // 20 was not the minimum
		{op: "idle", in: 0, want: []string{wm(30), "idle"}},
	})
	if !c.IsIdle() || c.Current() != 30 {
		t.Fatalf("IsIdle=%v Current=%d, want idle at 30", c.IsIdle(), c.Current())
	}
	// With nothing higher to flush, only the status changes.
	runScript(t, 1, []step{
		{op: "wm", in: 0, ts: 5, want: []string{wm(5)}},
		{op: "idle", in: 0, want: []string{"idle"}},
	})
}

// I6: Flink flushes only if the input going idle held the minimum. When the
// last active input is an unaligned one (behind the output), the output goes
// idle without advancing, even though an idle input is ahead.
func TestCombinerAllIdleNoFlushWhenLastWasUnaligned(t *testing.T) {
	c := runScript(t, 3, []step{
		{op: "wm", in: 0, ts: 100},
		{op: "wm", in: 1, ts: 200},
		{op: "wm", in: 2, ts: 50, want: []string{wm(50)}},
		{op: "idle", in: 2, want: []string{wm(100)}},
		{op: "active", in: 2}, // 50 < 100: unaligned
		{op: "idle", in: 1},
		{op: "idle", in: 0}, // held the minimum, but input 2 is still active; nothing aligned left
		{op: "idle", in: 2, want: []string{"idle"}},
	})
	if c.Current() != 100 {
		t.Fatalf("Current = %d, want 100 (no flush to 200)", c.Current())
	}
}

// I7: status changes are reported on transitions only, alternating, and
// MarkActive comes before any watermark after idleness.
func TestCombinerStatusTransitions(t *testing.T) {
	r := &recorder{}
	c := NewCombiner(2, r)
	c.Idle(0)
	c.Idle(0)
	r.expect(t, "one of two idle")
	if c.IsIdle() {
		t.Fatal("output idle with an active input")
	}
	c.Idle(1)
	r.expect(t, "both idle", "idle")
	if !c.IsIdle() {
		t.Fatal("output not idle with all inputs idle")
	}
	c.Idle(1)
	r.expect(t, "idle again")
	c.Active(0)
	r.expect(t, "one back", "active")
	c.Active(0)
	c.Active(1)
	r.expect(t, "both back")
	c.Idle(0)
	c.Idle(1)
	r.expect(t, "both idle again", "idle")
	c.Watermark(1, 7)
	r.expect(t, "watermark on idle", "active", wm(7))
}

// I8: a watermark for an idle input makes it active first (unaligned if
// behind), then it is applied.
func TestCombinerWatermarkOnIdleInputActivatesIt(t *testing.T) {
	runScript(t, 2, []step{
		{op: "wm", in: 0, ts: 10},
		{op: "wm", in: 1, ts: 20, want: []string{wm(10)}},
		{op: "idle", in: 0, want: []string{wm(20)}},
		{op: "wm", in: 0, ts: 15},                         // active again, 15 < 20: unaligned
		{op: "wm", in: 1, ts: 40, want: []string{wm(40)}}, // so it does not hold
		{op: "wm", in: 0, ts: 40},                         // caught up: realigned
		{op: "wm", in: 1, ts: 50},                         // input 0 holds at 40
		{op: "wm", in: 0, ts: 45, want: []string{wm(45)}},
	})
	// Even a watermark the input had already passed reactivates it.
	c := runScript(t, 1, []step{
		{op: "wm", in: 0, ts: 5, want: []string{wm(5)}},
		{op: "idle", in: 0, want: []string{"idle"}},
		{op: "wm", in: 0, ts: 3, want: []string{"active"}},
	})
	if c.IsIdle() || c.InputIdle(0) {
		t.Fatal("still idle after a watermark")
	}
}

// I9: an added input starts at Min, active and aligned, so it holds the
// output; a removed input behaves as idle and is then ignored; slots are
// reused.
func TestCombinerAddAndRemove(t *testing.T) {
	c := runScript(t, 2, []step{
		{op: "wm", in: 0, ts: 10},
		{op: "wm", in: 1, ts: 20, want: []string{wm(10)}},
		{op: "add", in: 2},
		{op: "wm", in: 0, ts: 30},                             // new input 2 (at Min) holds
		{op: "wm", in: 2, ts: 5},                              // still below the output
		{op: "wm", in: 2, ts: 25, want: []string{wm(20)}},     // min(30, 20, 25)
		{op: "remove", in: 1, want: []string{wm(25)}},         // it held the minimum
		{op: "remove", in: 1},                                 // twice: nothing
		{op: "wm", in: 1, ts: 100},                            // removed: ignored
		{op: "add", in: 1},                                    // slot reused, at Min
		{op: "idle", in: 0},                                   // 30 did not hold
		{op: "idle", in: 2},                                   // 25 held, but new input 1 is at Min
		{op: "remove", in: 1, want: []string{wm(30), "idle"}}, // last active held the minimum: flush
		{op: "add", in: 1, want: []string{"active"}},
	})
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	// Removing the only input idles the output.
	c = runScript(t, 1, []step{{op: "remove", in: 0, want: []string{"idle"}}})
	if c.Len() != 0 || !c.IsIdle() {
		t.Fatalf("Len=%d IsIdle=%v after removing the only input", c.Len(), c.IsIdle())
	}
}

// I10 and I1: one input is a monotone pass-through.
func TestCombinerSingleInputIsMonotonePassThrough(t *testing.T) {
	r := &recorder{}
	c := NewCombiner(1, r)
	var want []string
	hi := Min
	for _, ts := range []int64{Min, 3, 1, 3, 9, -4, 10, 10, 11} {
		c.Watermark(0, ts)
		if ts > hi {
			hi = ts
			want = append(want, wm(ts))
		}
	}
	r.expect(t, "pass-through", want...)
	if c.Current() != 11 || c.Len() != 1 {
		t.Fatalf("Current=%d Len=%d", c.Current(), c.Len())
	}
}

// I10: Watermark, Idle and Active allocate nothing.
func TestCombinerDoesNotAllocate(t *testing.T) {
	c := NewCombiner(4, &nopOutput{})
	var ts int64
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range 4 {
			ts++
			c.Watermark(i, ts)
		}
		c.Idle(1)
		c.Idle(2)
		c.Active(1)
		c.Watermark(2, ts+1)
	})
	if allocs != 0 {
		t.Fatalf("allocations per run = %v, want 0", allocs)
	}
}

func TestNewCombinerPanicsOnBadArguments(t *testing.T) {
	for name, f := range map[string]func(){
		"negative": func() { NewCombiner(-1, &recorder{}) },
		"nil out":  func() { NewCombiner(1, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}
