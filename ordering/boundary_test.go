package ordering

import (
	"context"
	"fmt"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

// H3 at the exact boundary, on each of the queue's three release paths:
// release(wm) emits a record whose timestamp equals wm, and not one at
// wm+1; release(wm-1) emits neither.
func TestHeldQueueReleaseBoundary(t *testing.T) {
	const wm = 100
	rec := func(ts, t1 int64, seq uint64) heldRec[int] {
		return heldRec[int]{ts: ts, t1: t1, seq: seq, v: int(seq)}
	}
	for _, tc := range []struct {
		name        string
		push        []heldRec[int]
		below, atWM []int // seqs released by release(wm-1), and by release(wm) of a fresh queue
	}{
		// A run whose head is due at exactly wm.
		{"run head", []heldRec[int]{rec(wm, 0, 0), rec(wm+1, 0, 1)}, nil, []int{0}},
		// A run whose next record, after a released one, is due at wm.
		{"run continuation", []heldRec[int]{rec(wm-5, 0, 0), rec(wm, 0, 1), rec(wm+1, 0, 2)}, []int{0}, []int{0, 1}},
		// The spill heap's top (out of its run's order) is due at wm.
		{"spill", []heldRec[int]{rec(wm+1, 0, 0), rec(wm, 0, 1)}, nil, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				at   int64
				want []int
			}{{wm - 1, tc.below}, {wm, tc.atWM}} {
				var q heldQueue[int]
				for _, h := range tc.push {
					q.push(h)
				}
				var got []int
				n := q.release(c.at, func(h *heldRec[int]) { got = append(got, h.v) })
				if n != len(c.want) || fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("release(%d) of %v emitted %v, want %v (timestamp == watermark is released, watermark+1 is not)", c.at, tc.push, got, c.want)
				}
				if q.len() != len(tc.push)-len(c.want) {
					t.Fatalf("release(%d): %d records held, want %d", c.at, q.len(), len(tc.push)-len(c.want))
				}
			}
		})
	}
}

// S1 and S3 at the exact boundary, through the operator: at watermark W
// the held records with timestamp W are released before W is forwarded
// (those at W+1 stay held), and a record arriving with timestamp W after
// watermark W is an order violation, emitted at once, while one at W+1 is
// held.
func TestSortReleaseBoundary(t *testing.T) {
	in := []ev{
		{Key: "a", TS: 10, Partition: 0, Offset: 0},
		{Key: "a", TS: 11, Partition: 0, Offset: 1},
		{Key: "a", TS: 10, Partition: 1, Offset: 2},
		{Key: "a", TS: 9, Partition: 0, Offset: 3}, // out of partition 0's order
		{Key: "w", TS: 100, Partition: 2, Offset: 4, WM: 9},
		{Key: "w", TS: 101, Partition: 2, Offset: 5, WM: 10},
		{Key: "a", TS: 10, Partition: 3, Offset: 6}, // at the watermark: a violation
		{Key: "a", TS: 11, Partition: 3, Offset: 7}, // just above it: held
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet, AutoWatermarkInterval: -1})
	strategy := watermark.ForGenerator(func() watermark.Generator[ev] {
		return watermark.Punctuated(func(e ev, _ int64) (int64, bool) { return e.WM, e.WM != 0 })
	}).WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true })
	src := weir.FromSlice(env, "in", in, strategy)
	late := weir.NewOutputTag[ev]("late")
	sorted := Sort(weir.KeyBy(src, func(e ev) string { return e.Key }), "sort", SortOptions[ev]{Tiebreak: tiebreak, Violations: late})
	o := sinkTo(sorted)
	lateOut := sinkTo(weir.SideOutput(sorted, late))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a@9", "wm 9", "a@10", "a@10", "wm 10", "a@10", "a@11", "a@11", "w@100", "w@101", fmt.Sprintf("wm %d", watermark.Max)}
	if got := o.sequence(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output %v, want %v", got, want)
	}
	if got := lateOut.records(); len(got) != 1 || got[0].Value.Offset != 6 {
		t.Fatalf("violations %v, want the record at offset 6 only (timestamp 10 after watermark 10)", got)
	}
	if n := env.Metrics().Sum("sort", "orderViolations"); n != 1 {
		t.Fatalf("orderViolations = %d, want 1", n)
	}
}
