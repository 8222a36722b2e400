package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func armed(m *Manual) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.timers)
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// waitDone waits for ctx's Done (closed by its goroutine after the clock's
// timer fired), bounded so that a context that never ends fails the test.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context is not done")
	}
}

func TestWithTimeoutManual(t *testing.T) {
	m := NewManual(time.Unix(1000, 0))
	ctx, cancel := WithTimeout(context.Background(), m, time.Hour)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a deadline on a manual clock is reported to the system clock")
	}
	m.Advance(time.Hour - time.Millisecond)
	if isDone(ctx) || ctx.Err() != nil {
		t.Fatalf("done before the time-out: %v", ctx.Err())
	}
	m.Advance(time.Millisecond)
	waitDone(t, ctx)
	waitDone(t, child)
	for name, c := range map[string]context.Context{"ctx": ctx, "child": child} {
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
			t.Fatalf("%s: Err %v, Cause %v, want context.DeadlineExceeded", name, c.Err(), context.Cause(c))
		}
	}
}

func TestWithTimeoutManualCancelled(t *testing.T) {
	m := NewManual(time.Unix(1000, 0))
	parent, cancelParent := context.WithCancel(context.Background())
	byParent, cancel1 := WithTimeout(parent, m, time.Minute)
	defer cancel1()
	byCancel, cancel2 := WithTimeout(context.Background(), m, time.Minute)
	cancel2()
	// C1: the CancelFunc has returned, so its timer is stopped.
	if n := armed(m); n != 1 {
		t.Fatalf("%d timers armed after one of two contexts was cancelled, want 1", n)
	}
	if !errors.Is(byCancel.Err(), context.Canceled) {
		t.Fatalf("Err after cancel: %v", byCancel.Err())
	}
	cancelParent()
	waitDone(t, byParent)
	if !errors.Is(byParent.Err(), context.Canceled) {
		t.Fatalf("Err after the parent's cancel: %v", byParent.Err())
	}
	m.Advance(time.Hour)
	if !errors.Is(byParent.Err(), context.Canceled) || !errors.Is(byCancel.Err(), context.Canceled) {
		t.Fatalf("Err changed when the time-out passed: %v, %v", byParent.Err(), byCancel.Err())
	}
	if n := armed(m); n != 0 {
		t.Fatalf("%d timers armed after both contexts ended", n)
	}
}

func TestWithTimeoutRealIsContextWithTimeout(t *testing.T) {
	for _, c := range []Clock{nil, Real} {
		ctx, cancel := WithTimeout(context.Background(), c, time.Hour)
		if _, ok := ctx.Deadline(); !ok {
			t.Fatalf("%v: no deadline on the real clock", c)
		}
		cancel()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("%v: Err after cancel: %v", c, ctx.Err())
		}
	}
	ctx, cancel := WithTimeout(context.Background(), Real, time.Nanosecond)
	defer cancel()
	waitDone(t, ctx)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err: %v", ctx.Err())
	}
}

func TestAwaitTimers(t *testing.T) {
	m := NewManual(time.Unix(1000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.AwaitTimers(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitTimers with no timer armed and a done context: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.AwaitTimers(context.Background(), 2) }()
	t1 := m.NewTimer(time.Second)
	select {
	case err := <-done:
		t.Fatalf("AwaitTimers(2) returned with one timer armed: %v", err)
	default:
	}
	m.NewTimer(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.Advance(time.Second) // t1 fires: one left armed
	<-t1.C()
	if err := m.AwaitTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if n := armed(m); n != 1 {
		t.Fatalf("%d timers armed, want 1", n)
	}
}
