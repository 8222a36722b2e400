package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

// TestAgentTimeAdvancesWhenEveryActionWaits: a hung call's deadline
// passes in virtual time once every running action waits for virtual
// time, and not while another action runs.
func TestAgentTimeAdvancesWhenEveryActionWaits(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	var at agentTime
	at.setClock(clk)
	at.actionStarted() // the hung action
	at.actionStarted() // another one, running
	ctx, cancel := clock.WithTimeout(context.Background(), clk, 20*time.Millisecond)
	defer cancel()
	hung := make(chan struct{})
	go func() {
		at.waitDeadline(ctx, 20*time.Millisecond)
		close(hung)
	}()
	// The hung call registers, but the other action runs: no move.
	for {
		at.mu.Lock()
		b := at.mu.blocked
		at.mu.Unlock()
		if b == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if got := clk.Now(); !got.Equal(time.UnixMilli(1_000_000)) || at.advances() != 0 {
		t.Fatalf("the clock moved to %v while an action was running", got)
	}
	at.actionEnded()
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung call's deadline never passed")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !clk.Now().Equal(time.UnixMilli(1_000_020)) || at.advances() != 1 {
		t.Fatalf("err %v, clock %v, %d moves: want the deadline passed at +20ms, one move", ctx.Err(), clk.Now().UnixMilli(), at.advances())
	}
	at.actionEnded()
}

// TestAgentTimeStepsToTheArmedTimers: once every running action is
// blocked, the clock moves to the armed timers' deadlines, one at a time
// and never past the blocked call's bound; a wake-up armed before the
// bound (a time-out timer armed early) fires there, not at the bound; a
// wake-up not armed yet is waited for.
func TestAgentTimeStepsToTheArmedTimers(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	clk := clock.NewManual(start)
	var at agentTime
	at.setClock(clk)
	tick := clk.NewTimer(3 * time.Millisecond)    // a flush tick, say
	later := clk.NewTimer(500 * time.Millisecond) // past the bound: never reached
	defer later.Stop()
	at.actionStarted()
	release := at.block(10 * time.Millisecond) // a wait of 10ms, its timer not armed yet
	select {
	case <-tick.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the tick before the bound never fired")
	}
	if got := clk.Now().Sub(start); got != 3*time.Millisecond {
		t.Fatalf("the clock at +%v with only a tick at +3ms armed before the bound: want +3ms", got)
	}
	// The wait's time-out timer, armed a millisecond early: the clock
	// moves to it, and stops there.
	early := clk.NewTimer(6 * time.Millisecond)
	select {
	case fired := <-early.C():
		if got := fired.Sub(start); got != 9*time.Millisecond {
			t.Fatalf("the early time-out fired at +%v, want +9ms", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the armed wake-up never fired")
	}
	if got := clk.Now().Sub(start); got != 9*time.Millisecond {
		t.Fatalf("the clock at +%v after the early time-out: want +9ms (not the bound, +10ms)", got)
	}
	release()
	at.actionEnded()
	if got, n := clk.Now().Sub(start), at.advances(); got != 9*time.Millisecond || n != 2 {
		t.Fatalf("the clock at +%v after %d moves: want +9ms, 2", got, n)
	}
	// With no timer armed by the bound, the clock goes no further than
	// the bound once the call's wake-up fires there.
	at.actionStarted()
	release = at.block(5 * time.Millisecond)
	wake := clk.NewTimer(5 * time.Millisecond)
	<-wake.C()
	release()
	at.actionEnded()
	if got := clk.Now().Sub(start); got != 14*time.Millisecond {
		t.Fatalf("the clock at +%v: want +14ms", got)
	}
}
