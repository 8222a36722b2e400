package runtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// failThenWait emits one record, then waits for good: its Ready channel
// never fires.
type failThenWait struct {
	polled bool
	never  chan struct{}
}

func (r *failThenWait) Poll(out runtime.SourceOutput[int]) (runtime.PollStatus, error) {
	if !r.polled {
		r.polled = true
		out.AddSplit(0)
		out.Collect(0, 1, 1)
	}
	return runtime.Wait, nil
}

func (r *failThenWait) Ready() <-chan struct{} { return r.never }
func (r *failThenWait) Close() error           { return nil }

// A source whose chained operator fails in a Poll that then returns Wait
// ends the job with that failure at once, also when nothing would wake the
// source again: no periodic watermark timer, a Ready channel that never
// fires, processing time that does not move. (Found by the simulator: with checkpoints overlapping processing,
// seed 407's injected failure struck in the Poll that stopped at the next
// barrier, whose checkpoint could not be triggered before the first one
// completed, and the job hung until its deadline.)
func TestChainedFailureInAWaitingPollEndsTheJob(t *testing.T) {
	// Processing time stands still (the simulator's manual clock), so no
	// timer of the task (its buffer flush) wakes the source either.
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1, Clock: clock.NewManual(time.UnixMilli(0))})
	src := weir.FromSource(env, "src", runtime.SourceFunc[int](func(runtime.SourceContext) (runtime.Reader[int], error) {
		return &failThenWait{never: make(chan struct{})}, nil
	}), watermark.NoWatermarks[int]())
	boom := errors.New("boom")
	failed := weir.MapErr(src, "fail", func(int) (int, error) { return 0, boom })
	weir.Collect(failed)
	err := env.Execute(testCtx(t))
	if !errors.Is(err, boom) {
		t.Fatalf("job ended with %v, want the chained operator's failure %v", err, boom)
	}
}
