package retry

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/weirproject/weir/clock"
)

// Policy is a capped exponential back-off with jitter. The zero value
// retries at once (Initial 0). A Policy is a value: it is safe to share
// between goroutines if Rand is.
type Policy struct {
	// Initial is the nominal wait before the first retry. 0 means no wait
	// (every nominal wait is then 0; a Retry-After still applies).
	Initial time.Duration
	// Max caps every wait, Retry-After included (R3). 0 means no cap.
	Max time.Duration
	// Multiplier is the growth of the nominal wait after each retry; 0
	// means 2. Values below 1 are taken as 1 (a back-off never shrinks).
	Multiplier float64
	// Jitter is the fraction of each nominal wait that is drawn at random
	// (R2): 0.5 draws from [d/2, d]. 0 means none; values are clamped to
	// [0, 1].
	Jitter float64
	// Rand returns a uniform integer in [0, n) for n > 0; it must be safe
	// for concurrent use if the Policy is shared. nil means math/rand/v2's
	// global source.
	Rand func(n int64) int64
}

// Start returns a fresh run of retries under p.
func (p Policy) Start() Backoff { return Backoff{p: p, nominal: p.Initial} }

// Delay returns the nominal wait before the n-th retry (n from 1; n < 1 is
// taken as 1), without jitter (R1).
func (p Policy) Delay(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n; i++ {
		next := p.grow(d)
		if next == d {
			break // at the cap, or not growing: it stays there
		}
		d = next
	}
	return p.capped(d)
}

// grow is the nominal wait after d: d × Multiplier, saturating at Max (or
// at the largest Duration without a cap).
func (p Policy) grow(d time.Duration) time.Duration {
	m := p.Multiplier
	if m == 0 {
		m = 2
	}
	if m < 1 || math.IsNaN(m) {
		m = 1
	}
	limit := time.Duration(math.MaxInt64)
	if p.Max > 0 {
		limit = p.Max
	}
	if f := float64(d) * m; f < float64(limit) {
		return time.Duration(f)
	}
	return limit
}

func (p Policy) capped(d time.Duration) time.Duration {
	if p.Max > 0 && d > p.Max {
		return p.Max
	}
	return d
}

func (p Policy) jitter(d time.Duration) time.Duration {
	j := min(max(p.Jitter, 0), 1)
	if j == 0 || d <= 0 {
		return d
	}
	span := int64(float64(d) * j)
	if span <= 0 {
		return d
	}
	n := rand.Int64N // the default jitter source: Policy.Rand replaces it (R6)
	if p.Rand != nil {
		n = p.Rand
	}
	return d - time.Duration(span) + time.Duration(n(span+1))
}

// Backoff is one run of retries under a Policy: the waits before the
// attempts of one call. It is used by one goroutine.
type Backoff struct {
	p       Policy
	nominal time.Duration
	retries int
}

// Next returns the wait before the next retry and advances the back-off:
// the nominal wait with jitter (R1, R2), or after, the wait a server asked
// for, when that is longer (R4), capped by Max (R3). after <= 0 means the
// server named none.
func (b *Backoff) Next(after time.Duration) time.Duration {
	d := b.p.jitter(b.p.capped(b.nominal))
	if after > d {
		d = after
	}
	b.nominal = b.p.grow(b.nominal)
	b.retries++
	return b.p.capped(d)
}

// Retries returns how many waits Next has handed out.
func (b *Backoff) Retries() int { return b.retries }

// Sleep waits until d has elapsed on c (nil means clock.Real) or ctx is
// done, whichever comes first, and returns nil or ctx.Err() (R5).
func Sleep(ctx context.Context, c clock.Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if c == nil {
		c = clock.Real
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
