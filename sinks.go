package weir

import (
	"bufio"
	"fmt"
	"io"
	"sync"

	"github.com/weirproject/weir/runtime"
)

// SinkWriter writes the records of one sink subtask. Write is called per
// record on the subtask goroutine; Close once at the end (after the last
// Write, also when the job fails or is cancelled). Errors fail the job.
//
// A SinkWriter may also be a runtime.Snapshotter: its SnapshotState is then
// called at every checkpoint (instead of SinkFlusher's Flush), before the
// checkpoint's barrier leaves the subtask, and what it writes there is the
// sink's state, which the writer of a restored job finds in its Context's
// Restored (connector/jsonl's file sinks keep their files' lengths so).
type SinkWriter[T any] interface {
	Write(r Record[T]) error
	Close() error
}

// SinkEnder is an optional interface of a SinkWriter: EndInput is called
// once when the sink's input has ended normally (bounded input), before
// Close; a writer that needs to tell a normal end from a failure or a
// cancellation (to commit, say) does its final work there.
type SinkEnder interface {
	EndInput() error
}

// SinkFlusher is an optional interface of a SinkWriter: Flush is called at
// every checkpoint, before the checkpoint's barrier leaves the sink's
// subtask, to put out of the process what the writer has buffered. A
// writer that buffers and promises at least once needs it: a job restored
// from the checkpoint sends again only the records after it.
type SinkFlusher interface {
	Flush() error
}

// SinkFunc adapts a function to a SinkWriter with nothing to close.
type SinkFunc[T any] func(r Record[T]) error

// Write calls f.
func (f SinkFunc[T]) Write(r Record[T]) error { return f(r) }

// Close does nothing.
func (f SinkFunc[T]) Close() error { return nil }

// ToSink ends s in a sink; newWriter is called once per subtask.
func ToSink[T any](s Stream[T], name string, newWriter func(ctx *runtime.Context) (SinkWriter[T], error)) Stream[struct{}] {
	return Transform(s, name, func() runtime.OneInputOperator[T, struct{}] { return &sinkOp[T]{newWriter: newWriter} })
}

type sinkOp[T any] struct {
	runtime.Base[struct{}]
	newWriter func(*runtime.Context) (SinkWriter[T], error)
	w         SinkWriter[T]
}

func (o *sinkOp[T]) Open(ctx *runtime.Context, out runtime.Output[struct{}]) error {
	o.Base.Open(ctx, out)
	w, err := o.newWriter(ctx)
	o.w = w
	return err
}

func (o *sinkOp[T]) ProcessRecord(r Record[T]) error { return o.w.Write(r) }

// SnapshotState implements runtime.Snapshotter: a writer that is a
// runtime.Snapshotter itself snapshots (its state is the sink's), else a
// SinkFlusher flushes.
func (o *sinkOp[T]) SnapshotState(w *runtime.SnapshotWriter) error {
	if s, ok := o.w.(runtime.Snapshotter); ok {
		return s.SnapshotState(w)
	}
	if f, ok := o.w.(SinkFlusher); ok {
		return f.Flush()
	}
	return nil
}
func (o *sinkOp[T]) EndInput() error {
	if e, ok := o.w.(SinkEnder); ok {
		return e.EndInput()
	}
	return nil
}
func (o *sinkOp[T]) Close() error {
	if o.w == nil {
		return nil
	}
	return o.w.Close()
}

// Collected holds what a Collect sink received. Read it after the job
// ended (or while it runs: the reads are safe, and see what subtasks have
// handed over so far, which is at least everything before each subtask's
// last watermark).
type Collected[T any] struct {
	mu         sync.Mutex
	records    []Record[T]
	watermarks [][]int64 // per subtask
}

// Collect ends s in a sink that keeps every record, in arrival order per
// subtask, and every watermark each subtask saw. Meant for tests and small
// jobs.
func Collect[T any](s Stream[T]) *Collected[T] {
	c := &Collected[T]{}
	Transform(s, "collect", func() runtime.OneInputOperator[T, struct{}] { return &collectOp[T]{c: c} })
	return c
}

// Records returns a copy of the records received.
func (c *Collected[T]) Records() []Record[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record[T](nil), c.records...)
}

// Values returns the values received.
func (c *Collected[T]) Values() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]T, len(c.records))
	for i, r := range c.records {
		out[i] = r.Value
	}
	return out
}

// Watermarks returns the watermarks subtask i received, in order.
func (c *Collected[T]) Watermarks(i int) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.watermarks) {
		return nil
	}
	return append([]int64(nil), c.watermarks[i]...)
}

type collectOp[T any] struct {
	runtime.Base[struct{}]
	c     *Collected[T]
	local []Record[T]
	wms   []int64
}

func (o *collectOp[T]) ProcessRecord(r Record[T]) error {
	o.local = append(o.local, r)
	return nil
}

func (o *collectOp[T]) ProcessWatermark(ts int64) error {
	o.wms = append(o.wms, ts)
	o.handOver()
	return nil
}

func (o *collectOp[T]) handOver() {
	o.c.mu.Lock()
	o.c.records = append(o.c.records, o.local...)
	for len(o.c.watermarks) <= o.Ctx.Subtask {
		o.c.watermarks = append(o.c.watermarks, nil)
	}
	o.c.watermarks[o.Ctx.Subtask] = append(o.c.watermarks[o.Ctx.Subtask], o.wms...)
	o.c.mu.Unlock()
	o.local, o.wms = o.local[:0], o.wms[:0]
}

func (o *collectOp[T]) Close() error { o.handOver(); return nil }

// Print ends s in a sink writing each value to w, one per line (with
// fmt.Fprintln). Subtasks share w under a lock; lines are flushed at every
// watermark and at the end.
func Print[T any](s Stream[T], w io.Writer) {
	var mu sync.Mutex
	bw := bufio.NewWriter(w)
	Transform(s, "print", func() runtime.OneInputOperator[T, struct{}] { return &printOp[T]{mu: &mu, w: bw} })
}

type printOp[T any] struct {
	runtime.Base[struct{}]
	mu *sync.Mutex
	w  *bufio.Writer
}

func (o *printOp[T]) ProcessRecord(r Record[T]) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := fmt.Fprintln(o.w, r.Value)
	return err
}

func (o *printOp[T]) flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Flush()
}

func (o *printOp[T]) ProcessWatermark(int64) error { return o.flush() }
func (o *printOp[T]) EndInput() error              { return o.flush() }
func (o *printOp[T]) Close() error                 { return o.flush() }
