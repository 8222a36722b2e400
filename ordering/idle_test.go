package ordering

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// idleOp records, in arrival order, the records, watermarks and idle
// status changes it receives.
type idleOp struct {
	runtime.Base[struct{}]
	o *out
}

func (x *idleOp) ProcessRecord(r runtime.Record[ev]) error {
	x.o.mu.Lock()
	x.o.seq = append(x.o.seq, fmt.Sprintf("%s@%d", r.Value.Key, r.Timestamp))
	x.o.mu.Unlock()
	return nil
}

func (x *idleOp) ProcessWatermark(ts int64) error {
	x.o.mu.Lock()
	x.o.seq = append(x.o.seq, fmt.Sprintf("wm %d", ts))
	x.o.mu.Unlock()
	return nil
}

func (x *idleOp) ProcessIdle(idle bool) error {
	x.o.mu.Lock()
	x.o.seq = append(x.o.seq, fmt.Sprintf("idle %v", idle))
	x.o.mu.Unlock()
	return nil
}

func (x *idleOp) EndInput() error { return nil }

// TestSortHoldsIdleWhileHolding (S6): the sort's input goes idle while it
// holds a record; its output stays active (downstream keeps the sort's
// watermark in its minimum) until the record is released, and goes idle
// only when nothing is held.
func TestSortHoldsIdleWhileHolding(t *testing.T) {
	// WM sets the watermark; WM -1 marks the source idle (after the
	// record: a source emits a record before its generator sees it).
	in := []ev{
		{Key: "a", TS: 10},
		{Key: "a", TS: 20, WM: 15},
		{Key: "a", TS: 30, WM: -1}, // idle while holding 20 and 30: stays active
		{Key: "a", TS: 40, WM: 35}, // active again: releases 20 and 30
		{Key: "b", TS: 50, WM: 60}, // releases 40 and 50: nothing held
		{Key: "b", TS: 55, WM: -1}, // behind the watermark: emitted at once; idle with nothing held
		{Key: "b", TS: 70, WM: 80}, // active again
		{Key: "b", TS: 90, WM: -1}, // idle while holding 90: stays active
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet, AutoWatermarkInterval: -1})
	strategy := watermark.ForGenerator(func() watermark.Generator[ev] {
		return watermark.GeneratorFuncs[ev]{Event: func(e ev, _ int64, o watermark.Output) {
			switch {
			case e.WM > 0:
				o.EmitWatermark(e.WM)
			case e.WM < 0:
				o.MarkIdle()
			}
		}}
	}).WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true })
	src := weir.FromSlice(env, "in", in, strategy)
	sorted := Sort(weir.KeyBy(src, func(e ev) string { return e.Key }), "sort", SortOptions[ev]{})
	o := &out{}
	weir.Transform(sorted, "out", func() runtime.OneInputOperator[ev, struct{}] { return &idleOp{o: o} })
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a@10", "wm 15", "a@20", "a@30", "wm 35", "a@40", "b@50", "wm 60",
		"b@55", "idle true", "idle false", "b@70", "wm 80", "b@90", "wm 9223372036854775807"}
	if seq := o.sequence(); !slices.Equal(seq, want) {
		t.Errorf("downstream saw\n%q\nwant\n%q", seq, want)
	}
}
