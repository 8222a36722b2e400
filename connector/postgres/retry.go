package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
)

// errPermanent marks an error retry must not retry (a missing table, a
// server setting) even if it looks transient.
type errPermanent struct{ err error }

func (e errPermanent) Error() string { return e.err.Error() }
func (e errPermanent) Unwrap() error { return e.err }

// code is the SQLSTATE of a server error, "" for other errors.
func code(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Retryable reports whether err is transient: a serialization failure
// (40001), a deadlock (40P01), a lost or refused connection (class 08,
// a reset, an unexpected end of stream) or the server terminating the
// session (57P01 admin shutdown, which pg_terminate_backend sends; 57P02
// crash shutdown; 57P03 cannot connect now). The sink retries the whole
// transaction on these (P5).
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var perm errPermanent
	if errors.As(err, &perm) {
		return false
	}
	if c := code(err); c != "" {
		switch {
		case c == "40001", c == "40P01", c == "57P01", c == "57P02", c == "57P03":
			return true
		case len(c) == 5 && c[:2] == "08":
			return true
		}
		return false
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}

// retry runs attempt until it succeeds, fails with an error that is not
// transient, or has failed Options.Retries + 1 times, waiting
// RetryBackoff, doubled each time (at most 5s, or RetryBackoff when that
// is longer), between attempts (package internal/retry, without jitter:
// one sink subtask retries one transaction at a time). The waits are on
// the system clock, not the job's: they wait for a real server to recover
// (a failover, a lock released), which a job's manual clock does not
// drive. Each
// attempt is a whole transaction: the caller's attempt begins it, sends
// every row it should hold and ends it, so a retry never commits a row
// twice nor part of a transaction (P5). attempt sees the attempt's
// number, from 0.
func (s *sink[T]) retry(what string, attempt func(ctx context.Context, n int) error) error {
	b := retry.Policy{Initial: s.o.RetryBackoff, Max: max(maxRetryWait, s.o.RetryBackoff)}.Start()
	for n := 0; ; n++ {
		err := attempt(s.ctx, n)
		if err == nil {
			return nil
		}
		if !Retryable(err) || n >= s.o.Retries {
			var perm errPermanent
			if errors.As(err, &perm) {
				return perm.err
			}
			return fmt.Errorf("postgres: %s (table %s, after %d attempts): %w", what, s.o.Table, n+1,
				redacted{redact(err.Error(), s.o.URL, s.o.Password), err})
		}
		s.log.Warn("postgres: transient error, retrying the transaction", "op", what, "attempt", n+1,
			"error", redact(err.Error(), s.o.URL, s.o.Password))
		if err := retry.Sleep(s.ctx, clock.Real, b.Next(0)); err != nil {
			return err
		}
	}
}

// maxRetryWait caps the doubling of Options.RetryBackoff.
const maxRetryWait = 5 * time.Second

// redacted is an error whose text has had the password removed (P8); it
// still unwraps to the error it came from.
type redacted struct {
	msg string
	err error
}

func (e redacted) Error() string { return e.msg }
func (e redacted) Unwrap() error { return e.err }
