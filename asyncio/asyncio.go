package asyncio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// Func calls out for one input and returns its results (zero or more). It
// runs on its own goroutine, never on the subtask goroutine, possibly
// concurrently with other calls of the same Func; ctx is cancelled when the
// job stops, when another call of the subtask failed, or when the per-call
// timeout passes. Func must return once ctx is done.
type Func[IN, OUT any] func(ctx context.Context, in IN) ([]OUT, error)

// DefaultCapacity is the capacity used when Options.Capacity is 0.
const DefaultCapacity = 100

// maxBackoffDoublings bounds the exponential backoff at 32 × Backoff.
const maxBackoffDoublings = 5

// Options tunes an async operator. The zero value is usable.
type Options struct {
	// Capacity is the maximum number of inputs in flight per subtask
	// (accepted, results not yet emitted), and so of concurrent calls.
	// When it is reached the operator waits for a completion before it
	// takes the next record: back-pressure, nothing is dropped. 0 means
	// DefaultCapacity.
	Capacity int
	// Timeout bounds each attempt of a call, on the job's clock
	// (weir.Config.Clock). 0 means no timeout. A call whose last attempt
	// times out fails the job with ErrTimeout.
	Timeout time.Duration
	// Retries is how often a failed or timed-out call is tried again
	// before it fails the job. 0 means never.
	Retries int
	// Backoff is the wait before the first retry, on the job's clock;
	// each further retry waits twice as long as the one before, at most
	// 32 × Backoff. 0 means retry at once.
	Backoff time.Duration
}

// ErrTimeout is wrapped by the error of a call whose last attempt timed out.
var ErrTimeout = errors.New("asyncio: call timed out")

func (o Options) withDefaults(name string) Options {
	if o.Capacity < 0 || o.Timeout < 0 || o.Retries < 0 || o.Backoff < 0 {
		panic(fmt.Sprintf("asyncio: operator %q: negative option in %+v", name, o))
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultCapacity
	}
	return o
}

// Ordered adds an async operator that calls f for every record of s and
// emits the results in input order (I3), each with its input's timestamp.
// It panics if f is nil or an option is negative.
func Ordered[IN, OUT any](s weir.Stream[IN], name string, f Func[IN, OUT], opts Options) weir.Stream[OUT] {
	return add(s, name, f, opts, true)
}

// Unordered adds an async operator that calls f for every record of s and
// emits the results as they complete, but never across a watermark (I4),
// each with its input's timestamp. It panics if f is nil or an option is
// negative.
func Unordered[IN, OUT any](s weir.Stream[IN], name string, f Func[IN, OUT], opts Options) weir.Stream[OUT] {
	return add(s, name, f, opts, false)
}

func add[IN, OUT any](s weir.Stream[IN], name string, f Func[IN, OUT], opts Options, ordered bool) weir.Stream[OUT] {
	if f == nil {
		panic(fmt.Sprintf("asyncio: operator %q: nil Func", name))
	}
	opts = opts.withDefaults(name)
	return weir.Transform(s, name, func() runtime.OneInputOperator[IN, OUT] {
		return newOperator(f, opts, ordered)
	})
}
