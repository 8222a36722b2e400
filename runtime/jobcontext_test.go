package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// jobCtxOp takes a JobContext in Open and hands it to the test.
type jobCtxOp struct {
	runtime.Base[int]
	got  chan context.Context
	stop func()
}

func (o *jobCtxOp) Open(ctx *runtime.Context, out runtime.Output[int]) error {
	if err := o.Base.Open(ctx, out); err != nil {
		return err
	}
	c, stop := ctx.JobContext()
	o.stop = stop
	o.got <- c
	return nil
}

func (o *jobCtxOp) ProcessRecord(runtime.Record[int]) error { return nil }

func (o *jobCtxOp) Close() error {
	o.stop()
	return nil
}

// A JobContext ends when the job is cancelled (while the call it is for
// still runs: here, while the job runs), and a Context that belongs to no
// job gives one that ends only with its stop.
func TestJobContextEndsWithTheJob(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSource(env, "src", runtime.SourceFunc[int](func(runtime.SourceContext) (runtime.Reader[int], error) {
		return &failThenWait{polled: true, never: make(chan struct{})}, nil
	}), watermark.NoWatermarks[int]())
	op := &jobCtxOp{got: make(chan context.Context, 1)}
	weir.Collect(weir.Transform(src, "op", func() runtime.OneInputOperator[int, int] { return op }))
	watchdog := testCtx(t)
	ctx, cancel := context.WithCancel(watchdog)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()
	var jctx context.Context
	select {
	case jctx = <-op.got:
	case <-watchdog.Done():
		t.Fatal("the operator did not open")
	}
	if err := jctx.Err(); err != nil {
		t.Fatalf("the job context ended (%v) while the job runs", err)
	}
	cancel()
	select {
	case <-jctx.Done():
	case <-watchdog.Done():
		t.Fatal("the job context did not end when the job was cancelled")
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled job ended with %v", err)
	}

	alone, stop := (&runtime.Context{}).JobContext()
	select {
	case <-alone.Done():
		t.Fatal("a context of no job ended before its stop")
	case <-time.After(10 * time.Millisecond):
	}
	stop()
	if !errors.Is(alone.Err(), context.Canceled) {
		t.Fatalf("after stop: %v, want context.Canceled", alone.Err())
	}
}
