// Package jobtest holds what the end-to-end tests of several packages
// (the root package, runtime, checkpoint) share to build and run small
// jobs with package weir's API: a record type with an event time, its
// watermark strategy, a keyed count, and a background run. For tests only.
package jobtest

import (
	"context"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// NoTicks disables periodic watermark emission (weir.Config's
// WatermarkInterval): scripted watermarks are the only ones.
const NoTicks = -1

// Event is the record of most tests: a key, an event time and a number.
type Event struct {
	Key string
	TS  int64
	N   int
}

// Strategy takes an Event's time from TS, with no out-of-orderness.
func Strategy() watermark.Strategy[Event] {
	return watermark.ForBoundedOutOfOrderness[Event](0).WithTimestamp(func(e Event, _ int64) (int64, bool) { return e.TS, true })
}

// Start runs env in the background; the returned function waits for the
// job and fails the test on an error.
func Start(t *testing.T, ctx context.Context, env *weir.Environment) (wait func()) {
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

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CountKey counts the records of each key in keyed state ("n") and emits
// (key, count so far) with each.
type CountKey struct {
	n *state.ValueState[int64, int64]
}

func (c *CountKey) Open(ctx *weir.KeyedContext[int64, [2]int64]) error {
	c.n = state.MustValue[int64, int64](ctx.State(), "n")
	return nil
}

func (c *CountKey) ProcessElement(v int64, ctx *weir.KeyedContext[int64, [2]int64]) error {
	n, _ := c.n.Value()
	c.n.Update(n + 1)
	ctx.Collect([2]int64{v, n + 1})
	return nil
}

func (c *CountKey) OnTimer(int64, *weir.KeyedContext[int64, [2]int64]) error { return nil }
