package clock

import (
	"context"
	"errors"
	"time"
)

// WithTimeout returns a copy of parent that is done when d has elapsed on
// c, when parent is done, or when the returned CancelFunc is called,
// whichever comes first. When d elapses, its Err is
// context.DeadlineExceeded, as for context.WithTimeout, and so is the Err
// of every context derived from it. Calling the CancelFunc releases its
// resources; call it as soon as the work the context covers is done.
//
// On Real (or nil) it is context.WithTimeout: the same context, deadline
// and cost. On any other clock the deadline is in that clock's time, which
// the system clock knows nothing of, so Deadline reports parent's
// deadline only: code that compares a context's deadline with the system
// clock (net.Dialer, HTTP/2) must not see a manual clock's time; Done
// alone carries the time-out. Such a context has one goroutine, which
// waits for c's timer or for parent, and ends with the context (C1).
//
// Invariant:
//
//	C1. Once the CancelFunc has returned, or Done is closed, the context's
//	    goroutine has armed nothing more on c: its timer is stopped or
//	    has fired.
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if c == nil || c == Real {
		return context.WithTimeout(parent, d)
	}
	inner, cancel := context.WithCancelCause(parent)
	t := &timeoutCtx{Context: inner, done: make(chan struct{})}
	timer := c.NewTimer(d)
	go func() {
		select {
		case <-timer.C():
			cancel(context.DeadlineExceeded)
		case <-inner.Done():
			timer.Stop()
		}
		close(t.done)
	}()
	return t, func() {
		cancel(context.Canceled)
		<-t.done
	}
}

// timeoutCtx is WithTimeout's context on a clock other than Real. Its
// embedded context, a child of the parent made by context.WithCancelCause,
// holds the values and the cause: the goroutine cancels it with the cause
// context.DeadlineExceeded when the clock's timer fires. Done is a channel
// of its own, closed by the goroutine once the embedded context is
// cancelled: a context derived from this one then does not attach to the
// embedded one (whose Err is context.Canceled) but watches this Done and
// takes this Err.
type timeoutCtx struct {
	context.Context
	done chan struct{}
}

func (t *timeoutCtx) Done() <-chan struct{} { return t.done }

func (t *timeoutCtx) Err() error {
	select {
	case <-t.done:
	default:
		return nil
	}
	if errors.Is(context.Cause(t.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return t.Context.Err()
}

func (t *timeoutCtx) String() string { return "clock.WithTimeout" }

type clockKey struct{}

// NewContext returns a copy of ctx that carries c, for code that waits on
// behalf of a job but is configured outside it: the retry waits of the
// model and MCP clients (package retry) read it with FromContext. The
// agent operator puts the job's clock (weir.Config.Clock) on the context
// of every model and tool call; on Real (or nil) it returns ctx itself.
func NewContext(ctx context.Context, c Clock) context.Context {
	if c == nil || c == Real {
		if _, ok := ctx.Value(clockKey{}).(Clock); !ok {
			return ctx
		}
	}
	return context.WithValue(ctx, clockKey{}, c)
}

// FromContext returns the clock ctx carries (NewContext), or Real when it
// carries none.
func FromContext(ctx context.Context) Clock {
	if c, ok := ctx.Value(clockKey{}).(Clock); ok && c != nil {
		return c
	}
	return Real
}
