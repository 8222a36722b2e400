package runtime

import (
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

// TestManualClockResetRacesWithSet: a subtask goroutine re-arms its timer
// (as procTimers.arm does) while the test goroutine moves a manual clock.
// Reset with a non-positive duration sends on the timer's channel; if Set
// delivered the previous arming's fire in between, that send must not block
// the subtask forever.
func TestManualClockResetRacesWithSet(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(0))
	tm := clk.NewTimer(time.Hour)
	stop := make(chan struct{})
	mover := make(chan struct{})
	go func() {
		defer close(mover)
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(time.Millisecond)
			}
		}
	}()
	progress := make(chan int, 1)
	go func() {
		for i := 0; ; i++ {
			tm.Reset(time.Millisecond) // armed: a concurrent Set may fire it
			tm.Reset(0)                // due at once: sends on C
			<-tm.C()
			select {
			case progress <- i:
			default:
			}
			if i == 200000 {
				close(progress)
				return
			}
		}
	}()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-progress:
			if !ok {
				close(stop)
				<-mover
				return
			}
		case <-deadline:
			close(stop)
			t.Fatal("the re-arming goroutine is stuck in Timer.Reset(0): it raced with Manual.Set")
		}
	}
}
