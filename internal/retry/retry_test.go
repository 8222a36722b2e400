package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirproject/weir/clock"
)

// drawPolicy draws a policy with a seeded jitter source, so that a failing
// case replays from rapid's seed (R6).
func drawPolicy(t *rapid.T) Policy {
	src := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
	return Policy{
		Initial:    time.Duration(rapid.Int64Range(0, int64(time.Minute)).Draw(t, "initial")),
		Max:        time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "max")),
		Multiplier: rapid.SampledFrom([]float64{0, 1, 1.5, 2, 3, 1e6}).Draw(t, "multiplier"),
		Jitter:     rapid.SampledFrom([]float64{0, 0.1, 0.5, 1}).Draw(t, "jitter"),
		Rand:       src.Int64N,
	}
}

// TestBackoffBounds: every wait lies within the jitter's range of the
// nominal wait (R1, R2), at least a Retry-After (R4), and never beyond the
// cap (R3).
func TestBackoffBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		b := p.Start()
		n := rapid.IntRange(1, 80).Draw(t, "retries")
		for i := 1; i <= n; i++ {
			after := time.Duration(0)
			if rapid.Bool().Draw(t, "serverWait") {
				after = time.Duration(rapid.Int64Range(-int64(time.Hour), 1<<62).Draw(t, "after"))
			}
			d := b.Next(after)
			nominal := p.Delay(i)
			if p.Max > 0 && d > p.Max {
				t.Fatalf("retry %d: wait %v beyond the cap %v", i, d, p.Max)
			}
			if after > nominal {
				// R4: the server's wait, capped (R3).
				if want := min(after, capOr(p.Max, after)); d != want {
					t.Fatalf("retry %d: wait %v, want the server's %v (cap %v)", i, d, want, p.Max)
				}
				continue
			}
			lo := max(nominal-time.Duration(float64(nominal)*p.Jitter), after)
			if d < lo || d > nominal {
				t.Fatalf("retry %d: wait %v outside [%v, %v] (jitter %v, Retry-After %v)", i, d, lo, nominal, p.Jitter, after)
			}
		}
		if b.Retries() != n {
			t.Fatalf("Retries %d after %d waits", b.Retries(), n)
		}
	})
}

func capOr(max, d time.Duration) time.Duration {
	if max > 0 {
		return max
	}
	return d
}

// TestDelayGrowth: the nominal waits grow by Multiplier from Initial,
// saturate at Max and never go back (R1).
func TestDelayGrowth(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		prev := time.Duration(0)
		for n := 1; n <= 100; n++ {
			d := p.Delay(n)
			if d < prev {
				t.Fatalf("Delay(%d) = %v < Delay(%d) = %v", n, d, n-1, prev)
			}
			if p.Max > 0 && d > p.Max {
				t.Fatalf("Delay(%d) = %v beyond the cap %v", n, d, p.Max)
			}
			prev = d
		}
		if p.Delay(1) != min(p.Initial, capOr(p.Max, p.Initial)) {
			t.Fatalf("Delay(1) = %v, Initial %v, Max %v", p.Delay(1), p.Initial, p.Max)
		}
	})
	// The sequence of weir's former hand-written loops: 100ms doubled to a
	// 1s cap (the Kafka connector's retryDelay).
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if d := p.Delay(i + 1); d != w*time.Millisecond {
			t.Fatalf("Delay(%d) = %v, want %v", i+1, d, w*time.Millisecond)
		}
	}
}

// TestSleepOnTheClock: Sleep returns only once the manual clock has been
// advanced by the whole wait, and no timer stays armed (R5).
func TestSleepOnTheClock(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := clock.NewManual(time.Unix(1_000_000, 0))
		d := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "wait"))
		done := make(chan error, 1)
		go func() { done <- Sleep(context.Background(), m, d) }()
		if err := m.AwaitTimers(bounded(t), 1); err != nil {
			t.Fatalf("Sleep armed no timer: %v", err)
		}
		step := time.Duration(rapid.Int64Range(0, int64(d-1)).Draw(t, "short"))
		m.Advance(step)
		select {
		case err := <-done:
			t.Fatalf("Sleep(%v) returned %v after the clock moved %v", d, err, step)
		default:
		}
		m.Advance(d - step)
		if err := <-done; err != nil {
			t.Fatalf("Sleep: %v", err)
		}
	})
}

// TestSleepCancelled: a cancelled context ends Sleep without the clock
// moving, and its timer is stopped (R5).
func TestSleepCancelled(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := clock.NewManual(time.Unix(1_000_000, 0))
		d := time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "wait"))
		ctx, cancel := context.WithCancel(context.Background())
		if rapid.Bool().Draw(t, "cancelledBefore") {
			cancel()
			if err := Sleep(ctx, m, d); !errors.Is(err, context.Canceled) {
				t.Fatalf("Sleep on a done context: %v", err)
			}
		} else if d > 0 {
			done := make(chan error, 1)
			go func() { done <- Sleep(ctx, m, d) }()
			if err := m.AwaitTimers(bounded(t), 1); err != nil {
				t.Fatalf("Sleep armed no timer: %v", err)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Sleep after cancel: %v", err)
			}
		}
		cancel()
		if err := m.AwaitTimers(doneCtx(), 1); err == nil {
			t.Fatal("a timer is still armed after Sleep returned")
		}
	})
}

// bounded is a context that ends a test whose code never arms its timer,
// instead of hanging it.
func bounded(t *rapid.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func doneCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
