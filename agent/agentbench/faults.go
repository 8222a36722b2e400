package agentbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir/agent/model"
)

// Faults are the failures injected into the workload's model calls, the
// same in both model modes: the offline model answers with the errors the
// OpenAI client would return, the fake server (FakeOpenAI) with the HTTP
// replies that make the client return them. The zero value injects none.
//
// Which attempt fails is decided by the request (its hash under the seed,
// model.Offline.Hash) and the number of attempts of that request seen so
// far, never by timing: the same workload and seed fail the same attempts
// in every run and both modes.
type Faults struct {
	// RateLimitRate is the fraction of attempts answered 429 with a
	// Retry-After of RetryAfter (0 to 1).
	RateLimitRate float64 `json:"rateLimitRate,omitempty"`
	// ErrorRate is the fraction of attempts that fail with a transient
	// error: half HTTP 500, half a connection dropped in the middle of the
	// reply (0 to 1, RateLimitRate + ErrorRate at most 1).
	ErrorRate float64 `json:"errorRate,omitempty"`
	// RetryAfter is the 429's Retry-After (sent as retry-after-ms and
	// Retry-After); 0 means one second.
	RetryAfter time.Duration `json:"retryAfterNs,omitempty"`
	// MaxInARow bounds the failed attempts of one request: its attempts
	// after that many failures succeed, so every call succeeds within the
	// client's retry budget and a run answers every input. Run sets it to
	// the retry policy's attempts less one; 0 means 3.
	MaxInARow int `json:"maxInARow,omitempty"`
}

// Validate says what is wrong with f, if anything.
func (f Faults) Validate() error {
	var errs []error
	if !(f.RateLimitRate >= 0 && f.RateLimitRate <= 1) {
		errs = append(errs, fmt.Errorf("agentbench: rate-limit rate %v: want a fraction from 0 to 1", f.RateLimitRate))
	}
	if !(f.ErrorRate >= 0 && f.ErrorRate <= 1) {
		errs = append(errs, fmt.Errorf("agentbench: error rate %v: want a fraction from 0 to 1", f.ErrorRate))
	}
	if f.RateLimitRate+f.ErrorRate > 1 {
		errs = append(errs, fmt.Errorf("agentbench: rate-limit rate %v + error rate %v: want at most 1 together", f.RateLimitRate, f.ErrorRate))
	}
	if f.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("agentbench: Retry-After %v: want 0 (one second) or a positive duration", f.RetryAfter))
	}
	return errors.Join(errs...)
}

func (f Faults) withDefaults() Faults {
	if f.RetryAfter <= 0 {
		f.RetryAfter = time.Second
	}
	if f.MaxInARow <= 0 {
		f.MaxInARow = 3
	}
	return f
}

// fault is what one attempt gets.
type fault int

const (
	noFault fault = iota
	faultRateLimited
	faultServerError
	faultDropped
)

// FaultCounts are the attempts an injector saw and the faults it injected.
type FaultCounts struct {
	// Attempts is every attempt (request) the model or server got.
	Attempts int64 `json:"attempts"`
	// RateLimited, ServerErrors and Dropped are the attempts answered 429,
	// 500, and with a connection dropped mid-reply.
	RateLimited  int64 `json:"rateLimited"`
	ServerErrors int64 `json:"serverErrors"`
	Dropped      int64 `json:"dropped"`
}

// Faulted is the number of failed attempts.
func (c FaultCounts) Faulted() int64 { return c.RateLimited + c.ServerErrors + c.Dropped }

// injector decides the fault of each attempt (see Faults).
type injector struct {
	f    Faults
	seed uint64
	mu   struct {
		sync.Mutex
		attempts map[uint64]int // attempts per request hash
	}
	attempts, rateLimited, serverErrors, dropped atomic.Int64
}

func newInjector(f Faults, seed int64) *injector {
	j := &injector{f: f.withDefaults(), seed: uint64(seed)}
	j.mu.attempts = map[uint64]int{}
	return j
}

