package model

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

// TestRetryWaitsOnTheContextsClock: WithRetry's back-off is measured on
// the clock the call's context carries (the agent operator's model calls
// carry the job's clock), or on RetryPolicy.Clock: with a manual clock the
// second attempt is made only once the clock has been advanced past the
// wait, never in real time.
func TestRetryWaitsOnTheContextsClock(t *testing.T) {
	for _, onPolicy := range []bool{false, true} {
		clk := clock.NewManual(time.Unix(1_000_000, 0))
		var calls atomic.Int32
		flaky := Func(func(ctx context.Context, req Request) (*Response, error) {
			if calls.Add(1) == 1 {
				return nil, &APIError{StatusCode: 503, Message: "overloaded"}
			}
			return &Response{Message: Message{Role: RoleAssistant, Content: "ok"}}, nil
		})
		p := RetryPolicy{Attempts: 2, Initial: time.Hour, Max: time.Hour}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if onPolicy {
			p.Clock = clk
		} else {
			ctx = clock.NewContext(ctx, clk)
		}
		m := WithRetry(flaky, p)
		done := make(chan error, 1)
		go func() {
			_, err := m.Chat(ctx, Request{})
			done <- err
		}()
		if err := clk.AwaitTimers(ctx, 1); err != nil {
			t.Fatalf("clock on policy %v: the retry armed no timer on the manual clock: %v", onPolicy, err)
		}
		// The wait is drawn from [30m, 1h]: not yet due half an hour less
		// a nanosecond later.
		clk.Advance(30*time.Minute - time.Nanosecond)
		select {
		case err := <-done:
			t.Fatalf("clock on policy %v: the call returned (%v) before the clock reached the back-off", onPolicy, err)
		default:
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("clock on policy %v: %d attempts before the clock was advanced, want 1", onPolicy, n)
		}
		clk.Advance(30 * time.Minute)
		if err := <-done; err != nil {
			t.Fatalf("clock on policy %v: %v", onPolicy, err)
		}
		if n := calls.Load(); n != 2 {
			t.Fatalf("clock on policy %v: %d attempts, want 2", onPolicy, n)
		}
		cancel()
	}
}
