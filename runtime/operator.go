package runtime

import (
	"context"
	"log/slog"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/keygroup"
)

// OneInputOperator is an operator with one input (which may merge several
// upstream streams of the same type). The runtime calls its methods from the
// subtask goroutine only, in this order:
//
//	Open, then any interleaving of ProcessRecord, ProcessWatermark,
//	ProcessIdle and work the operator posted to its Mailbox,
//	then EndInput once if the input ended (bounded input), then Close.
//
// Close is called after Open succeeded, whether the job ends normally,
// fails, or is cancelled. An error from any method fails the job; the
// error names the operator and subtask.
//
// ProcessWatermark receives the watermark already combined over all input
// channels; it is strictly increasing. An operator that emits records must
// emit those a watermark covers before it forwards the watermark.
type OneInputOperator[IN, OUT any] interface {
	Open(ctx *Context, out Output[OUT]) error
	ProcessRecord(r Record[IN]) error
	ProcessWatermark(ts int64) error
	ProcessIdle(idle bool) error
	EndInput() error
	Close() error
}

// KeyGroupProcessor is implemented by a keyed one-input operator that can
// take each record's key group from the key-by exchange feeding it (which
// computed it to route the record) instead of hashing the record's key
// again. The runtime calls ProcessRecordInKeyGroup instead of ProcessRecord
// for the records that arrive over a key-by edge; records from anywhere
// else (a chained operator, another kind of edge) still go to
// ProcessRecord. kg is the key group of the record under the job's max
// parallelism, computed with the edge's key-group function (KeyGroups), so
// an operator may use it only where that function is the one it would
// apply itself.
type KeyGroupProcessor[IN any] interface {
	ProcessRecordInKeyGroup(r Record[IN], kg int) error
}

// RecordRefProcessor is implemented by a one-input operator that can take
// a record by pointer. The runtime then calls ProcessRecordRef instead of
// ProcessRecord where it holds the record in memory of its own (the
// source's record, a batch from a channel), which saves copies of large
// record types on the per-record path. *r belongs to the operator for the
// duration of the call only, as a Record passed to ProcessRecord does; the
// operator must not modify it. ProcessRecordRef(&r) must do what
// ProcessRecord(r) does.
type RecordRefProcessor[IN any] interface {
	ProcessRecordRef(r *Record[IN]) error
}

// TwoInputOperator is an operator with two inputs of possibly different
// types. Its lifecycle is that of OneInputOperator; ProcessWatermark gets
// the minimum over both inputs (a watermark.Combiner over the two), and
// EndInput is called once per input (1 or 2) as each ends.
type TwoInputOperator[IN1, IN2, OUT any] interface {
	Open(ctx *Context, out Output[OUT]) error
	ProcessRecord1(r Record[IN1]) error
	ProcessRecord2(r Record[IN2]) error
	ProcessWatermark(ts int64) error
	ProcessIdle(idle bool) error
	EndInput(input int) error
	Close() error
}

// InputSelectable is implemented by a TwoInputOperator that decides which
// of its inputs the subtask reads (Flink's InputSelectable): an operator
// that must not take more of input 1 for now, but needs input 2 to make
// room (an agent whose waiting actions are answered on input 2), says so
// here instead of blocking in ProcessRecord1.
//
// SelectsInput(input) reports whether the subtask may give the operator
// records of input (1 or 2) now. The subtask asks before each record of a
// selecting operator and after each step of its loop (a batch, a mailbox
// letter, a timer): it takes no batch from a deselected input and stops
// in the middle of a batch when its input is deselected, resuming there,
// in channel order, once it is selected again; meanwhile it serves the
// other input, the mailbox and the timers. The watermarks, idle marks,
// barriers and end of input of a batch are handled after its records, as
// for any operator. With both inputs deselected the subtask runs only
// letters and timers, which must eventually select one.
//
// One exception keeps checkpoints live: while a checkpoint's barriers are
// being aligned and every live channel of the other input has delivered
// its barrier (so the other input can do nothing more for the
// checkpoint), a deselected input is read anyway until its own barriers
// have arrived. The operator then gets records it did not select, at most
// those its channels carry ahead of the barrier; without the exception the
// alignment would wait for the operator, and an operator waiting for the
// other input's records behind the barrier would wait for ever. (Flink
// refuses checkpointing for a job with an InputSelectable operator.)
//
// The interface is resolved once per subtask: an operator that does not
// implement it is read as before, both inputs always, whole batches at a
// time.
type InputSelectable interface {
	SelectsInput(input int) bool
}

