package retry

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestRetryAfter(t *testing.T) {
	date := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	for _, c := range []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", h(), 0},
		{"seconds", h("Retry-After", "7"), 7 * time.Second},
		{"seconds with spaces", h("Retry-After", " 7 "), 7 * time.Second},
		{"zero", h("Retry-After", "0"), 0},
		{"fraction", h("Retry-After", "1.5"), 1500 * time.Millisecond},
		{"negative", h("Retry-After", "-3"), 0},
		{"garbage", h("Retry-After", "soon"), 0},
		{"NaN", h("Retry-After", "NaN"), 0},
		{"Inf", h("Retry-After", "+Inf"), 0},
		{"too long for a Duration", h("Retry-After", "1e10"), 0},
		{"out of float range", h("Retry-After", "1e400"), 0},
		{"milliseconds win", h("Retry-After", "1", "retry-after-ms", "1500"), 1500 * time.Millisecond},
		{"bad milliseconds fall back", h("Retry-After", "2", "retry-after-ms", "-1"), 2 * time.Second},
		{"garbage milliseconds fall back", h("Retry-After", "2", "retry-after-ms", "x"), 2 * time.Second},
		{"HTTP-date after the reply's Date", h("Retry-After", date.Add(90*time.Second).Format(http.TimeFormat), "Date", date.Format(http.TimeFormat)), 90 * time.Second},
		{"RFC 850 date", h("Retry-After", date.Add(time.Minute).Format("Monday, 02-Jan-06 15:04:05 GMT"), "Date", date.Format(http.TimeFormat)), time.Minute},
		{"ANSI C date", h("Retry-After", date.Add(time.Minute).Format(time.ANSIC), "Date", date.Format(http.TimeFormat)), time.Minute},
		{"HTTP-date before the reply's Date", h("Retry-After", date.Add(-time.Minute).Format(http.TimeFormat), "Date", date.Format(http.TimeFormat)), 0},
		{"HTTP-date in the past, no Date", h("Retry-After", date.Add(-24*time.Hour).Format(http.TimeFormat)), 0},
	} {
		if got := RetryAfter(c.h); got != c.want {
			t.Errorf("%s: RetryAfter(%v) = %v, want %v", c.name, c.h, got, c.want)
		}
	}
	// Without a Date header an HTTP-date is taken against the system
	// clock: a date far ahead is a wait of about that long.
	far := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if got := RetryAfter(h("Retry-After", far)); got <= 0 || got > time.Hour {
		t.Errorf("HTTP-date an hour ahead without Date: %v, want (0, 1h]", got)
	}
}

// TestAfter: one Retry-After value as of a reference time (the HTTP
// sink's: its job's clock), seconds or a date.
func TestAfter(t *testing.T) {
	ref := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{{"", 0}, {"5", 5 * time.Second}, {" 12 ", 12 * time.Second}, {"1.5", 1500 * time.Millisecond},
		{"0", 0}, {"-3", 0}, {"soon", 0}, {"1e10", 0},
		{ref.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{ref.Add(-time.Hour).Format(http.TimeFormat), 0}} {
		if got := After(tc.in, ref); got != tc.want {
			t.Errorf("After(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestRetryAfterSecondsProperty: any header of whole seconds that fits a
// Duration is that many seconds; a negative one is none.
func TestRetryAfterSecondsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.Int64Range(-1<<40, int64(time.Duration(1<<62)/time.Second)).Draw(t, "seconds")
		got := RetryAfter(http.Header{"Retry-After": {strconv.FormatInt(s, 10)}})
		want := time.Duration(0)
		if s > 0 {
			want = time.Duration(s) * time.Second
		}
		if got != want {
			t.Fatalf("Retry-After %d: %v, want %v", s, got, want)
		}
	})
}
