package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestNextDueIsTheEarliestArmedTimer: NextDue follows arming, Reset, Stop
// and firing (I3), and moving the clock only to NextDue fires every timer
// at its own deadline, one deadline at a time.
func TestNextDueIsTheEarliestArmedTimer(t *testing.T) {
	start := time.Unix(1000, 0)
	m := NewManual(start)
	if at, ok := m.NextDue(); ok {
		t.Fatalf("NextDue %v with no timer armed", at)
	}
	a := m.NewTimer(30 * time.Millisecond)
	b := m.NewTimer(10 * time.Millisecond)
	c := m.NewTimer(20 * time.Millisecond)
	want := func(d time.Duration) {
		t.Helper()
		if at, ok := m.NextDue(); !ok || !at.Equal(start.Add(d)) {
			t.Fatalf("NextDue %v, %v: want %v", at.Sub(start), ok, d)
		}
	}
	want(10 * time.Millisecond)
	b.Reset(40 * time.Millisecond) // b is now the latest
	want(20 * time.Millisecond)
	c.Stop()
	want(30 * time.Millisecond)
	c.Reset(5 * time.Millisecond)
	want(5 * time.Millisecond)

	// Step through the deadlines: each step fires exactly the timer due.
	var fired []string
	for _, x := range []struct {
		name string
		t    Timer
	}{{"c", c}, {"a", a}, {"b", b}} {
		at, ok := m.NextDue()
		if !ok {
			t.Fatalf("no timer armed before %s fired", x.name)
		}
		m.Set(at)
		for _, y := range []struct {
			name string
			t    Timer
		}{{"a", a}, {"b", b}, {"c", c}} {
			select {
			case got := <-y.t.C():
				if !got.Equal(at) {
					t.Fatalf("%s fired with %v, the clock at %v", y.name, got.Sub(start), at.Sub(start))
				}
				fired = append(fired, y.name)
			default:
			}
		}
		if len(fired) == 0 || fired[len(fired)-1] != x.name {
			t.Fatalf("after the step to %v: fired %v, want %s last", at.Sub(start), fired, x.name)
		}
	}
	if len(fired) != 3 {
		t.Fatalf("fired %v", fired)
	}
	if at, ok := m.NextDue(); ok {
		t.Fatalf("NextDue %v after every timer fired", at)
	}
}

// TestAwaitDue: AwaitDue returns once a timer due at or before its time is
// armed, not for a later one, and with ctx's error when ctx ends first.
func TestAwaitDue(t *testing.T) {
	start := time.Unix(1000, 0)
	m := NewManual(start)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.AwaitDue(ctx, start.Add(time.Second)); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitDue with no timer armed and a done context: %v", err)
	}
	// With only a later timer armed it waits (a done context makes it
	// return what it would wait on); a timer due at the time itself is
	// enough.
	late := m.NewTimer(11 * time.Millisecond)
	if err := m.AwaitDue(ctx, start.Add(10*time.Millisecond)); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitDue(+10ms) with only a timer due at +11ms armed: %v", err)
	}
	if err := m.AwaitDue(ctx, start.Add(11*time.Millisecond)); err != nil {
		t.Fatalf("AwaitDue(+11ms) with a timer due at +11ms armed: %v", err)
	}
	// A waiter wakes when the timer it waits for is armed.
	done := make(chan error, 1)
	go func() { done <- m.AwaitDue(context.Background(), start.Add(10*time.Millisecond)) }()
	m.NewTimer(10 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	late.Stop()
}

// TestResetAtArmsTheInstant: a timer armed for an instant (ResetAt,
// NewTimerAt) fires when the clock reaches that instant and not before,
// at once for an instant the clock has reached, and its deadline does not
// depend on moves of the clock between the caller's reading and the
// arming (I4).
func TestResetAtArmsTheInstant(t *testing.T) {
	start := time.Unix(1000, 0)
	m := NewManual(start)
	at := start.Add(5 * time.Millisecond)
	tm := NewTimerAt(m, at)
	// The caller read the clock at start; the clock moves before the
	// next arming, which still names the instant.
	m.Set(start.Add(2 * time.Millisecond))
	if armed := ResetAt(m, tm, at); !armed {
		t.Fatal("ResetAt: the timer was armed, it says not")
	}
	if next, ok := m.NextDue(); !ok || !next.Equal(at) {
		t.Fatalf("NextDue %v, %v: want the instant armed, %v", next.Sub(start), ok, at.Sub(start))
	}
	m.Set(at.Add(-time.Millisecond))
	select {
	case <-tm.C():
		t.Fatal("fired before its instant")
	default:
	}
	m.Set(at)
	select {
	case got := <-tm.C():
		if !got.Equal(at) {
			t.Fatalf("fired with %v, want %v", got.Sub(start), at.Sub(start))
		}
	default:
		t.Fatal("did not fire at its instant")
	}
	// An instant the clock has reached fires at once, and leaves nothing
	// armed.
	if armed := ResetAt(m, tm, start); armed {
		t.Fatal("ResetAt: the timer had fired, it says it was armed")
	}
	select {
	case <-tm.C():
	default:
		t.Fatal("an instant in the past did not fire at once")
	}
	if next, ok := m.NextDue(); ok {
		t.Fatalf("NextDue %v after a past instant fired", next.Sub(start))
	}
}