// Base gives an operator the usual defaults: it keeps the Context and
// Output from Open, forwards watermarks and idleness unchanged, and does
// nothing at end of input or close. Embed it and override what differs.
// Its EndInput is the one-input form; a TwoInputOperator that embeds Base
// defines EndInput(input int), which shadows it.
type Base[OUT any] struct {
	Ctx *Context
	Out Output[OUT]
}

// Open stores ctx and out.
func (b *Base[OUT]) Open(ctx *Context, out Output[OUT]) error {
	b.Ctx, b.Out = ctx, out
	return nil
}

// ProcessWatermark forwards ts.
func (b *Base[OUT]) ProcessWatermark(ts int64) error {
	b.Out.EmitWatermark(ts)
	return nil
}

// ProcessIdle forwards the status.
func (b *Base[OUT]) ProcessIdle(idle bool) error {
	b.Out.EmitIdle(idle)
	return nil
}

// EndInput does nothing.
func (b *Base[OUT]) EndInput() error { return nil }

// Close does nothing.
func (b *Base[OUT]) Close() error { return nil }

// Context is what the runtime gives an operator subtask: who it is, its
// key groups, its clock and logger, and access to the subtask's mailbox and
// processing-time scheduler. Its methods may be called from the subtask
// goroutine only, except Mailbox().Post, which any goroutine may call.
type Context struct {
	// Name and UID identify the operator; UID is stable across job versions
	// when the user sets it.
	Name, UID string
	// Subtask is this subtask's index in [0, Parallelism).
	Subtask, Parallelism int
	// MaxParallelism is the number of key groups.
	MaxParallelism int
	// KeyGroups is the key-group range this subtask owns (meaningful for
	// keyed operators).
	KeyGroups keygroup.Range
	// Clock is processing time.
	Clock clock.Clock
	// Logger carries the operator and subtask as attributes.
	Logger *slog.Logger
	// RetainedCheckpoints is how many completed checkpoints the job keeps
	// (CheckpointConfig.Retain, 3 when unset): a restore may start from any
	// of them, so an operator keeping state outside its checkpoints must
	// keep what the oldest of them needs.
	RetainedCheckpoints int
	// Slice and Slices are Config.Slice: the job is slice Slice of Slices
	// jobs splitting one keyed job's key groups; Slices is 0 (or 1) when
	// the job is whole. See OwnedKeyGroups.
	Slice, Slices int

	task     *task
	pos      int32   // index in the task's chain (head = 0): see mailbox.go M1
	mb       Mailbox // handle tagging letters with pos
	node     *Node
	sides    map[int]any // side-output tag id -> Output[T]
	restored *Restored
	// stateBackend is the job's choice of keyed-state backend.
	stateBackend StateBackendConfig
}

// OwnedKeyGroups returns the key groups whose keys can reach this
// subtask: KeyGroups, narrowed to the job's slice when the job is one
// (Config.Slice; a keyed task of package cluster). An operator that keeps
// state per key group outside the job's checkpoints, in a place the other
// slices share (an action-state store in a Kafka topic, a directory of
// write-ahead logs), keeps it for these key groups, so that one slice
// never rebuilds, overwrites or prunes another's. It is empty when the
// subtask's key groups lie outside the slice (a slice run at parallelism
// above 1): the subtask then receives no keyed record.
func (c *Context) OwnedKeyGroups() keygroup.Range {
	if c.Slices <= 1 || keygroup.Validate(c.MaxParallelism, c.Slices) != nil || c.Slice < 0 || c.Slice >= c.Slices {
		return c.KeyGroups
	}
	return c.KeyGroups.Intersect(keygroup.RangeFor(c.MaxParallelism, c.Slices, c.Slice))
}

// Mailbox returns this operator's handle on the subtask's mailbox, through
// which other goroutines hand work (such as completions of asynchronous
// calls) to the subtask. Its letters are tagged as this operator's: they
// run from the subtask loop, or from the Yield of this operator or of an
// operator upstream of it in the chain. Call it from Open or later; the
// handle stays valid for the life of the operator.
func (c *Context) Mailbox() *Mailbox {
	if c.mb.m == nil {
		c.mb = Mailbox{m: &c.task.mailbox, pos: c.pos}
	}
	return &c.mb
}

// RegisterProcessingTimer runs f on the subtask goroutine once processing
// time reaches ts (Unix ms); f gets the time it actually ran at. A ts in the
// past runs f at the next turn of the loop. Like a letter posted through
// Mailbox, f runs from the subtask loop, or from the Yield of this operator
// or of an operator upstream of it.
func (c *Context) RegisterProcessingTimer(ts int64, f func(now int64)) {
	c.task.timers.register(ts, c.pos, f)
}

