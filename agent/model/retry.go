package model

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
)

// RetryPolicy says how a failed call is retried: up to Attempts calls in
// all, waiting Initial before the second, twice as long before each further
// one (at most Max), with jitter (each wait is drawn from [d/2, d]). A
// server's Retry-After, when longer, is honoured (still capped by Max).
// Only Retryable errors are retried; the waits end early when the context
// is done (I4, I6). The back-off is package internal/retry's, measured on
// Clock.
type RetryPolicy struct {
	// Attempts is the number of calls in all; 0 means 4, 1 means no retry.
	Attempts int
	// Initial is the first wait; 0 means 500ms.
	Initial time.Duration
	// Max caps every wait; 0 means 30s.
	Max time.Duration
	// Clock is the clock the waits are measured on. nil means the clock
	// the call's context carries (clock.NewContext: the agent operator's
	// model calls carry the job's weir.Config.Clock, so a job on a manual
	// clock retries when that clock is advanced), else the system clock.
	Clock clock.Clock
	// Sleep, when set, waits for d or until ctx is done instead of a timer
	// on Clock.
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
		c := p.Clock
		p.Sleep = func(ctx context.Context, d time.Duration) error {
			if c == nil {
				return retry.Sleep(ctx, clock.FromContext(ctx), d)
			}
			return retry.Sleep(ctx, c, d)
		}
	}
	return p
}

// backoff is p's waits: doubling from Initial to Max, half of each drawn
// at random.
func (p RetryPolicy) backoff() retry.Backoff {
	return retry.Policy{Initial: p.Initial, Max: p.Max, Jitter: 0.5}.Start()
}

// Do calls f until it succeeds, fails with an error that is not
// Retryable, or the attempts are used up. The error of the last attempt is
// returned wrapped with the number of attempts (errors.As still finds an
// *APIError in it).
func (p RetryPolicy) Do(ctx context.Context, f func(ctx context.Context) (*Response, error)) (*Response, error) {
	return p.do(ctx, nil, f)
}

// do is Do with every attempt let through by l (nil: no limiter). With a
// limiter a 429 pauses l for the wait the server asked for (else the
// back-off) and the attempt is made again through l, up to
// RateLimit.MaxRateLimitedRetries times, without counting against
// p.Attempts: the caller waits instead of failing.
func (p RetryPolicy) do(ctx context.Context, l *Limiter, f func(ctx context.Context) (*Response, error)) (*Response, error) {
	p = p.withDefaults()
	obs := retryObserver(ctx)
	b := p.backoff()
	limited := 0
	for attempt := 1; ; {
		if l != nil {
			if err := l.Acquire(ctx); err != nil {
				return nil, fmt.Errorf("model: cancelled while waiting for the rate limiter: %w", err)
			}
		}
		resp, err := f(ctx)
		if l != nil {
			var u Usage
			if err == nil && resp != nil {
				u = resp.Usage
			}
			l.Release(u)
		}
		if err == nil {
			return resp, nil
		}
		api := (*APIError)(nil)
		errors.As(err, &api)
		if l != nil && api != nil && api.StatusCode == 429 {
			// The limiter's pause is the server's whole Retry-After, not
			// capped by Max: every call sharing l waits it out.
			d := api.RetryAfter
			again := limited < l.max429 && ctx.Err() == nil
			if d <= 0 && again {
				d = b.Next(0)
			}
			l.RateLimited(d)
			if again {
				limited++
				if obs != nil {
					obs(err, d, true)
				}
				continue
			}
		}
		if attempt >= p.Attempts || !Retryable(ctx, err) {
			if attempt > 1 || limited > 0 {
				return nil, fmt.Errorf("model: giving up after %d attempts: %w", attempt+limited, err)
			}
			return nil, err
		}
		var after time.Duration
		if api != nil {
			after = api.RetryAfter
		}
		d := b.Next(after)
		if obs != nil {
			obs(err, d, false)
		}
		if serr := p.Sleep(ctx, d); serr != nil {
			return nil, fmt.Errorf("model: cancelled while waiting to retry (attempt %d failed: %w)", attempt, err)
		}
		attempt++
	}
}

// RetryObserver is told of every retry of a model call made under a
// context carrying it (WithRetryObserver): the error of the attempt that
// failed, the wait before the next, and whether the wait is a rate limit's
// (a 429 waited out through a Limiter). It is called on the caller's
// goroutine, before the wait.
type RetryObserver func(err error, wait time.Duration, rateLimited bool)

type retryObserverCtx struct{}

// WithRetryObserver returns ctx carrying obs: the clients' retry loops
// (RetryPolicy, WithRetry, WithRateLimit) tell it of every retry. The
// agent operator sets one per model call to count retries per model.
func WithRetryObserver(ctx context.Context, obs RetryObserver) context.Context {
	return context.WithValue(ctx, retryObserverCtx{}, obs)
}

func retryObserver(ctx context.Context) RetryObserver {
	obs, _ := ctx.Value(retryObserverCtx{}).(RetryObserver)
	return obs
}

// WithRetry returns m with calls retried by p.
func WithRetry(m ChatModel, p RetryPolicy) ChatModel {
	return Func(func(ctx context.Context, req Request) (*Response, error) {
		return p.Do(ctx, func(ctx context.Context) (*Response, error) { return m.Chat(ctx, req) })
	})
}
