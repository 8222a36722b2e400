package runtime_test

// Helpers of this package's end-to-end tests (package runtime_test): jobs
// built with package weir's typed API and run by the runtime.

import (
	"context"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

func testCtx(t *testing.T) context.Context { return testenv.Context(t, 30*time.Second) }

// start runs env in the background; the returned function waits for the
// job and fails the test on an error.
func start(t *testing.T, ctx context.Context, env *weir.Environment) (wait func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- env.Execute(ctx) }()
	return func() {
		t.Helper()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// event is the record of most tests: a key, an event time and a number.
type event struct {
	Key string
	TS  int64
	N   int
}

// strategy takes an event's time from TS, with no out-of-orderness.
func strategy() watermark.Strategy[event] {
	return watermark.ForBoundedOutOfOrderness[event](0).WithTimestamp(func(e event, _ int64) (int64, bool) { return e.TS, true })
}

// countKey counts the records of each key in keyed state and emits
// (key, count so far) with each.
type countKey struct {
	n *state.ValueState[int64, int64]
}

func (c *countKey) Open(ctx *weir.KeyedContext[int64, [2]int64]) error {
	c.n = state.MustValue[int64, int64](ctx.State(), "n")
	return nil
}

func (c *countKey) ProcessElement(v int64, ctx *weir.KeyedContext[int64, [2]int64]) error {
	n, _ := c.n.Value()
	c.n.Update(n + 1)
	ctx.Collect([2]int64{v, n + 1})
	return nil
}

func (c *countKey) OnTimer(int64, *weir.KeyedContext[int64, [2]int64]) error { return nil }

// noTicks disables periodic watermark emission: scripted watermarks are the
// only ones.
const noTicks = -1
