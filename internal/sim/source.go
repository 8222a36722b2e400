package sim

import (
	"encoding/binary"
	"fmt"

	"github.com/weirproject/weir/runtime"
)

// event is a record of the workload.
type event struct {
	Key string
	ID  int64
	TS  int64 // the record's timestamp, for the late output's lines
}

// barriers connects the source's reader with the driver of one attempt:
// the reader reaching a StepBarrier sends a new channel on reached and
// polls Wait until the driver closes it, after it has taken (or failed to
// take) a checkpoint. So every checkpoint's barrier
// enters the job at the same position of the workload, whatever the
// goroutine scheduling.
type barriers struct {
	reached chan chan struct{} // buffered for every barrier of the script
	// restore carries the restore barrier (Spec.RestoreCheck), which is
	// no step of the script: its checkpoint is S19's.
	restore chan chan struct{}
}

// source plays spec.Steps in one subtask; its checkpointed state is the
// index of the next step.
func source(spec *Spec, b *barriers) runtime.Source[event] {
	return runtime.SourceFunc[event](func(ctx runtime.SourceContext) (runtime.Reader[event], error) {
		if ctx.Parallelism != 1 {
			return nil, fmt.Errorf("sim: the source runs in one subtask, not %d", ctx.Parallelism)
		}
		r := &reader{spec: spec, b: b}
		if ctx.Restored != nil {
			items, err := ctx.Restored.List(runtime.SplitsList)
			if err != nil {
				return nil, err
			}
			if len(items) == 1 {
				v, n := binary.Varint(items[0])
				if n <= 0 || v < 0 || v > int64(len(spec.Steps)) {
					return nil, fmt.Errorf("sim: corrupt restored source position")
				}
				r.next, r.restored = int(v), true
			}
		}
		return r, nil
	})
}

type reader struct {
	spec     *Spec
	b        *barriers
	next     int
	restored bool
	started  bool
	wait     chan struct{} // the barrier being waited on, nil if none
	// snapped: the reader took its snapshot at the barrier it waits on,
	// and with SessionSpec.Overlap goes on without waiting for the
	// checkpoint to complete (sessionwin.go).
	snapped bool
	// atRestore: the barrier waited on is the restore barrier
	// (Spec.RestoreCheck), which is no step of the script.
	atRestore bool
}

func (r *reader) Poll(out runtime.SourceOutput[event]) (runtime.PollStatus, error) {
	if !r.started {
		r.started = true
		for sp := range r.spec.Splits {
			out.AddSplit(sp)
		}
		if r.restored {
			// The runtime restores no watermark: set each split's as the
			// steps before the position left it, before any record, so the
			// window operator sees the watermark the failure-free run had
			// at this position (the oracle's).
			wm := make([]int64, r.spec.Splits)
			have := make([]bool, r.spec.Splits)
			for _, st := range r.spec.Steps[:r.next] {
				if st.Kind == StepWatermark && (!have[st.Split] || st.TS > wm[st.Split]) {
					wm[st.Split], have[st.Split] = st.TS, true
				}
			}
			for sp := range wm {
				if have[sp] {
					out.EmitWatermark(sp, wm[sp])
				}
			}
			if r.spec.RestoreCheck {
				// S19: a checkpoint before the first record, whose
				// keyed state must be the restored one's.
				ch := make(chan struct{})
				r.wait, r.atRestore = ch, true
				r.b.restore <- ch
				return runtime.Wait, nil
			}
		}
	}
	if r.wait != nil {
		select {
		case <-r.wait:
		default:
			if !r.snapped {
				return runtime.Wait, nil
			}
		}
		if !r.atRestore {
			r.next++
		}
		r.wait, r.snapped, r.atRestore = nil, false, false
	}
	for k := 0; k < 64 && r.next < len(r.spec.Steps); k++ {
		st := r.spec.Steps[r.next]
		switch st.Kind {
		case StepRecord:
			out.Collect(st.Split, event{Key: st.Key, ID: st.ID, TS: st.TS}, st.TS)
		case StepWatermark:
			out.EmitWatermark(st.Split, st.TS)
		case StepBarrier:
			ch := make(chan struct{})
			r.wait = ch
			r.b.reached <- ch
			return runtime.Wait, nil
		}
		r.next++
	}
	if r.next < len(r.spec.Steps) {
		return runtime.More, nil
	}
	for sp := range r.spec.Splits {
		out.FinishSplit(sp)
	}
	return runtime.Done, nil
}

// Ready is the barrier's channel while the reader waits on one.
func (r *reader) Ready() <-chan struct{} { return r.wait }

// SnapshotSplits implements runtime.SplitSnapshotter. A checkpoint taken
// while the reader waits at a barrier records the position after it.
func (r *reader) SnapshotSplits(int64) ([][]byte, error) {
	pos := r.next
	if r.wait != nil && !r.atRestore {
		pos++
		r.snapped = r.spec.Session != nil && r.spec.Session.Overlap
	}
	return [][]byte{binary.AppendVarint(nil, int64(pos))}, nil
}

func (r *reader) Close() error { return nil }
