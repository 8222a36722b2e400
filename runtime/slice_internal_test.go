package runtime

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/watermark"
)

// ownedOp records the OwnedKeyGroups of each of its subtasks.
type ownedOp struct {
	Base[int]
	mu  *sync.Mutex
	got map[int]keygroup.Range
}

func (o *ownedOp) Open(ctx *Context, out Output[int]) error {
	o.mu.Lock()
	o.got[ctx.Subtask] = ctx.OwnedKeyGroups()
	o.mu.Unlock()
	return o.Base.Open(ctx, out)
}

func (o *ownedOp) ProcessRecord(Record[int]) error { return nil }
func (o *ownedOp) EndInput() error                 { return nil }

// Config.Slice reaches the operators: a job that is slice q of n sees, in
// OwnedKeyGroups, key-group range q of n (what a subtask of a job of
// parallelism n would own), while KeyGroups stays its own subtask range;
// a whole job's OwnedKeyGroups are its KeyGroups.
func TestSliceOwnedKeyGroups(t *testing.T) {
	run := func(par int, sl Slice) map[int]keygroup.Range {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		g := &Graph{}
		src := AddSource[int](g, "src", SourceFunc[int](func(SourceContext) (Reader[int], error) {
			return &sliceReader{per: 1}, nil
		}), watermark.NoWatermarks[int]())
		var mu sync.Mutex
		got := map[int]keygroup.Range{}
		op := AddOneInput[int, int](g, "op", func() OneInputOperator[int, int] { return &ownedOp{mu: &mu, got: got} })
		op.SetParallelism(par)
		Connect[int](src, nil, op, 0, KeyGroups[int](func(maxP int) func(int) int { return func(v int) int { return v % maxP } }))
		if err := Execute(ctx, g, Config{MaxParallelism: 128, Slice: sl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := run(1, Slice{}); got[0] != (keygroup.Range{Start: 0, End: 127}) {
		t.Errorf("whole job: owned %v, want [0,127]", got[0])
	}
	for q := range 4 {
		want := keygroup.RangeFor(128, 4, q)
		if got := run(1, Slice{Index: q, Count: 4}); got[0] != want {
			t.Errorf("slice %d of 4 at parallelism 1: owned %v, want %v", q, got[0], want)
		}
	}
	// At parallelism 2, slice 1 of 4 ([32,63]) lies in subtask 0's range.
	got := run(2, Slice{Index: 1, Count: 4})
	if got[0] != (keygroup.Range{Start: 32, End: 63}) || !got[1].Empty() {
		t.Errorf("slice 1 of 4 at parallelism 2: owned %v, want [32,63] and an empty range", got)
	}
}
