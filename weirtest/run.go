package weirtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// Start starts env's job for the test t and returns it with stop, which
// cancels the job and waits for it to end, failing t if it ended with an
// error other than the cancellation. stop runs at t's cleanup as well;
// calling it more than once is fine.
func Start(t testing.TB, env *weir.Environment) (job *runtime.Job, stop func()) {
	t.Helper()
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		job.Cancel()
		if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("job: %v", err)
		}
	}
	t.Cleanup(stop)
	return job, stop
}

// EventuallyTimeout bounds Eventually's wait.
const EventuallyTimeout = 30 * time.Second

// Eventually polls cond every few milliseconds until it holds, and fails t
// ("timed out waiting for what") if it still does not after
// EventuallyTimeout. The bound only keeps a broken test from hanging; it
// asserts nothing about how long the wait takes.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(EventuallyTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
