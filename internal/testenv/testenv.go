package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/internal/cputime"
)

// Context returns a context that times out after d and is cancelled when
// the test ends, so a hung job fails the test instead of the whole run.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// StartBroker starts an embedded Kafka broker with opts, fails the test if
// it cannot, and closes it when the test ends.
func StartBroker(t testing.TB, opts broker.Options) *broker.Broker {
	t.Helper()
	b, err := broker.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// CPUTime is the user and system CPU time the process has used
// (internal/cputime): on a loaded machine it shows what an operation costs
// better than the wall clock. It is 0 where it cannot be read.
func CPUTime() time.Duration { return cputime.Process() }
