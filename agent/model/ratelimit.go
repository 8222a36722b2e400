package model

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
)

// RateLimit configures a Limiter: how many calls may start per Interval,
// how many tokens they may use per Interval, and how many may be in flight
// at once. The zero value limits nothing but still honours the servers'
// 429s (every call waits out a Retry-After one of them received).
type RateLimit struct {
	// Requests is the most calls let through in any window of Interval
	// (a sliding window: the call after the Requests-th waits until the
	// oldest of the last Requests calls is Interval old). 0 means no limit.
	Requests int
	// Tokens is the token budget per Interval (prompt plus completion
	// tokens, as the replies report them), refilled continuously at
	// Tokens per Interval up to Tokens. A call is let through while the
	// budget is above 0; its reported usage is charged when it returns,
	// so the budget may go below 0 and later calls wait until it refills.
	// 0 means no limit.
	Tokens int
	// Interval is the window of Requests and Tokens; 0 means one minute.
	Interval time.Duration
	// MaxConcurrent bounds the calls in flight at once (waiting for the
	// rate limit included); 0 means no bound.
	MaxConcurrent int
	// MaxRateLimitedRetries bounds how often one call the server answered
	// with 429 is tried again through the limiter (after the wait the
	// server asked for, or the retry policy's back-off when it asked for
	// none); these retries do not count against RetryPolicy.Attempts.
	// 0 means 20; negative means none (a 429 is then retried only as the
	// RetryPolicy says).
	MaxRateLimitedRetries int
	// Clock tells time and arms the waits; nil means clock.Real.
	Clock clock.Clock
}

// The bounds NewLimiter accepts.
const (
	maxLimiterRequests = 1 << 20
	defaultMax429      = 20
)

// Validate reports what is wrong with r (nil if nothing is).
func (r RateLimit) Validate() error {
	var errs []error
	if r.Requests < 0 || r.Requests > maxLimiterRequests {
		errs = append(errs, fmt.Errorf("model: RateLimit.Requests %d: want 0 (no limit) up to %d calls per interval", r.Requests, maxLimiterRequests))
	}
	if r.Tokens < 0 {
		errs = append(errs, fmt.Errorf("model: RateLimit.Tokens %d: want 0 (no limit) or a positive number of tokens per interval", r.Tokens))
	}
	if r.Interval < 0 {
		errs = append(errs, fmt.Errorf("model: RateLimit.Interval %v: want 0 (one minute) or a positive duration", r.Interval))
	}
	if r.MaxConcurrent < 0 {
		errs = append(errs, fmt.Errorf("model: RateLimit.MaxConcurrent %d: want 0 (no bound) or a positive number of calls", r.MaxConcurrent))
	}
	return errors.Join(errs...)
}

// Limiter lets a model's calls through at the rate a RateLimit allows and
// makes every caller wait out a server's 429 (Retry-After; I5). Callers wait
// in the limiter instead of failing: in an agent, an action waiting for its
// model keeps its key's slot, the operator's in-flight limit fills, and the
// operator stops taking input (back-pressure through the stream).
//
// One Limiter stands for one quota: share it among the clients (and
// agents, and subtasks) that draw on the same account and model. It is
// safe for concurrent use.
//
// Design. Request slots are reserved in arrival order: a call computes the
// earliest time it may start (now; the end of a 429 pause; the time the
// oldest of the last Requests reservations leaves the window), records
// that time as its reservation, and sleeps until then. Each waiter so
// wakes once (no herd re-checking a shared condition), reservations are
// non-decreasing, and at most Requests reservations fall in any window of
// Interval. A 429 received while calls sleep on their reservations makes
// them reserve again on waking (the abandoned reservation stays in the
// window: the limiter errs on the side of fewer calls). The token budget
// is checked before a reservation is made. One mutex guards the
// reservations and the budget; it is taken twice per call, which is
// nothing beside the call itself.
type Limiter struct {
	cfg      RateLimit
	interval time.Duration
	clk      clock.Clock
	max429   int
	sem      chan struct{} // nil without MaxConcurrent

	mu struct {
		sync.Mutex
		ring        []time.Time // the last Requests reservations, ring[head] the oldest once full
		head, n     int
		tokens      float64 // budget left (may be negative)
		tokensAt    time.Time
		pausedUntil time.Time
	}

	waiting                   atomic.Int64
	calls, waited, limited429 atomic.Int64
}

// NewLimiter returns a limiter for r, or an error saying what is wrong
// with r.
func NewLimiter(r RateLimit) (*Limiter, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{cfg: r, interval: r.Interval, clk: r.Clock, max429: r.MaxRateLimitedRetries}
	if l.interval == 0 {
		l.interval = time.Minute
	}
	if l.clk == nil {
		l.clk = clock.Real
	}
	if l.max429 == 0 {
		l.max429 = defaultMax429
	}
	if r.MaxConcurrent > 0 {
		l.sem = make(chan struct{}, r.MaxConcurrent)
	}
	if r.Requests > 0 {
		l.mu.ring = make([]time.Time, r.Requests)
	}
	l.mu.tokens = float64(r.Tokens)
	l.mu.tokensAt = l.clk.Now()
	return l, nil
}

// MustLimiter is NewLimiter for limits known to be valid; it panics on an
// invalid one.
func MustLimiter(r RateLimit) *Limiter {
	l, err := NewLimiter(r)
	if err != nil {
		panic(err)
	}
	return l
}

