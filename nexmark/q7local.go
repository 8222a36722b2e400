package nexmark

import (
	"encoding/json"
	"fmt"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// q7PartialsList is the operator-state list of q7Local's open windows.
const q7PartialsList = "q7-partials"

// q7Local is q7's first stage: per subtask (no key), the highest bids of
// each tumbling window of Q7Size among the bids that subtask sees. It is the
// local half of the local-global aggregation Flink's planner makes of the
// SQL's window MAX (LocalWindowAggregate, then GlobalWindowAggregate keyed
// by the window): a window's answer is the highest of its subtasks'
// highest bids, so the keyed second stage of Q7 gets a few records per
// window and subtask instead of one per bid.
//
// Keying the first stage by auction, as before, cost a keyed-state lookup
// and, per new auction and window, a timer per bid (q7 was 2.7-2.9x its
// hand-written query's CPU): the query needs neither, as a window's
// maximum does not depend on how its bids are grouped.
//
// Per record: the window [end - Q7Size, end) holding its timestamp (window
// I1, offset 0); a record whose window has fired (end - 1 <= watermark) is
// late and dropped and counted as a window would (window I3, I4, no allowed
// lateness); otherwise it joins that window's maximum (q7Add). Windows are
// few at a time (the watermark closes them in time order), so they are a
// short slice searched from the end, the window of the previous record
// first. Per watermark wm: every window with end - 1 <= wm emits its
// bids, in window order, stamped end - 1 (the window's MaxTimestamp, as
// window results are), then the watermark goes on, so no result is behind
// it downstream. It is a runtime.Holder while it holds a window (runtime
// I8), and a runtime.Snapshotter: the open windows are operator state
// (checkpoint.EvenSplit), so a restore at any parallelism merges them
// into the subtasks that receive them, which emit them at the watermark
// as if they had seen the bids themselves.
type q7Local struct {
	runtime.Base[Q7Out]
	wins []q7Window // open windows, in no particular order
	cur  int        // index in wins of the last record's window
	wm   int64      // the input's watermark
	late *runtime.Counter
}

type q7Window struct {
	End int64
	Max q7Max
}

func newQ7Local() *q7Local { return &q7Local{wm: watermark.Min} }

func (o *q7Local) Open(ctx *runtime.Context, out runtime.Output[Q7Out]) error {
	o.Base.Open(ctx, out)
	o.late = ctx.Counter(window.CounterLateDropped)
	items, err := ctx.Restored().List(q7PartialsList)
	if err != nil {
		return err
	}
	return o.restore(items)
}

func (o *q7Local) ProcessRecord(r runtime.Record[Bid]) error {
	size := Q7Size.Milliseconds()
	end := floorDiv(r.Timestamp, size)*size + size
	if end-1 <= o.wm {
		o.late.Inc()
		return nil
	}
	if o.cur < len(o.wins) && o.wins[o.cur].End == end {
		o.wins[o.cur].Max = q7Add(o.wins[o.cur].Max, r.Value)
		return nil
	}
	o.cur = o.window(end)
	o.wins[o.cur].Max = q7Add(o.wins[o.cur].Max, r.Value)
	return nil
}

// window returns the index in o.wins of the window ending at end, adding it
// if it is not there.
func (o *q7Local) window(end int64) int {
	for i := len(o.wins) - 1; i >= 0; i-- {
		if o.wins[i].End == end {
			return i
		}
	}
	o.wins = append(o.wins, q7Window{End: end, Max: q7Max{Price: -1}})
	return len(o.wins) - 1
}

func (o *q7Local) ProcessWatermark(wm int64) error {
	o.wm = wm
	for {
		// The earliest window that has fired, if any: windows fire in
		// time order.
		first := -1
		for i, w := range o.wins {
			if w.End-1 <= wm && (first < 0 || w.End < o.wins[first].End) {
				first = i
			}
		}
		if first < 0 {
			break
		}
		w := o.wins[first]
		for _, b := range w.Max.Bids {
			o.Out.Collect(runtime.Record[Q7Out]{Value: Q7Out{Bid: b, WindowEnd: w.End}, Timestamp: w.End - 1})
		}
		last := len(o.wins) - 1
		o.wins[first] = o.wins[last]
		o.wins[last] = q7Window{}
		o.wins = o.wins[:last]
	}
	o.cur = 0
	o.Out.EmitWatermark(wm)
	return nil
}

// Holds implements runtime.Holder.
func (o *q7Local) Holds() bool { return len(o.wins) > 0 }

// SnapshotState implements runtime.Snapshotter: one item per open window,
// as JSON.
func (o *q7Local) SnapshotState(w *runtime.SnapshotWriter) error {
	items, err := o.snapshot()
	if err != nil {
		return err
	}
	w.List(q7PartialsList, checkpoint.EvenSplit, items)
	return nil
}

func (o *q7Local) snapshot() ([][]byte, error) {
	items := make([][]byte, 0, len(o.wins))
	for _, w := range o.wins {
		b, err := json.Marshal(w)
		if err != nil {
			return nil, fmt.Errorf("nexmark: q7 window ending at %d: %w", w.End, err)
		}
		items = append(items, b)
	}
	return items, nil
}

// restore merges restored windows into o's: items of several old subtasks
// may hold the same window.
func (o *q7Local) restore(items [][]byte) error {
	for _, it := range items {
		var w q7Window
		if err := json.Unmarshal(it, &w); err != nil {
			return fmt.Errorf("nexmark: restore a q7 window: %w", err)
		}
		if len(w.Max.Bids) == 0 {
			return fmt.Errorf("nexmark: restore a q7 window: the window ending at %d has no bid", w.End)
		}
		i := o.window(w.End)
		for _, b := range w.Max.Bids {
			o.wins[i].Max = q7Add(o.wins[i].Max, b)
		}
	}
	return nil
}
