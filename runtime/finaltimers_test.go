package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// clockAtFinal is chained behind a process function: when the final
// checkpoint snapshots it (after the function, whose state and timers are
// in that checkpoint), it moves processing time past the function's
// timer, which so falls due right after the final barrier.
type clockAtFinal struct {
	runtime.Base[string]
	clk *clock.Manual
}

func (o *clockAtFinal) ProcessRecord(r runtime.Record[string]) error { o.Out.Collect(r); return nil }
func (o *clockAtFinal) EndInput() error                              { return nil }
func (o *clockAtFinal) SnapshotState(w *runtime.SnapshotWriter) error {
	if w.Final() {
		o.clk.Advance(time.Hour)
	}
	return nil
}

// TestNoProcessingTimeTimerFiresAfterTheFinalCheckpoint: a processing-time
// timer that falls due after the final checkpoint of a bounded job does
// not fire. Its output would follow the final barrier: a two-phase sink
// commits it at the end of input, outside every checkpoint, and a restore
// from the final checkpoint (which holds the timer) emits it again. Found
// by the simulator (internal/sim S9, seed 421: a line committed twice).
func TestNoProcessingTimeTimerFiresAfterTheFinalCheckpoint(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clk,
		Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir(), Interval: time.Hour}})
	src := weir.FromSlice(env, "src", []int64{1, 2, 3},
		watermark.ForMonotonous[int64]().WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, true }))
	fired := weir.Process(weir.KeyBy(src, func(v int64) int64 { return v % 2 }), "timers",
		func() weir.KeyedProcessFunction[int64, int64, string] {
			return weir.ProcessFuncs[int64, int64, string]{
				ElementFn: func(v int64, ctx *weir.KeyedContext[int64, string]) error {
					ctx.Collect("record")
					ctx.RegisterProcessingTimeTimer(ctx.CurrentProcessingTime() + 10)
					return nil
				},
				TimerFn: func(ts int64, ctx *weir.KeyedContext[int64, string]) error {
					ctx.Collect("timer")
					return nil
				},
			}
		})
	out := weir.Collect(weir.Transform(fired, "clock-at-final", func() runtime.OneInputOperator[string, string] {
		return &clockAtFinal{clk: clk}
	}))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, v := range out.Values() {
		if v == "timer" {
			t.Fatalf("a processing-time timer fired after the final checkpoint: %q", out.Values())
		}
	}
	if n := len(out.Values()); n != 3 {
		t.Fatalf("got %q, want the 3 records", out.Values())
	}
}
