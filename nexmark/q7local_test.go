package nexmark

import (
	"fmt"
	"testing"

	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// outputs collects what an operator emits (an Output without a job).
type outputs[T any] struct {
	recs []runtime.Record[T]
	wms  []int64
}

func (o *outputs[T]) Collect(r runtime.Record[T]) { o.recs = append(o.recs, r) }
func (o *outputs[T]) EmitWatermark(ts int64)      { o.wms = append(o.wms, ts) }
func (o *outputs[T]) EmitIdle(bool)               {}

func testQ7Local() (*q7Local, *outputs[Q7Out]) {
	out := &outputs[Q7Out]{}
	o := newQ7Local()
	o.Out, o.late = out, &runtime.Counter{}
	return o, out
}

// TestQ7LocalSnapshotRestore: two subtasks' open windows, snapshotted
// halfway and restored into one subtask (a rescale from 2 to 1), give the
// same results, with the same timestamps, as one subtask that saw every
// bid; a window emits only once the watermark reaches its MaxTimestamp,
// before the watermark; a bid of a window that has fired is dropped and
// counted.
func TestQ7LocalSnapshotRestore(t *testing.T) {
	g := testGenerator(t, 1)
	var bids []runtime.Record[Bid]
	for e := range g.Events(0, testEvents) {
		if e.Kind == KindBid {
			bids = append(bids, runtime.Record[Bid]{Value: e.Bid, Timestamp: e.Timestamp()})
		}
	}
	half := len(bids) / 2
	size := Q7Size.Milliseconds()
	// A watermark that fires the windows ending before the middle one.
	mid := floorDiv(bids[half].Timestamp, size) * size
	whole, wholeOut := testQ7Local()
	parts := [2]*q7Local{}
	for i := range parts {
		parts[i], _ = testQ7Local()
	}
	for i, r := range bids[:half] {
		if err := whole.ProcessRecord(r); err != nil {
			t.Fatal(err)
		}
		if err := parts[i%2].ProcessRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	var items [][]byte
	for _, p := range parts {
		it, err := p.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, it...)
	}
	restored, restoredOut := testQ7Local()
	if err := restored.restore(items); err != nil {
		t.Fatal(err)
	}
	if !restored.Holds() {
		t.Fatal("the restored subtask holds no window")
	}
	for _, o := range []*q7Local{whole, restored} {
		for _, r := range bids[half:] {
			if err := o.ProcessRecord(r); err != nil {
				t.Fatal(err)
			}
			if r.Timestamp >= mid && o.wm < mid-1 {
				if err := o.ProcessWatermark(mid - 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Late: its window fired at mid - 1.
		if err := o.ProcessRecord(runtime.Record[Bid]{Value: Bid{Price: 1 << 40}, Timestamp: mid - 1}); err != nil {
			t.Fatal(err)
		}
		if got := o.late.Value(); got != 1 {
			t.Fatalf("%d late records counted, want 1", got)
		}
	}
	before := len(wholeOut.recs)
	if before == 0 || len(restoredOut.recs) != before {
		t.Fatalf("at watermark %d: %d results from one subtask, %d after the restore; want the same, > 0", mid-1, before, len(restoredOut.recs))
	}
	// The window ending at mid fired at its MaxTimestamp, no later one.
	if last := wholeOut.recs[before-1]; last.Value.WindowEnd != mid || last.Timestamp != mid-1 {
		t.Fatalf("the last result at watermark %d is of the window ending at %d, stamped %d; want %d, %d",
			mid-1, last.Value.WindowEnd, last.Timestamp, mid, mid-1)
	}
	for _, o := range []*q7Local{whole, restored} {
		if err := o.ProcessWatermark(watermark.Max); err != nil {
			t.Fatal(err)
		}
		if o.Holds() {
			t.Fatal("a window is held after the maximum watermark")
		}
	}
	if len(wholeOut.recs) == before {
		t.Fatal("the maximum watermark fired nothing")
	}
	want, got := sorted(wholeOut.recs), sorted(restoredOut.recs)
	sameResults(t, "restored from two subtasks", got, want)
	// Against the reference: the highest bids of each window.
	var ref []runtime.Record[Q7Out]
	RefQ7(g.Events(0, testEvents), func(o Q7Out) {
		ref = append(ref, runtime.Record[Q7Out]{Value: o, Timestamp: o.WindowEnd - 1})
	})
	sameResults(t, "one subtask against the reference", want, sorted(ref))
	for _, out := range []*outputs[Q7Out]{wholeOut, restoredOut} {
		if fmt.Sprint(out.wms) != fmt.Sprint([]int64{mid - 1, watermark.Max}) {
			t.Fatalf("watermarks forwarded %v, want [%d %d]", out.wms, mid-1, int64(watermark.Max))
		}
	}
}
