package sim

import (
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

// TestWallClockStepsBackUnderMonotonicTimers checks the model of an NTP
// step: Now goes back, a timer armed before the step fires after its
// duration (at a wall time behind its deadline), and reached remembers the
// latest reading.
func TestWallClockStepsBackUnderMonotonicTimers(t *testing.T) {
	m := clock.NewManual(time.UnixMilli(1000))
	w := newWallClock(m)
	tm := w.NewTimer(100 * time.Millisecond) // due at wall 1100
	m.Advance(50 * time.Millisecond)
	if got := w.Now().UnixMilli(); got != 1050 {
		t.Fatalf("Now = %d, want 1050", got)
	}
	w.stepBack(30 * time.Millisecond)
	if got := w.Now().UnixMilli(); got != 1020 {
		t.Fatalf("after a step back of 30ms, Now = %d, want 1020", got)
	}
	if !w.reached(1050) || w.reached(1051) {
		t.Fatalf("reached: the latest reading was 1050")
	}
	m.Advance(50 * time.Millisecond) // 100ms of monotonic time
	select {
	case <-tm.C():
	default:
		t.Fatal("the timer did not fire after its duration")
	}
	if got := w.Now().UnixMilli(); got != 1070 {
		t.Fatalf("Now = %d, want 1070 (the timer fired behind its wall deadline)", got)
	}
}

// TestClockBackKeepsOtherDraws checks that the steps back come only in
// seeds with processing-time timers, one per clock step.
func TestClockBackKeepsOtherDraws(t *testing.T) {
	n := 0
	for seed := uint64(1); seed <= 400; seed++ {
		s := Generate(seed)
		if s.ClockBackMS == nil {
			continue
		}
		n++
		if s.ProcDelayMS == 0 || len(s.ClockBackMS) != len(s.ClockSteps) {
			t.Fatalf("seed %d: steps back %v with proc delay %d and steps %v", seed, s.ClockBackMS, s.ProcDelayMS, s.ClockSteps)
		}
	}
	if n == 0 {
		t.Fatal("no seed of 1-400 steps the clock back")
	}
}
