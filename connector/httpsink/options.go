package httpsink

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Format is how a request's body holds its records.
type Format int

const (
	// FormatAuto (the zero value) sends the record itself when Batch is 0
	// or 1, and a JSON array of the records otherwise.
	FormatAuto Format = iota
	// FormatArray sends a JSON array of the request's records (also of one).
	FormatArray
	// FormatLines sends JSON lines: each record on its own line, each line
	// ended by "\n" (Content-Type application/x-ndjson).
	FormatLines
)

// String names f as the pipeline file does.
func (f Format) String() string {
	switch f {
	case FormatAuto:
		return "auto"
	case FormatArray:
		return "array"
	case FormatLines:
		return "lines"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Defaults of the zero Options.
const (
	DefaultHeader        = "Idempotency-Key"
	DefaultTimeout       = 30 * time.Second
	DefaultAttempts      = 8
	DefaultInitialDelay  = 200 * time.Millisecond
	DefaultMaxDelay      = 30 * time.Second
	DefaultMaxRetryAfter = 5 * time.Minute
	// BodyExcerpt is how many bytes of a rejecting answer's body a dead
	// letter's Reason keeps.
	BodyExcerpt = 512
	// MaxBatch bounds Options.Batch.
	MaxBatch = 100_000
)

// Options configure a sink. The zero value is not usable only because URL
// is required; every other field has a default.
type Options[T any] struct {
	// URL receives the requests: an http or https URL.
	URL string
	// Method is the request method; "" means POST. PUT and PATCH are
	// accepted too.
	Method string
	// Batch is the number of records per request; 0 and 1 mean one record
	// per request. A batch is sent when it is full, at every checkpoint
	// barrier, at the end of the input and (with FlushInterval) when it is
	// older than the interval. See S3 for how batches are cut.
	Batch int
	// Format is how records are put in a body (FormatAuto: the record
	// alone for one record per request, a JSON array for batches).
	Format Format
	// Encode turns a record into JSON; nil means encoding/json.Marshal.
	// A record it fails on is a dead letter (Status 0).
	Encode func(v T) ([]byte, error)
	// Header holds headers sent with every request (authorization, say).
	// Their values are never logged nor put in errors or dead letters.
	Header http.Header
	// IdempotencyKeyHeader names the header that carries each request's
	// idempotency key (S2); "" means DefaultHeader, "-" sends none.
	IdempotencyKeyHeader string
	// KeyPrefix starts every idempotency key; "" means the sink's
	// operator name. Give two jobs writing to one service different
	// prefixes.
	KeyPrefix string
	// Timeout bounds one request, from sending to the whole answer read;
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// Retry says how failed requests are retried (S4).
	Retry Retry
	// RequestsPerSecond limits the requests sent by each sink subtask
	// (retries included); 0 means no limit.
	RequestsPerSecond float64
	// RecordsPerSecond limits the records sent by each sink subtask (a
	// request of n records takes n tokens); 0 means no limit.
	RecordsPerSecond float64
	// Burst is the limiters' bucket size: how many requests (or records)
	// may go at once after a quiet time; 0 means the larger of 1 and the
	// rate per second (and, for RecordsPerSecond, at least Batch, so that
	// a full batch can pass).
	Burst int
	// FlushInterval, if positive, sends a partly filled batch once it has
	// waited that long in processing time, for low rates with large
	// batches. Such flushes move batch boundaries (see S3).
	FlushInterval time.Duration
	// Client sends the requests; nil means a client of its own (HTTP/1.1
	// keep-alive, proxy from the environment). Its Timeout is left alone:
	// Options.Timeout applies per request.
	Client *http.Client
}

// Retry configures the retries of a request that failed with a connection
// error, a time-out, or an answer of 408, 429 or 5xx.
type Retry struct {
	// Attempts is the number of tries in all, the first included; 0 means
	// DefaultAttempts, 1 means no retry. When the attempts are used up the
	// job fails (and, with a restart strategy, is restored and sends the
	// request again with the same key).
	Attempts int
	// InitialDelay is the wait before the second try; each further wait
	// doubles, up to MaxDelay. 0 means DefaultInitialDelay.
	InitialDelay time.Duration
	// MaxDelay caps the back-off; 0 means DefaultMaxDelay.
	MaxDelay time.Duration
	// MaxRetryAfter caps a wait asked for by the server's Retry-After
	// (seconds or an HTTP date); 0 means DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
}

// Validate reports what is wrong with the options (nil if nothing is).
// Sink calls it when the job is built.
func (o Options[T]) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if o.URL == "" {
		bad("Options.URL is empty; want an http:// or https:// URL")
	} else if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("Options.URL %q: want an http:// or https:// URL with a host", o.URL)
	}
	switch strings.ToUpper(o.Method) {
	case "", "POST", "PUT", "PATCH":
	default:
		bad("Options.Method %q: want POST (the default), PUT or PATCH", o.Method)
	}
	if o.Batch < 0 || o.Batch > MaxBatch {
		bad("Options.Batch %d: want 0 or 1 (one record per request) up to %d", o.Batch, MaxBatch)
	}
	if o.Format < FormatAuto || o.Format > FormatLines {
		bad("Options.Format %v: want FormatAuto, FormatArray or FormatLines", o.Format)
	}
	if h := o.IdempotencyKeyHeader; h != "" && h != "-" && !validHeaderName(h) {
		bad("Options.IdempotencyKeyHeader %q: want a header name (letters, digits, '-'), or \"-\" for none", h)
	}
	for name := range o.Header {
		if !validHeaderName(name) {
			bad("Options.Header: %q is not a header name", name)
		}
	}
	if o.Timeout < 0 {
		bad("Options.Timeout %v: want 0 (meaning %v) or a positive duration", o.Timeout, DefaultTimeout)
	}
	if o.Retry.Attempts < 0 {
		bad("Options.Retry.Attempts %d: want 0 (meaning %d) or a positive number of tries", o.Retry.Attempts, DefaultAttempts)
	}
	if o.Retry.InitialDelay < 0 || o.Retry.MaxDelay < 0 || o.Retry.MaxRetryAfter < 0 {
		bad("Options.Retry: delays must not be negative (0 means the default)")
	}
	if o.RequestsPerSecond < 0 || o.RecordsPerSecond < 0 {
		bad("Options.RequestsPerSecond and RecordsPerSecond must not be negative (0 means no limit)")
	}
	if o.Burst < 0 {
		bad("Options.Burst %d: want 0 (a default from the rate) or a positive number", o.Burst)
	}
	if o.RecordsPerSecond > 0 && o.Burst > 0 && o.Burst < o.batch() {
		bad("Options.Burst %d is smaller than Batch %d: a full batch could never pass the RecordsPerSecond limiter", o.Burst, o.batch())
	}
	if o.FlushInterval < 0 {
		bad("Options.FlushInterval %v: want 0 (no timed flush) or a positive duration", o.FlushInterval)
	}
	if len(errs) > 0 {
		return fmt.Errorf("httpsink: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (o Options[T]) batch() int { return max(o.Batch, 1) }

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// withDefaults returns o with the defaults filled in.
func (o Options[T]) withDefaults() Options[T] {
	if o.Method == "" {
		o.Method = http.MethodPost
	}
	o.Method = strings.ToUpper(o.Method)
	if o.IdempotencyKeyHeader == "" {
		o.IdempotencyKeyHeader = DefaultHeader
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Retry.Attempts == 0 {
		o.Retry.Attempts = DefaultAttempts
	}
	if o.Retry.InitialDelay == 0 {
		o.Retry.InitialDelay = DefaultInitialDelay
	}
	if o.Retry.MaxDelay == 0 {
		o.Retry.MaxDelay = DefaultMaxDelay
	}
	if o.Retry.MaxRetryAfter == 0 {
		o.Retry.MaxRetryAfter = DefaultMaxRetryAfter
	}
	return o
}
