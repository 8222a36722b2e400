package sim

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
	"github.com/weirproject/weir/window"
)

// TestExpiredReadsTheCheckpoint checks S18's reading of a checkpoint: a
// window operator's key-group blob written by the real state backend and
// timer service (the layout of window/snapshot.go), holding the contents
// of window [0,10) of key "a" and its timer at 9, in a checkpoint whose
// source position puts the watermark at 5, passes; the same at watermark
// 9 (the window's cleanup time, lateness 0) fails, on the contents or the
// timer; and the final checkpoint (position: the end of the script) must
// hold neither.
func TestExpiredReadsTheCheckpoint(t *testing.T) {
	spec := &Spec{Splits: 1, Steps: []Step{
		{Kind: StepWatermark, TS: 5}, {Kind: StepBarrier},
		{Kind: StepWatermark, TS: 9}, {Kind: StepBarrier},
		{Kind: StepRecord, Key: "a", TS: 20},
	}}
	blob := func(contents, timers bool) []byte {
		rng := keygroup.Range{Start: 0, End: 127}
		b := state.NewBackend[string](rng)
		c, err := state.NamespacedValueWithCodecs[string, window.Window, acc](b, "window-contents", window.WindowCodec{}, state.JSONCodec[acc]())
		if err != nil {
			t.Fatal(err)
		}
		ts := timer.NewServiceWithCodecs[string, window.Window](rng, state.DefaultCodec[string](), window.WindowCodec{})
		b.SetCurrentKey("a", 7)
		if contents {
			c.Update(window.Window{Start: 0, End: 10}, acc{N: 1, Sum: 3})
		}
		if timers {
			ts.RegisterEventTimeTimer("a", 7, window.Window{Start: 0, End: 10}, 9)
		}
		sb, err := b.SnapshotKeyGroup(7)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := ts.SnapshotKeyGroup(7)
		if err != nil {
			t.Fatal(err)
		}
		return append(append(binary.AppendUvarint(nil, uint64(len(sb))), sb...), tb...)
	}
	check := func(pos int, kg []byte) *Failure {
		fs := vfs.NewMem()
		snap := &checkpoint.Snapshot{ID: 1, Kind: checkpoint.KindCheckpoint, MaxParallelism: 128, Operators: []*checkpoint.OperatorState{
			{UID: "src", Parallelism: 1, Subtasks: []*checkpoint.SubtaskState{{Lists: map[string]*checkpoint.ListState{
				"splits": {Mode: checkpoint.EvenSplit, Items: []checkpoint.Blob{checkpoint.Bytes(binary.AppendVarint(nil, int64(pos)))}}}}}},
			{UID: "window", Parallelism: 1, Subtasks: []*checkpoint.SubtaskState{{KeyGroups: map[int]checkpoint.Blob{7: checkpoint.Bytes(kg)}}}},
		}}
		loc, err := (checkpoint.Storage{FS: fs}).Write(checkpointDir+"/chk-000000000001", snap)
		if err != nil {
			t.Fatal(err)
		}
		return checkExpired(spec, fs, loc)
	}
	if f := check(2, blob(true, true)); f != nil {
		t.Fatalf("window [0,10) at watermark 5: %v", f)
	}
	for _, c := range []struct {
		pos              int
		contents, timers bool
		want             string
	}{
		{4, true, true, "event-time timer at 9"},
		{4, true, false, "contents of window [0,10)"},
		{4, false, true, "event-time timer at 9"},
		{5, true, false, "contents of window [0,10)"},
		{5, false, true, "event-time timer at 9"},
	} {
		f := check(c.pos, blob(c.contents, c.timers))
		if f == nil || f.Invariant != InvExpired || !strings.Contains(f.Detail, c.want) {
			t.Errorf("position %d, contents %v, timer %v: got %v, want S18 about %q", c.pos, c.contents, c.timers, f, c.want)
		}
	}
	if f := check(5, blob(false, false)); f != nil {
		t.Fatalf("an empty key group at the end: %v", f)
	}
}
