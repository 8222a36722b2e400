package asyncio

import (
	"context"
	"fmt"
	"sync"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/completions"
	"github.com/weirproject/weir/internal/retry"
	"github.com/weirproject/weir/runtime"
)

type entryKind uint8

const (
	kindRecord entryKind = iota
	kindWatermark
	kindIdle
)

// entry is one element of the queue: an input record with its call and
// results, or a watermark or idle-status marker. Entries form a doubly
// linked list in input order; the subtask goroutine owns them, except that
// while a record's call runs its goroutine reads in and writes out, err and
// nextDone (handed over by the go statement and back by the completion
// stack).
type entry[IN, OUT any] struct {
	prev, next *entry[IN, OUT]
	kind       entryKind
	done       bool // record: its call completed successfully
	// epoch is the number of markers queued before the entry; in
	// unordered mode a record may be emitted when epoch == headEpoch.
	epoch uint64
	// val is the watermark of a watermark marker, or 1 (idle) / 0
	// (active) for a status marker.
	val int64
	in  runtime.Record[IN]
	seq int64 // position of the record in the subtask's input

	out []OUT
	err error
	// nextDone links the completion stack (package
	// internal/completions); nextWait the FIFO of records whose call has
	// not started yet.
	nextDone *entry[IN, OUT]
	nextWait *entry[IN, OUT]
}

// Next implements completions.Linked.
func (e *entry[IN, OUT]) Next() **entry[IN, OUT] { return &e.nextDone }

// operator is one subtask of an async operator.
type operator[IN, OUT any] struct {
	runtime.Base[OUT]
	f       Func[IN, OUT]
	opts    Options
	ordered bool

	// Shared with the call goroutines.
	runCtx    context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	mb        *runtime.Mailbox
	letter    func()                                             // drains the completion stack
	completed completions.Stack[entry[IN, OUT], *entry[IN, OUT]] // finished calls (C1-C3)

	// Subtask goroutine only.
	head, tail         *entry[IN, OUT]
	waitHead, waitTail *entry[IN, OUT]
	records            int // record entries queued (the inFlight gauge)
	running            int // calls started whose completion was not processed yet
	seq                int64
	tailEpoch          uint64 // markers queued so far
	headEpoch          uint64 // markers emitted so far
	draining           bool   // drain or emission in progress (re-entrancy guard)
	again              bool   // something became emittable during draining
	holding            bool   // held is the record ProcessRecord waits with
	held               runtime.Record[IN]
	emitting           *entry[IN, OUT]
	free               []*entry[IN, OUT]
	err                error
	closed             bool
	inFlight           *runtime.Gauge
	completedN         *runtime.Counter
	// markerAt holds, oldest first, when each queued marker (a watermark
	// or idle status held back behind running calls) was queued, in
	// milliseconds of the job's clock: the source of the gauges
	// MetricHeldWatermarks and MetricOldestHeldSince, set per marker.
	markerAt             []int64
	gHeld, gOldestHeldAt *runtime.Gauge
}

// Gauges of the watermarks an async operator holds back (I5): a watermark
// or idle status arriving while calls are queued waits behind them.
const (
	// MetricHeldWatermarks is the number of watermarks and idle-status
	// changes queued behind calls that have not finished.
	MetricHeldWatermarks = "heldWatermarks"
	// MetricOldestHeldSince is when the oldest of them was queued, in
	// Unix milliseconds of the job's clock; -1 when none is held.
	MetricOldestHeldSince = "oldestHeldWatermarkSinceMs"
)

func newOperator[IN, OUT any](f Func[IN, OUT], opts Options, ordered bool) *operator[IN, OUT] {
	return &operator[IN, OUT]{f: f, opts: opts, ordered: ordered}
}

func (o *operator[IN, OUT]) Open(ctx *runtime.Context, out runtime.Output[OUT]) error {
	o.Base.Open(ctx, out)
	o.mb = ctx.Mailbox()
	o.runCtx, o.cancel = context.WithCancel(context.Background())
	o.inFlight = ctx.Gauge("inFlight")
	o.completedN = ctx.Counter("completed")
	o.inFlight.Set(0)
	o.gHeld = ctx.Gauge(MetricHeldWatermarks)
	o.gOldestHeldAt = ctx.Gauge(MetricOldestHeldSince)
	o.heldChanged()
	o.letter = func() {
		if o.closed {
			return
		}
		o.processCompletions()
	}
	return o.restore(ctx)
}

