package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter returns the wait an HTTP reply's headers ask for before the
// next request, 0 when they name none:
//
//   - retry-after-ms (OpenAI's and Azure's), when it holds a number of
//     milliseconds, wins;
//   - else Retry-After as After reads it, an HTTP-date taken relative to
//     the reply's own Date header when it has a valid one, so that a skew
//     between the server's clock and this process's does not lengthen or
//     shorten the wait, else relative to the system clock.
//
// A value that is negative, not a number (NaN, Inf, garbage) or too long
// for a time.Duration is no wait at all: the caller's own back-off applies.
func RetryAfter(h http.Header) time.Duration {
	if d, ok := parseUnits(h.Get("retry-after-ms"), time.Millisecond); ok {
		return d
	}
	v := h.Get("Retry-After")
	if strings.TrimSpace(v) == "" {
		return 0
	}
	ref, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		ref = time.Now() // lint:allow-time a reply without a Date header: only the system clock relates to the server's
	}
	return After(v, ref)
}

// After returns the wait one Retry-After value asks for, as of ref:
// delay-seconds (RFC 9110 10.2.3; a decimal fraction such as "1.5" is
// accepted too), or an HTTP-date (the three forms http.ParseTime reads)
// less ref. It is 0 for an empty value, a date not after ref, and a value
// that is negative, not a number (NaN, Inf, garbage) or too long for a
// time.Duration: the caller's own back-off applies. Callers that simulate
// a service on a manual clock (the HTTP sink) pass that clock's time as
// ref, so that the service and the client agree on dates.
func After(v string, ref time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if d, ok := parseUnits(v, time.Second); ok {
		return d
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return max(0, at.Sub(ref))
}

// parseUnits reads s as a non-negative decimal number of unit; ok is false
// when it is not one or does not fit a time.Duration.
func parseUnits(s string, unit time.Duration) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	ns := f * float64(unit)
	if ns >= math.MaxInt64 {
		return 0, false
	}
	return time.Duration(ns), true
}
