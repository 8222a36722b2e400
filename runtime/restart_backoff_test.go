package runtime

import (
	"testing"
	"time"
)

// TestRestartBackoffPauses: the exponential strategy's pauses start at
// Delay, grow by Multiplier up to MaxDelay, and start again after a run
// that lasted ResetAfter.
func TestRestartBackoffPauses(t *testing.T) {
	r := RestartStrategy{Kind: RestartExponentialBackoff, Attempts: 10, Delay: time.Second, MaxDelay: 10 * time.Second, Multiplier: 3, ResetAfter: time.Minute}
	var st restartState
	want := []time.Duration{1, 3, 9, 10, 10}
	for i, w := range want {
		d, ok := r.next(&st, time.Second)
		if !ok || d != w*time.Second {
			t.Fatalf("restart %d: pause %v (ok %v), want %v", i+1, d, ok, w*time.Second)
		}
	}
	if d, _ := r.next(&st, time.Minute); d != time.Second {
		t.Fatalf("after a run of ResetAfter: pause %v, want Delay again", d)
	}
	r.Attempts = 2
	st = restartState{}
	r.next(&st, 0)
	r.next(&st, 0)
	if _, ok := r.next(&st, 0); ok {
		t.Fatal("a third restart in a row allowed with Attempts 2")
	}
}
