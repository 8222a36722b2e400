package httpsink

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

// virtualPoster returns a poster on a manual clock whose sleeps move the
// clock (virtual time) and are recorded.
func virtualPoster(t *testing.T, o Options[int], h http.HandlerFunc) (*poster, *clock.Manual, *[]time.Duration) {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	p := newPoster(o.withDefaults(), "application/json", clk)
	var sleeps []time.Duration
	p.sleep = func(_ context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		clk.Advance(d)
		return nil
	}
	return p, clk, &sleeps
}

// Retry-After is honoured in seconds and as an HTTP date (capped by
// MaxRetryAfter); without it the waits double from InitialDelay up to
// MaxDelay; the key is the same on every try (S4).
func TestRetryAfterAndBackOff(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var clk *clock.Manual
	n := 0
	answers := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n++
		switch n {
		case 1:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", clk.Now().Add(90*time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		case 3:
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
		case 4, 5, 6:
			w.WriteHeader(http.StatusBadGateway)
		case 7:
			w.WriteHeader(http.StatusRequestTimeout)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}
	p, c, sleeps := virtualPoster(t, Options[int]{Retry: Retry{InitialDelay: time.Second, MaxDelay: 3 * time.Second, MaxRetryAfter: time.Minute}}, answers)
	clk = c
	rej, err := p.send(context.Background(), []byte("1"), 1, "k-1")
	if err != nil || rej != nil {
		t.Fatalf("send: %v %v, want accepted", rej, err)
	}
	want := []time.Duration{7 * time.Second, time.Minute, time.Minute, 3 * time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second}
	// The back-off doubles on every retry, Retry-After or not: 1s, 2s, 3s
	// (capped) were the back-offs of tries 1-3, whose waits the server set.
	if len(*sleeps) != len(want) {
		t.Fatalf("waits %v, want %v", *sleeps, want)
	}
	for i := range want {
		if (*sleeps)[i] != want[i] {
			t.Fatalf("waits %v, want %v", *sleeps, want)
		}
	}
	for _, k := range keys {
		if k != "k-1" {
			t.Fatalf("keys %v, want k-1 on every try", keys)
		}
	}
}

// The limiters let through at most burst + rate*t requests (records) in
// any t of processing time; measured in virtual time, so the test does not
// depend on the machine's speed (S6).
func TestRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		o          Options[int]
		perRequest int
		rate       float64
		burst      int
	}{
		{"requests", Options[int]{RequestsPerSecond: 10}, 1, 10, 10},
		{"requests with burst", Options[int]{RequestsPerSecond: 4, Burst: 2}, 1, 4, 2},
		{"records", Options[int]{RecordsPerSecond: 100, Batch: 25}, 25, 100, 100},
		{"records of small rate", Options[int]{RecordsPerSecond: 5, Batch: 20}, 20, 5, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var at []time.Time
			var clk *clock.Manual
			p, c, _ := virtualPoster(t, tc.o, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				at = append(at, clk.Now())
				mu.Unlock()
			})
			clk = c
			l := p.requests
			if l == nil {
				l = p.records
			}
			if l.Burst() != tc.burst || float64(l.Limit()) != tc.rate {
				t.Fatalf("limiter rate %v burst %d, want %v and %d", l.Limit(), l.Burst(), tc.rate, tc.burst)
			}
			start := clk.Now()
			const requests = 60
			for range requests {
				if _, err := p.send(context.Background(), []byte("[]"), tc.perRequest, "k"); err != nil {
					t.Fatal(err)
				}
			}
			// In every window [at[i], at[j]] the count is bounded.
			for i := range at {
				for j := i; j < len(at); j++ {
					units := float64((j - i + 1) * tc.perRequest)
					allowed := float64(tc.burst) + tc.rate*at[j].Sub(at[i]).Seconds() + 1e-9
					if units > allowed {
						t.Fatalf("%v units between %v and %v, the limit allows %v", units, at[i].Sub(start), at[j].Sub(start), allowed)
					}
				}
			}
			// And the limiter is not slower than it must be.
			total := float64(requests*tc.perRequest-tc.burst) / tc.rate
			if got := at[len(at)-1].Sub(start).Seconds(); got > total+1e-6 {
				t.Errorf("the last request went at %.3fs, the limit allows %.3fs", got, total)
			}
		})
	}
}

// A 4xx other than 408 and 429 is a rejection with the body's start.
func TestRejection(t *testing.T) {
	p, _, _ := virtualPoster(t, Options[int]{}, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(strings.Repeat("x", 2*BodyExcerpt)))
	})
	rej, err := p.send(context.Background(), []byte("1"), 1, "k")
	if err != nil || rej == nil || rej.Status != 400 || len(rej.Body) != BodyExcerpt {
		t.Fatalf("send: %+v %v, want a rejection 400 with %d bytes of body", rej, err, BodyExcerpt)
	}
}