// ProcessRecord waits while Capacity inputs are queued (I6), then queues
// r and starts its call.
func (o *operator[IN, OUT]) ProcessRecord(r runtime.Record[IN]) error {
	if o.err != nil {
		return o.err
	}
	switch {
	case o.holding:
		// Re-entrant input while an earlier record waits for room: the
		// earlier one goes first, and neither waits (see Re-entrancy).
		o.releaseHeld()
	case o.records >= o.opts.Capacity && !o.draining:
		o.held, o.holding = r, true
		for o.holding && o.records >= o.opts.Capacity {
			if err := o.block(); err != nil {
				o.holding = false
				return err
			}
		}
		if !o.holding {
			return nil // queued by a re-entrant call
		}
		o.holding, o.held = false, runtime.Record[IN]{}
	}
	o.enqueue(r)
	return nil
}

// releaseHeld queues the record ProcessRecord holds while it waits, because
// input arrived behind it re-entrantly.
func (o *operator[IN, OUT]) releaseHeld() {
	if o.holding {
		r := o.held
		o.holding, o.held = false, runtime.Record[IN]{}
		o.enqueue(r)
	}
}

// enqueue queues r and starts its call if a slot is free.
func (o *operator[IN, OUT]) enqueue(r runtime.Record[IN]) {
	e := o.alloc()
	e.kind = kindRecord
	e.in = r
	e.seq = o.seq
	o.seq++
	e.epoch = o.tailEpoch
	o.pushBack(e)
	o.records++
	o.inFlight.Set(int64(o.records))
	if o.waitHead == nil && o.running < o.opts.Capacity {
		o.start(e)
	} else {
		o.pushWait(e)
	}
}

// ProcessWatermark forwards ts at once when nothing is queued, and queues
// it otherwise (I5).
func (o *operator[IN, OUT]) ProcessWatermark(ts int64) error {
	o.releaseHeld()
	if o.head == nil {
		o.Out.EmitWatermark(ts)
		return nil
	}
	if t := o.tail; t.kind == kindWatermark && t != o.emitting {
		t.val = ts
		return nil
	}
	o.pushMarker(kindWatermark, ts)
	return nil
}

// ProcessIdle is ProcessWatermark for the idle status.
func (o *operator[IN, OUT]) ProcessIdle(idle bool) error {
	o.releaseHeld()
	if o.head == nil {
		o.Out.EmitIdle(idle)
		return nil
	}
	var v int64
	if idle {
		v = 1
	}
	o.pushMarker(kindIdle, v)
	return nil
}

// EndInput waits until every queued entry has been emitted (I8).
func (o *operator[IN, OUT]) EndInput() error {
	for o.head != nil {
		if err := o.block(); err != nil {
			return err
		}
	}
	return o.err
}

// Close cancels the running calls and waits for their goroutines (I8).
func (o *operator[IN, OUT]) Close() error {
	o.closed = true
	if o.cancel != nil {
		o.cancel()
	}
	o.wg.Wait()
	return nil
}

// pending returns the input records whose results have not been emitted
// yet, in input order: what a checkpoint must store to replay them. That
// includes the record ProcessRecord holds while it waits for room, which
// the upstream already handed over.
func (o *operator[IN, OUT]) pending() []runtime.Record[IN] {
	out := make([]runtime.Record[IN], 0, o.records+1)
	for e := o.head; e != nil; e = e.next {
		if e.kind == kindRecord {
			out = append(out, e.in)
		}
	}
	if o.holding {
		out = append(out, o.held)
	}
	return out
}

