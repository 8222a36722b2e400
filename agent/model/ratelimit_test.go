package model

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirproject/weir/clock"
)

// stepClock is a clock whose timers fire at once, moving the clock to
// their deadline: a caller that waits sees exactly the time it asked for,
// and the waits are recorded (virtual time; nothing sleeps).
type stepClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newStepClock() *stepClock { return &stepClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return firedTimer(ch)
}

func (c *stepClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time        { return t }
func (t firedTimer) Stop() bool                 { return false }
func (t firedTimer) Reset(d time.Duration) bool { return false }

// TestLimiterWindow: sequential calls through a limiter of R requests per
// interval start at k/R intervals (k-th call, integer division): never
// more than R in a window, and never fewer when calls are waiting.
func TestLimiterWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := rapid.IntRange(1, 8).Draw(t, "requests")
		n := rapid.IntRange(1, 40).Draw(t, "calls")
		clk := newStepClock()
		l := MustLimiter(RateLimit{Requests: r, Interval: time.Second, Clock: clk})
		t0 := clk.Now()
		for k := range n {
			if err := l.Acquire(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := clk.Now().Sub(t0), time.Duration(k/r)*time.Second; got != want {
				t.Fatalf("call %d started at +%v, want +%v", k, got, want)
			}
			l.Release(Usage{})
		}
		if s := l.Stats(); s.Calls != int64(n) || s.Waiting != 0 || s.Waited != int64((n-1)/r) {
			t.Fatalf("stats %+v after %d calls", s, n)
		}
	})
}

// TestLimiterTokens: a call is let through while the budget is positive;
// the usage its reply reports is charged, and the next call waits until
// the budget has refilled above zero.
func TestLimiterTokens(t *testing.T) {
	clk := newStepClock()
	l := MustLimiter(RateLimit{Tokens: 100, Interval: time.Second, Clock: clk})
	t0 := clk.Now()
	for range 2 {
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		l.Release(Usage{PromptTokens: 100, CompletionTokens: 50})
	}
	// After the first call the budget is -50: the second waited 0.51s
	// (51 tokens at 100 per second) and took it to 1-150 = -149.
	if err := l.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Release(Usage{})
	// Virtual time, compared to a microsecond (the budget is a float).
	if got := clk.Now().Sub(t0); (got - 2010*time.Millisecond).Abs() > time.Microsecond {
		t.Fatalf("third call at +%v, want +2.01s", got)
	}
}

// TestLimiterConcurrency: MaxConcurrent calls at once, the next waits for
// a release (or its context).
func TestLimiterConcurrency(t *testing.T) {
	l := MustLimiter(RateLimit{MaxConcurrent: 2})
	for range 2 {
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("third call with both slots taken: %v", err)
	}
	l.Release(Usage{})
	if err := l.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Calls != 3 || s.Waiting != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRateLimitValidate(t *testing.T) {
	_, err := NewLimiter(RateLimit{Requests: -1, Tokens: -2, Interval: -time.Second, MaxConcurrent: -3})
	for _, s := range []string{"Requests -1", "Tokens -2", "Interval -1s", "MaxConcurrent -3"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Fatalf("error %v does not name %q", err, s)
		}
	}
}