// LimiterStats are a limiter's counts since it was made.
type LimiterStats struct {
	// Calls is the calls let through (every attempt of a retried call).
	Calls int64 `json:"calls"`
	// Waited is the calls that had to wait for the rate, the budget or a
	// 429 pause (not for the concurrency bound alone).
	Waited int64 `json:"waited"`
	// RateLimited is the 429 answers reported to the limiter.
	RateLimited int64 `json:"rateLimited"`
	// Waiting is the calls waiting now (for a concurrency slot, the rate,
	// the budget or a pause).
	Waiting int64 `json:"waiting"`
}

// Stats returns the limiter's counts.
func (l *Limiter) Stats() LimiterStats {
	return LimiterStats{Calls: l.calls.Load(), Waited: l.waited.Load(), RateLimited: l.limited429.Load(), Waiting: l.waiting.Load()}
}

// Acquire waits until a call may start: a concurrency slot, a request slot
// in the window, a positive token budget and the end of any 429 pause. It
// returns ctx's error if ctx ends first (holding nothing then). Every
// successful Acquire must be followed by one Release.
func (l *Limiter) Acquire(ctx context.Context) error {
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	waited := false
	for {
		at, reserved, ok := l.reserve()
		if ok {
			break
		}
		waited = true
		if err := l.sleepUntil(ctx, at); err != nil {
			l.releaseSlot()
			return err
		}
		if reserved && !l.pausedPast(at) {
			break // the reservation made in reserve is this call's
		}
		// A pause or the budget ended, or a 429 came in while this call
		// slept on its reservation: ask again.
	}
	if waited {
		l.waited.Add(1)
	}
	l.calls.Add(1)
	return nil
}

// reserve decides when the call may start. ok means now (a request slot,
// if there is a request limit, was taken at now). Otherwise at is the time
// to sleep until; reserved says a request slot was taken for at, and the
// caller starts then without asking again (unless a 429 pause began
// meanwhile).
func (l *Limiter) reserve() (at time.Time, reserved, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	if l.mu.pausedUntil.After(now) {
		return l.mu.pausedUntil, false, false
	}
	if l.cfg.Tokens > 0 {
		l.refillLocked(now)
		if l.mu.tokens <= 0 {
			perToken := float64(l.interval) / float64(l.cfg.Tokens)
			return now.Add(time.Duration((1 - l.mu.tokens) * perToken)), false, false
		}
	}
	if l.cfg.Requests == 0 {
		return now, false, true
	}
	start := now
	if l.mu.n == len(l.mu.ring) {
		if t := l.mu.ring[l.mu.head].Add(l.interval); t.After(start) {
			start = t
		}
	}
	// Record the reservation (overwriting the oldest once full).
	if l.mu.n < len(l.mu.ring) {
		l.mu.ring[(l.mu.head+l.mu.n)%len(l.mu.ring)] = start
		l.mu.n++
	} else {
		l.mu.ring[l.mu.head] = start
		l.mu.head = (l.mu.head + 1) % len(l.mu.ring)
	}
	return start, true, !start.After(now)
}

func (l *Limiter) refillLocked(now time.Time) {
	if d := now.Sub(l.mu.tokensAt); d > 0 {
		l.mu.tokens = min(float64(l.cfg.Tokens), l.mu.tokens+float64(l.cfg.Tokens)*float64(d)/float64(l.interval))
		l.mu.tokensAt = now
	}
}

// pausedPast reports whether a pause ends after at.
func (l *Limiter) pausedPast(at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.pausedUntil.After(at)
}

func (l *Limiter) sleepUntil(ctx context.Context, at time.Time) error {
	return retry.Sleep(ctx, l.clk, at.Sub(l.clk.Now()))
}

func (l *Limiter) releaseSlot() {
	if l.sem != nil {
		<-l.sem
	}
}

// Release ends a call let through by Acquire and charges the tokens its
// reply reported (zero for a failed call) against the budget.
func (l *Limiter) Release(u Usage) {
	l.releaseSlot()
	if l.cfg.Tokens > 0 {
		if n := u.PromptTokens + u.CompletionTokens; n > 0 {
			l.mu.Lock()
			l.refillLocked(l.clk.Now())
			l.mu.tokens -= float64(n)
			l.mu.Unlock()
		}
	}
}

// RateLimited tells the limiter that the server answered 429 and asked
// for a wait of d (Retry-After; 0 when it named none): no call starts
// before d has passed.
func (l *Limiter) RateLimited(d time.Duration) {
	l.limited429.Add(1)
	if d <= 0 {
		return
	}
	l.mu.Lock()
	if until := l.clk.Now().Add(d); until.After(l.mu.pausedUntil) {
		l.mu.pausedUntil = until
	}
	l.mu.Unlock()
}

// WithRateLimit returns m with every call let through by l (see Limiter):
// it waits for l, and a 429 (an *APIError with status 429) pauses l for
// the wait the server asked for (else one second) and is tried again, up
// to RateLimit.MaxRateLimitedRetries times. Clients with a RateLimit of
// their own (OpenAIConfig.RateLimit, AnthropicConfig.RateLimit) do this
// per attempt of their retry loop; use WithRateLimit for other models.
func WithRateLimit(m ChatModel, l *Limiter) ChatModel {
	p := RetryPolicy{Attempts: 1}
	return Func(func(ctx context.Context, req Request) (*Response, error) {
		return p.do(ctx, l, func(ctx context.Context) (*Response, error) { return m.Chat(ctx, req) })
	})
}
