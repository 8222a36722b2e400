package webhook

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// Defaults of the zero Options.
const (
	DefaultListen     = "127.0.0.1:8080"
	DefaultPath       = "/ingest"
	DefaultMaxBody    = 1 << 20
	DefaultQueue      = 10_000
	DefaultRetryAfter = time.Second
)

// Ack says when a request is answered 200.
type Ack int

const (
	// AckOnCheckpoint (the zero value) answers a request once a completed
	// checkpoint covers all its records (W2). Use it when the job takes
	// checkpoints: without them requests wait until the client gives up.
	AckOnCheckpoint Ack = iota
	// AckOnEmit answers a request once its records have been emitted
	// downstream (handed to the operators after the source), for jobs
	// without checkpoints: a crash after the answer loses them (W3).
	AckOnEmit
)

// Options configure a webhook source. The zero value listens on
// DefaultListen at DefaultPath, without authentication.
type Options[T any] struct {
	// Listen is the TCP address to listen on; "" means DefaultListen
	// (loopback only). Give "0.0.0.0:8080" or ":8080" to accept other
	// hosts, and "127.0.0.1:0" for a free port (Source.Addr tells which).
	Listen string
	// Path is the URL path that takes records; "" means DefaultPath.
	// Other paths are answered 404, other methods than POST 405.
	Path string
	// Token, if not empty, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); a request without it, or with another,
	// is answered 401. Compared in constant time; never logged.
	Token string
	// MaxBody bounds a request's body in bytes; a larger body is answered
	// 413. 0 means DefaultMaxBody.
	MaxBody int64
	// Queue bounds the records the source holds: accepted and not yet
	// answered (queued for the job, or emitted and waiting for their
	// checkpoint). A request that does not fit is answered 429 with
	// Retry-After; one with more records than Queue, 413. 0 means
	// DefaultQueue.
	Queue int
	// RetryAfter is the wait a 429 or 503 answer suggests (Retry-After,
	// in whole seconds, at least 1); 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	// Ack says when a request is answered 200 (AckOnCheckpoint by default).
	Ack Ack
	// Decode turns one JSON value of a request (an object, an element of
	// an array, or a line) into a record; nil means encoding/json.Unmarshal
	// into T. A value it fails on makes the whole request a 400.
	Decode func(data []byte) (T, error)
	// Timestamp, if set, gives a record's event time (Unix ms); a record it
	// returns false for makes the whole request a 400. If nil, every record
	// has its request's arrival time (processing time, W5).
	Timestamp func(v T) (int64, bool)
}

// Validate reports what is wrong with the options (nil if nothing is).
func (o Options[T]) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if o.Listen != "" {
		if _, _, err := net.SplitHostPort(o.Listen); err != nil {
			bad("Options.Listen %q: want host:port such as 127.0.0.1:8080 (%v)", o.Listen, err)
		}
	}
	if o.Path != "" && !strings.HasPrefix(o.Path, "/") {
		bad("Options.Path %q: want a path starting with /, such as /ingest", o.Path)
	}
	if o.MaxBody < 0 {
		bad("Options.MaxBody %d: want 0 (meaning %d) or a positive number of bytes", o.MaxBody, DefaultMaxBody)
	}
	if o.Queue < 0 {
		bad("Options.Queue %d: want 0 (meaning %d) or a positive number of records", o.Queue, DefaultQueue)
	}
	if o.RetryAfter < 0 {
		bad("Options.RetryAfter %v: want 0 (meaning %v) or a positive duration", o.RetryAfter, DefaultRetryAfter)
	}
	if o.Ack != AckOnCheckpoint && o.Ack != AckOnEmit {
		bad("Options.Ack %d: want AckOnCheckpoint or AckOnEmit", o.Ack)
	}
	if len(errs) > 0 {
		return fmt.Errorf("webhook: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (o Options[T]) withDefaults() Options[T] {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Path == "" {
		o.Path = DefaultPath
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Queue == 0 {
		o.Queue = DefaultQueue
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	return o
}