// Yield blocks until at least one mailbox letter or due processing-time
// timer of this operator, or of an operator downstream of it in the chain,
// has run. Operators call it to wait for asynchronous work to finish (for
// example when their in-flight capacity is used up) while keeping the
// subtask responsive.
//
// Yield runs nothing else: letters and timers of operators upstream in the
// chain and the subtask's own letters (checkpoint triggers among them)
// stay queued and run from the subtask loop after the current call
// returns. So while an operator waits in Yield, no operator upstream of it
// runs (nothing calls it again mid-call) and no checkpoint is taken (its
// state is snapshotted at a call boundary). An operator may call Yield from
// any of its methods, also when it is called from inside an upstream
// operator's letter (its own queued letters are found there too). Called
// from inside one of its own letters, Yield may run its other letters
// nested in that one.
//
// It returns an error if the job is being cancelled or the subtask has
// failed.
func (c *Context) Yield() error { return c.task.yieldAt(c.pos) }

// Counter returns the named counter of this operator subtask, creating it
// on first use. Counters show in the job's metrics.
func (c *Context) Counter(name string) *Counter {
	return c.task.job.cfg.Metrics.counter(c.Name, c.Subtask, name)
}

// Gauge returns the named gauge of this operator subtask.
func (c *Context) Gauge(name string) *Gauge {
	return c.task.job.cfg.Metrics.gauge(c.Name, c.Subtask, name)
}

// LabeledCounter returns the counter of this operator subtask with the
// given name and further labels (for example the model or tool a call went
// to), creating it on first use. Every counter of one name must carry the
// same label names, in the same order.
func (c *Context) LabeledCounter(name string, labels ...Label) *Counter {
	return c.task.job.cfg.Metrics.counter(c.Name, c.Subtask, name, labels...)
}

// LabeledHistogram returns the histogram of this operator subtask with the
// given name and labels, creating it on first use with the given bucket
// upper bounds (inclusive, ascending, in the unit observations are made
// in); scale converts that unit to the exported one (1e-6 for
// microseconds observed and seconds exported). Every histogram of one name
// must carry the same label names and bounds.
func (c *Context) LabeledHistogram(name string, scale float64, bounds []int64, labels ...Label) *Histogram {
	return c.task.job.cfg.Metrics.histogram(c.Name, c.Subtask, name, scale, bounds, labels...)
}

// Note records a rare event of this operator subtask (a dead letter, a
// failure skipped) with a text for people; the job keeps the latest ones
// (Metrics.Notes). It takes a lock and keeps text: call it for exceptional
// events only, and at a bounded rate (never per record on a hot path).
func (c *Context) Note(kind, text string) {
	c.task.job.cfg.Metrics.Note(c.Name, c.Subtask, kind, clock.NowMillis(c.Clock), text)
}

// LabeledGauge returns the gauge of this operator subtask with the given
// name and further labels (for example topic and partition), creating it on
// first use. Every gauge of one name must carry the same label names, in the
// same order.
func (c *Context) LabeledGauge(name string, labels ...Label) *Gauge {
	return c.task.job.cfg.Metrics.gauge(c.Name, c.Subtask, name, labels...)
}

// SideOutput returns the Output of side output tag for the operator that
// owns ctx. Records sent to a side output nobody consumes are discarded.
// Watermarks and idleness reach side outputs through the main Output.
func SideOutput[T any](ctx *Context, tag *OutputTag[T]) Output[T] {
	if o, ok := ctx.sides[tag.id]; ok {
		return o.(Output[T])
	}
	return discard[T]{}
}

type discard[T any] struct{}

func (discard[T]) Collect(Record[T])   {}
func (discard[T]) EmitWatermark(int64) {}
func (discard[T]) EmitIdle(bool)       {}

// Done is closed when the job is being cancelled (or has failed). Work an
// operator started on other goroutines should stop then. It is nil (never
// closed) for a Context that belongs to no running job.
func (c *Context) Done() <-chan struct{} {
	if c.task == nil {
		return nil
	}
	return c.task.job.done
}

// JobContext returns a context that ends when the job is cancelled or
// fails (Done), for a call that blocks the subtask on something outside
// the job (a store's open or restore waiting for brokers). It carries no
// clock: such calls wait in real time, and a job's manual clock moves
// only with what the job does, which waits for them. Call stop when the
// call has returned: it ends the context and waits for the goroutine
// that watches Done.
func (c *Context) JobContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-c.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-watched
	}
}

// Fail fails the job with err, naming this operator and subtask. Use it
// from mailbox letters and timer callbacks, which cannot return errors.
func (c *Context) Fail(err error) { c.task.fail(c.Name, err) }
