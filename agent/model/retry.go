package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how a failed call is retried: up to Attempts calls in
// all, waiting Initial before the second, twice as long before each further
// one (at most Max), with jitter (each wait is drawn from [d/2, d)). A
// server's Retry-After, when longer, is honoured (still capped by Max).
// Only Retryable errors are retried; the waits end early when the context
// is done.
type RetryPolicy struct {
	// Attempts is the number of calls in all; 0 means 4, 1 means no retry.
	Attempts int
	// Initial is the first wait; 0 means 500ms.
	Initial time.Duration
	// Max caps every wait; 0 means 30s.
	Max time.Duration
	// Sleep waits for d or until ctx is done (tests replace it); nil
	// means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = 4
	}
	if p.Initial <= 0 {
		p.Initial = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do calls f until it succeeds, fails with an error that is not
// Retryable, or the attempts are used up. The error of the last attempt is
// returned wrapped with the number of attempts (errors.As still finds an
// *APIError in it).
func (p RetryPolicy) Do(ctx context.Context, f func(ctx context.Context) (*Response, error)) (*Response, error) {
	p = p.withDefaults()
	wait := p.Initial
	for attempt := 1; ; attempt++ {
		resp, err := f(ctx)
		if err == nil {
			return resp, nil
		}
		if attempt >= p.Attempts || !Retryable(ctx, err) {
			if attempt > 1 {
				return nil, fmt.Errorf("model: giving up after %d attempts: %w", attempt, err)
			}
			return nil, err
		}
		d := wait/2 + rand.N(wait/2+1)
		if api := (*APIError)(nil); errors.As(err, &api) && api.RetryAfter > d {
			d = api.RetryAfter
		}
		d = min(d, p.Max)
		if serr := p.Sleep(ctx, d); serr != nil {
			return nil, fmt.Errorf("model: cancelled while waiting to retry (attempt %d failed: %w)", attempt, err)
		}
		wait = min(wait*2, p.Max)
	}
}

// WithRetry returns m with calls retried by p.
func WithRetry(m ChatModel, p RetryPolicy) ChatModel {
	return Func(func(ctx context.Context, req Request) (*Response, error) {
		return p.Do(ctx, func(ctx context.Context) (*Response, error) { return m.Chat(ctx, req) })
	})
}