// block waits for at least one completion (or other work of this operator
// or of operators downstream) and returns the operator's failure, if any.
// Context.Yield runs nothing upstream of this operator and no checkpoint
// (see "Re-entrancy" in the package documentation), and it finds this
// operator's completion letter even when ProcessRecord runs inside an
// upstream operator's letter.
func (o *operator[IN, OUT]) block() error {
	if o.err != nil {
		return o.err
	}
	if err := o.Ctx.Yield(); err != nil {
		return err
	}
	return o.err
}

// start runs e's call on a new goroutine.
func (o *operator[IN, OUT]) start(e *entry[IN, OUT]) {
	o.running++
	o.wg.Add(1)
	go o.call(e)
}

func (o *operator[IN, OUT]) pushWait(e *entry[IN, OUT]) {
	if o.waitTail == nil {
		o.waitHead = e
	} else {
		o.waitTail.nextWait = e
	}
	o.waitTail = e
}

// startWaiting starts queued calls, oldest first, while slots are free.
func (o *operator[IN, OUT]) startWaiting() {
	for o.waitHead != nil && o.running < o.opts.Capacity {
		e := o.waitHead
		o.waitHead = e.nextWait
		if o.waitHead == nil {
			o.waitTail = nil
		}
		e.nextWait = nil
		o.start(e)
	}
}

// call is the goroutine of one record: it calls f (with retries), stores
// the outcome in e, pushes e on the completion stack and, if the stack was
// empty, posts the letter that drains it.
func (o *operator[IN, OUT]) call(e *entry[IN, OUT]) {
	defer o.wg.Done()
	out, err, ok := o.attempts(e)
	if !ok {
		return // cancelled: the operator is closing or has failed
	}
	e.out, e.err = out, err
	if o.completed.Push(e) {
		o.mb.Post(o.letter)
	}
}

// attempts calls f for e until it succeeds or the retries are used up. ok
// is false when the operator's context was cancelled.
func (o *operator[IN, OUT]) attempts(e *entry[IN, OUT]) (out []OUT, err error, ok bool) {
	// Waits of Backoff doubled up to 32 × Backoff, without jitter (I7),
	// on the job's clock: a job on a manual clock retries when it is
	// advanced.
	b := retry.Policy{Initial: o.opts.Backoff, Max: o.opts.Backoff << maxBackoffDoublings}.Start()
	for attempt := 1; ; attempt++ {
		var timedOut bool
		out, err, timedOut = o.attempt(e.in.Value)
		if o.runCtx.Err() != nil {
			return nil, nil, false
		}
		if timedOut {
			err = fmt.Errorf("%w after %v (input %d, timestamp %d, attempt %d of %d)",
				ErrTimeout, o.opts.Timeout, e.seq, e.in.Timestamp, attempt, o.opts.Retries+1)
		} else if err != nil {
			err = fmt.Errorf("asyncio: call for input %d (timestamp %d) failed on attempt %d of %d: %w",
				e.seq, e.in.Timestamp, attempt, o.opts.Retries+1, err)
		}
		if err == nil || attempt > o.opts.Retries {
			return out, err, true
		}
		if retry.Sleep(o.runCtx, o.Ctx.Clock, b.Next(0)) != nil {
			return nil, nil, false
		}
	}
}

// attempt makes one call of f, turning a panic into an error.
func (o *operator[IN, OUT]) attempt(in IN) (out []OUT, err error, timedOut bool) {
	ctx := o.runCtx
	if o.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(ctx, o.Ctx.Clock, o.opts.Timeout)
		defer func() {
			timedOut = ctx.Err() != nil
			cancel()
		}()
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	out, err = o.f(ctx, in)
	return out, err, false // timedOut is set by the deferred check
}

// processCompletions takes every completion off the stack and handles it,
// in completion order.
func (o *operator[IN, OUT]) processCompletions() {
	for e := o.completed.TakeAll(); e != nil; {
		next := e.nextDone
		e.nextDone = nil
		o.complete(e)
		e = next
	}
}