// TestClientsHonourRetryAfterThroughLimiter: an OpenAI-compatible and an
// Anthropic server on 127.0.0.1 answer 429 with Retry-After, then
// succeed. With a limiter and no retries of its own (Attempts 1), each
// client waits exactly the Retry-After (retry-after-ms where sent), through
// the limiter, and succeeds; the limiter counts the 429.
func TestClientsHonourRetryAfterThroughLimiter(t *testing.T) {
	const rateLimited = `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	cases := []struct {
		name   string
		header map[string]string
		wait   time.Duration
		chat   func(base string, l *Limiter) ChatModel
		path   string
		body   string
	}{
		{"openai Retry-After", map[string]string{"Retry-After": "7"}, 7 * time.Second, func(base string, l *Limiter) ChatModel {
			return OpenAI(OpenAIConfig{BaseURL: base + "/v1", APIKey: "k", Model: "m", Retry: RetryPolicy{Attempts: 1}, RateLimit: l})
		}, "/v1/chat/completions", textReply},
		{"openai retry-after-ms", map[string]string{"Retry-After": "1", "retry-after-ms": "1500"}, 1500 * time.Millisecond, func(base string, l *Limiter) ChatModel {
			return OpenAI(OpenAIConfig{BaseURL: base + "/v1", APIKey: "k", Model: "m", Retry: RetryPolicy{Attempts: 1}, RateLimit: l})
		}, "/v1/chat/completions", textReply},
		{"anthropic Retry-After", map[string]string{"Retry-After": "3"}, 3 * time.Second, func(base string, l *Limiter) ChatModel {
			return Anthropic(AnthropicConfig{BaseURL: base, APIKey: "k", Model: "m", Retry: RetryPolicy{Attempts: 1}, RateLimit: l})
		}, "/v1/messages", anthropicTextReply},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServerAt(t, c.path, reply{status: 429, body: rateLimited, header: c.header}, ok(c.body))
			if !strings.HasPrefix(f.srv.URL, "http://127.0.0.1:") {
				t.Fatalf("server at %s, want 127.0.0.1", f.srv.URL)
			}
			clk := newStepClock()
			l := MustLimiter(RateLimit{Clock: clk})
			var retries []time.Duration
			ctx := WithRetryObserver(context.Background(), func(err error, wait time.Duration, rateLimited bool) {
				if !rateLimited {
					t.Errorf("retry of %v not through the limiter", err)
				}
				retries = append(retries, wait)
			})
			resp, err := c.chat(f.srv.URL, l).Chat(ctx, Request{Messages: []Message{User("hi")}})
			if err != nil || resp.Message.Content != "Paris is sunny." {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if f.requests() != 2 {
				t.Fatalf("%d requests, want 2", f.requests())
			}
			if w := clk.recorded(); len(w) != 1 || w[0] != c.wait {
				t.Fatalf("waited %v, want [%v]", w, c.wait)
			}
			if len(retries) != 1 || retries[0] != c.wait {
				t.Fatalf("observer saw %v", retries)
			}
			if s := l.Stats(); s.RateLimited != 1 || s.Calls != 2 || s.Waited != 1 {
				t.Fatalf("limiter stats %+v", s)
			}
		})
	}
}

// TestRateLimitedRetriesBounded: a server that always answers 429 is
// tried MaxRateLimitedRetries more times, then the 429 reaches the caller.
func TestRateLimitedRetriesBounded(t *testing.T) {
	const rateLimited = `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	f := newFakeServer(t, reply{status: 429, body: rateLimited, header: map[string]string{"Retry-After": "1"}})
	l := MustLimiter(RateLimit{MaxRateLimitedRetries: 3, Clock: newStepClock()})
	m := OpenAI(OpenAIConfig{BaseURL: f.srv.URL + "/v1", APIKey: "k", Model: "m", Retry: RetryPolicy{Attempts: 1}, RateLimit: l})
	_, err := m.Chat(context.Background(), Request{Messages: []Message{User("hi")}})
	var api *APIError
	if !errors.As(err, &api) || api.StatusCode != 429 || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Fatalf("err %v", err)
	}
	if f.requests() != 4 || l.Stats().RateLimited != 4 {
		t.Fatalf("%d requests, stats %+v", f.requests(), l.Stats())
	}
}

// TestWithRateLimit: the wrapper for models without a limiter of their
// own waits out a 429's RetryAfter and tries again.
func TestWithRateLimit(t *testing.T) {
	clk := newStepClock()
	l := MustLimiter(RateLimit{Requests: 10, Clock: clk})
	calls := 0
	m := WithRateLimit(Func(func(ctx context.Context, req Request) (*Response, error) {
		calls++
		if calls == 1 {
			return nil, &APIError{StatusCode: 429, RetryAfter: 2 * time.Second}
		}
		return &Response{Message: Assistant("ok")}, nil
	}), l)
	resp, err := m.Chat(context.Background(), Request{})
	if err != nil || resp.Message.Content != "ok" || calls != 2 {
		t.Fatalf("resp %+v err %v after %d calls", resp, err, calls)
	}
	if w := clk.recorded(); len(w) != 1 || w[0] != 2*time.Second {
		t.Fatalf("waits %v", w)
	}
}
