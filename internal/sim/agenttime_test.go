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
