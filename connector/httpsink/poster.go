package httpsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
)

// Rejection is a request's permanent refusal by the service (S5): the
// records it carried become dead letters.
type Rejection struct {
	Status int    // HTTP status
	Body   string // the first BodyExcerpt bytes of the answer's body
}

// poster sends one request body with retries, back-off, Retry-After and the
// rate limits (S4, S6). It is used by one sink subtask goroutine only.
type poster struct {
	url, method, keyHeader, contentType string
	header                              http.Header
	timeout                             time.Duration
	retry                               Retry
	client                              *http.Client
	clk                                 clock.Clock
	requests, records                   *rate.Limiter // nil: no limit
	// sleep waits d of processing time or until ctx is done (tests
	// replace it to move a manual clock).
	sleep func(ctx context.Context, d time.Duration) error
	// onRetry, if set, counts each retry.
	onRetry func()
}

func newPoster[T any](o Options[T], contentType string, clk clock.Clock) *poster {
	p := &poster{url: o.URL, method: o.Method, keyHeader: o.IdempotencyKeyHeader, contentType: contentType,
		header: o.Header, timeout: o.Timeout, retry: o.Retry, client: o.Client, clk: clk}
	if p.client == nil {
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if p.keyHeader == "-" {
		p.keyHeader = ""
	}
	if o.RequestsPerSecond > 0 {
		p.requests = rate.NewLimiter(rate.Limit(o.RequestsPerSecond), burst(o.Burst, o.RequestsPerSecond, 1))
	}
	if o.RecordsPerSecond > 0 {
		p.records = rate.NewLimiter(rate.Limit(o.RecordsPerSecond), burst(o.Burst, o.RecordsPerSecond, o.batch()))
	}
	p.sleep = p.clockSleep
	return p
}

// burst is the bucket size of a limiter: given, or the rate per second
// (at least least).
func burst(given int, perSecond float64, least int) int {
	if given > 0 {
		return given
	}
	return max(least, int(math.Ceil(perSecond)))
}

func (p *poster) clockSleep(ctx context.Context, d time.Duration) error {
	return retry.Sleep(ctx, p.clk, d)
}

// wait takes n tokens of l, waiting for them in processing time.
func (p *poster) wait(ctx context.Context, l *rate.Limiter, n int) error {
	if l == nil {
		return nil
	}
	now := p.clk.Now()
	r := l.ReserveN(now, n)
	if !r.OK() {
		return fmt.Errorf("httpsink: a request of %d records exceeds the limiter's burst of %d", n, l.Burst())
	}
	return p.sleep(ctx, r.DelayFrom(now))
}

// attemptError is an attempt that may be tried again; retryAfter is the
// wait the server asked for (0: none).
type attemptError struct {
	err        error
	retryAfter time.Duration
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// send posts body (n records) with idempotency key key until the service
// accepts it (nil, nil), refuses it for good (a Rejection), or the attempts
// are used up or ctx is done (an error: the job fails).
func (p *poster) send(ctx context.Context, body []byte, n int, key string) (*Rejection, error) {
	// The back-off (package internal/retry, without jitter: one request
	// in flight per subtask) advances on every retry, a Retry-After or
	// not; a server's Retry-After replaces it, capped by MaxRetryAfter
	// instead of MaxDelay (the server knows when it can take the request).
	b := retry.Policy{Initial: p.retry.InitialDelay, Max: p.retry.MaxDelay}.Start()
	for attempt := 1; ; attempt++ {
		if err := p.wait(ctx, p.requests, 1); err != nil {
			return nil, p.cancelled(err)
		}
		if err := p.wait(ctx, p.records, n); err != nil {
			return nil, p.cancelled(err)
		}
		rej, aerr := p.try(ctx, body, key)
		if aerr == nil {
			return rej, nil
		}
		if ctx.Err() != nil {
			return nil, p.cancelled(ctx.Err())
		}
		if attempt >= p.retry.Attempts {
			return nil, fmt.Errorf("httpsink: %s %s: giving up after %d attempts: %w", p.method, p.url, attempt, aerr)
		}
		d := b.Next(0)
		if aerr.retryAfter > 0 {
			d = min(aerr.retryAfter, p.retry.MaxRetryAfter)
		}
		if p.onRetry != nil {
			p.onRetry()
		}
		if err := p.sleep(ctx, d); err != nil {
			return nil, p.cancelled(err)
		}
	}
}

func (p *poster) cancelled(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("httpsink: cancelled while sending to %s: %w", p.url, err)
	}
	return err
}

// try makes one attempt. It returns (nil, nil) on a 2xx answer, a
// Rejection on a permanent refusal, and an *attemptError when the attempt
// may be tried again.
func (p *poster) try(ctx context.Context, body []byte, key string) (*Rejection, *attemptError) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, p.method, p.url, bytes.NewReader(body))
	if err != nil {
		return &Rejection{Body: err.Error()}, nil // cannot happen with a validated URL
	}
	for k, vs := range p.header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	req.Header.Set("Content-Type", p.contentType)
	if p.keyHeader != "" {
		req.Header.Set(p.keyHeader, key)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// Connection refused or reset, a time-out: the service may or may
		// not have the request; the key makes sending it again safe.
		return nil, &attemptError{err: err} // a *url.Error: names method and URL, never headers
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, BodyExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil, nil
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return nil, &attemptError{err: fmt.Errorf("status %d: %s", s, strings.TrimSpace(string(excerpt))),
			retryAfter: retry.After(resp.Header.Get("Retry-After"), p.clk.Now())}
	default:
		return &Rejection{Status: s, Body: string(excerpt)}, nil
	}
}
