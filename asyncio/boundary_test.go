package asyncio

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// boundary records, on the task goroutine, which wrapped operators are
// inside ProcessRecord, and what their snapshots saw.
type boundary struct {
	inCall     map[string]bool
	snapshots  []string
	violations []string
	second     chan struct{} // closed when the async operator gets its second record
	records    int
}

// boundaryOp wraps an operator: it marks its ProcessRecord calls and
// checks, when a checkpoint snapshots it, that no wrapped operator of the
// chain is inside ProcessRecord (I10 stores the held record only because
// the old runtime could snapshot mid-call).
type boundaryOp struct {
	name  string
	b     *boundary
	inner runtime.OneInputOperator[int, int]
}

func (o *boundaryOp) Open(ctx *runtime.Context, out runtime.Output[int]) error {
	return o.inner.Open(ctx, out)
}

func (o *boundaryOp) ProcessRecord(r runtime.Record[int]) error {
	if o.name == "async" {
		if o.b.records++; o.b.records == 2 {
			close(o.b.second) // the first call blocks: this one waits for room
		}
	}
	o.b.inCall[o.name] = true
	err := o.inner.ProcessRecord(r)
	o.b.inCall[o.name] = false
	return err
}

func (o *boundaryOp) ProcessWatermark(ts int64) error { return o.inner.ProcessWatermark(ts) }
func (o *boundaryOp) ProcessIdle(idle bool) error     { return o.inner.ProcessIdle(idle) }
func (o *boundaryOp) EndInput() error                 { return o.inner.EndInput() }
func (o *boundaryOp) Close() error                    { return o.inner.Close() }

func (o *boundaryOp) SnapshotState(w *runtime.SnapshotWriter) error {
	o.b.snapshots = append(o.b.snapshots, o.name)
	for name, in := range o.b.inCall {
		if in {
			o.b.violations = append(o.b.violations, fmt.Sprintf("%s snapshotted while %s is inside ProcessRecord", o.name, name))
		}
	}
	if s, ok := o.inner.(runtime.Snapshotter); ok {
		return s.SnapshotState(w)
	}
	return nil
}

// passOp forwards records.
type passOp struct{ runtime.Base[int] }

func (o *passOp) ProcessRecord(r runtime.Record[int]) error { o.Out.Collect(r); return nil }
func (o *passOp) EndInput() error                           { return nil }

// TestCheckpointWhileBlockedAtCapacity: a checkpoint triggered while the
// async operator waits for room in ProcessRecord (Capacity 1, the first
// call blocked) is taken only once that call has returned: the source's
// trigger letter does not run inside the operator's Context.Yield, so no
// operator of the chain is snapshotted mid-call. (With a Yield that runs
// every letter the snapshot ran inside ProcessRecord.)
func TestCheckpointWhileBlockedAtCapacity(t *testing.T) {
	for _, m := range []string{"ordered", "unordered"} {
		t.Run(m, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b := &boundary{inCall: map[string]bool{}, second: make(chan struct{})}
			release := make(chan struct{})
			f := func(ctx context.Context, v int) ([]int, error) {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return []int{v}, nil
			}
			env := weir.NewEnvironment(weir.Config{Parallelism: 1,
				Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
			// More values than the source emits per poll (256), so that it
			// polls again, and serves its mailbox, after the blocked poll.
			vals := make([]int, 600)
			for i := range vals {
				vals[i] = i + 1
			}
			src := weir.FromSlice(env, "src", vals, watermark.NoWatermarks[int]().WithTimestamp(func(v int, _ int64) (int64, bool) { return int64(v), true }))
			up := weir.Transform(src, "up", func() runtime.OneInputOperator[int, int] {
				return &boundaryOp{name: "up", b: b, inner: &passOp{}}
			})
			out := weir.Transform(up, "async", func() runtime.OneInputOperator[int, int] {
				return &boundaryOp{name: "async", b: b, inner: newOperator(f, Options{Capacity: 1}.withDefaults("async"), m == "ordered")}
			})
			rec := record(out)
			job, err := env.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-b.second:
			case <-ctx.Done():
				t.Fatal("the async operator never got its second record")
			}
			cp := make(chan error, 1)
			go func() {
				_, _, err := job.TriggerCheckpoint(ctx)
				cp <- err
			}()
			// Give the coordinator time to post the trigger while the
			// operator waits (it posts within microseconds; a slow machine
			// only makes this test weaker, never wrong).
			time.Sleep(50 * time.Millisecond)
			close(release)
			if err := <-cp; err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}
			if len(b.violations) > 0 {
				t.Fatalf("snapshots not at record boundaries: %v", b.violations)
			}
			if len(b.snapshots) != 2 {
				t.Fatalf("snapshots of %v, want up and async once each", b.snapshots)
			}
			if got := rec.values(); len(got) != len(vals) {
				t.Fatalf("%d results, want %d", len(got), len(vals))
			}
		})
	}
}