// complete handles the completion of e's call.
func (o *operator[IN, OUT]) complete(e *entry[IN, OUT]) {
	o.running--
	if o.err != nil {
		return
	}
	if e.err != nil {
		o.fail(e.err)
		return
	}
	o.completedN.Inc()
	e.done = true
	o.startWaiting()
	if o.draining {
		o.again = true
		return
	}
	if o.ordered {
		if e == o.head {
			o.drain()
		}
		return
	}
	if e.epoch != o.headEpoch {
		return // behind a marker that has not been emitted (I4)
	}
	o.draining = true
	o.emitRecord(e)
	o.remove(e)
	o.draining = false
	if o.again || (o.head != nil && o.head.kind != kindRecord) {
		o.drain()
	}
}

func (o *operator[IN, OUT]) fail(err error) {
	o.err = err
	o.Ctx.Fail(err)
	o.cancel()
}

// drain emits from the head of the queue what may be emitted: completed
// records (in ordered mode only while the head is one; in unordered mode
// every completed record before the first marker) and markers that reached
// the head. Re-entrant calls (through the output) only set again.
func (o *operator[IN, OUT]) drain() {
	if o.draining {
		o.again = true
		return
	}
	o.draining = true
	for {
		o.again = false
		o.walk()
		if !o.again {
			break
		}
	}
	o.draining = false
}

func (o *operator[IN, OUT]) walk() {
	for e := o.head; e != nil && o.err == nil; {
		switch {
		case e.kind != kindRecord:
			if e != o.head {
				return // records before the marker are still running
			}
			o.emitting = e
			if e.kind == kindWatermark {
				o.Out.EmitWatermark(e.val)
			} else {
				o.Out.EmitIdle(e.val != 0)
			}
			o.emitting = nil
			next := e.next
			o.remove(e)
			o.headEpoch++
			if len(o.markerAt) > 0 {
				o.markerAt = o.markerAt[:copy(o.markerAt, o.markerAt[1:])]
			}
			o.heldChanged()
			e = next
		case e.done:
			o.emitRecord(e)
			next := e.next
			o.remove(e)
			e = next
		case o.ordered:
			return
		default:
			e = e.next
		}
	}
}

// emitRecord emits e's results. e stays queued until they all are, so that
// a marker arriving re-entrantly is queued behind them.
func (o *operator[IN, OUT]) emitRecord(e *entry[IN, OUT]) {
	o.emitting = e
	ts := e.in.Timestamp
	for _, v := range e.out {
		o.Out.Collect(runtime.Record[OUT]{Value: v, Timestamp: ts})
	}
	o.emitting = nil
}

func (o *operator[IN, OUT]) pushMarker(kind entryKind, val int64) {
	e := o.alloc()
	e.kind = kind
	e.val = val
	e.epoch = o.tailEpoch
	o.tailEpoch++
	o.pushBack(e)
	o.markerAt = append(o.markerAt, clock.NowMillis(o.Ctx.Clock))
	o.heldChanged()
}

// heldChanged publishes the held markers (once per marker queued or
// emitted, never per record).
func (o *operator[IN, OUT]) heldChanged() {
	o.gHeld.Set(int64(len(o.markerAt)))
	if len(o.markerAt) == 0 {
		o.gOldestHeldAt.Set(-1)
	} else {
		o.gOldestHeldAt.Set(o.markerAt[0])
	}
}

func (o *operator[IN, OUT]) pushBack(e *entry[IN, OUT]) {
	e.prev = o.tail
	if o.tail == nil {
		o.head = e
	} else {
		o.tail.next = e
	}
	o.tail = e
}

// remove unlinks an emitted entry and recycles it.
func (o *operator[IN, OUT]) remove(e *entry[IN, OUT]) {
	if e.prev == nil {
		o.head = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		o.tail = e.prev
	} else {
		e.next.prev = e.prev
	}
	if e.kind == kindRecord {
		o.records--
		o.inFlight.Set(int64(o.records))
	}
	*e = entry[IN, OUT]{}
	if len(o.free) < 2*o.opts.Capacity+16 {
		o.free = append(o.free, e)
	}
}

func (o *operator[IN, OUT]) alloc() *entry[IN, OUT] {
	if n := len(o.free); n > 0 {
		e := o.free[n-1]
		o.free = o.free[:n-1]
		return e
	}
	return new(entry[IN, OUT])
}