// next returns the fault of the next attempt of the request with hash h.
func (j *injector) next(h uint64) fault {
	j.attempts.Add(1)
	if j.f.RateLimitRate == 0 && j.f.ErrorRate == 0 {
		return noFault
	}
	j.mu.Lock()
	k := j.mu.attempts[h]
	j.mu.attempts[h] = k + 1
	j.mu.Unlock()
	if k >= j.f.MaxInARow {
		return noFault
	}
	x := mix(h ^ mix(j.seed+uint64(k)*0x9E3779B97F4A7C15))
	u := float64(x>>11) / (1 << 53)
	switch {
	case u < j.f.RateLimitRate:
		j.rateLimited.Add(1)
		return faultRateLimited
	case u < j.f.RateLimitRate+j.f.ErrorRate:
		if x&1 == 0 {
			j.serverErrors.Add(1)
			return faultServerError
		}
		j.dropped.Add(1)
		return faultDropped
	}
	return noFault
}

func (j *injector) counts() FaultCounts {
	return FaultCounts{Attempts: j.attempts.Load(), RateLimited: j.rateLimited.Load(),
		ServerErrors: j.serverErrors.Load(), Dropped: j.dropped.Load()}
}

// mix is SplitMix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// faultyOffline is the offline model with the injector's faults, returned
// as the errors the OpenAI client returns for them: an *model.APIError
// 429 with RetryAfter, a 500, and a connection error for a dropped reply.
type faultyOffline struct {
	m *model.Offline
	j *injector
}

func (f *faultyOffline) Chat(ctx context.Context, req model.Request) (*model.Response, error) {
	switch f.j.next(f.m.Hash(req)) {
	case faultRateLimited:
		return nil, &model.APIError{StatusCode: 429, Type: "requests", Code: "rate_limit_exceeded",
			Message: "injected rate limit", Endpoint: "offline", RetryAfter: f.j.f.RetryAfter}
	case faultServerError:
		return nil, &model.APIError{StatusCode: 500, Type: "server_error", Message: "injected server error", Endpoint: "offline"}
	case faultDropped:
		return nil, fmt.Errorf("agentbench: offline: injected dropped connection: %w", io.ErrUnexpectedEOF)
	}
	return f.m.Chat(ctx, req)
}

// ExpectedActionTime is the mean time of one action of the workload (one
// model call) when nothing but the call takes time and every attempt
// fails independently as f says: the sum over the attempts a call makes
// of their probability times their cost, where a successful attempt costs
// meanLatency, a 429 costs f.RetryAfter (the wait the limiter makes the
// call do), and a transient error costs the retry policy's mean back-off
// before the next attempt (the jittered wait drawn from [w/2, w] has mean
// 3w/4, w doubling from p.Initial up to p.Max with every error retry);
// failed attempts themselves take no time (the fake server answers them
// at once). Attempts after f.MaxInARow failures succeed.
//
// It ignores that a 429 pauses the shared limiter for every call, not only
// the one that got it: the gap between the ideal this gives and the
// throughput measured is that pause's cost (and the runtime's).
func ExpectedActionTime(meanLatency time.Duration, f Faults, p model.RetryPolicy) time.Duration {
	f = f.withDefaults()
	initial, maxWait := p.Initial, p.Max
	if initial <= 0 {
		initial = 500 * time.Millisecond
	}
	if maxWait <= 0 {
		maxWait = 30 * time.Second
	}
	// reach[e] is the probability of reaching attempt k after e error
	// retries (and k-e 429s).
	reach := []float64{1}
	var t float64
	for k := 0; k <= f.MaxInARow; k++ {
		pFail429, pFailErr := f.RateLimitRate, f.ErrorRate
		if k == f.MaxInARow {
			pFail429, pFailErr = 0, 0
		}
		next := make([]float64, len(reach)+1)
		for e, pr := range reach {
			if pr == 0 {
				continue
			}
			w := min(float64(initial)*float64(uint64(1)<<e), float64(maxWait))
			t += pr * ((1-pFail429-pFailErr)*float64(meanLatency) + pFail429*float64(f.RetryAfter) + pFailErr*0.75*w)
			next[e] += pr * pFail429
			next[e+1] += pr * pFailErr
		}
		reach = next
	}
	return time.Duration(t)
}
