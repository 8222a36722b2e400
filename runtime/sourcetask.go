package runtime

import (
	"errors"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/watermark"
)

type sourceImpl[T any] struct {
	src      Source[T]
	strategy watermark.Strategy[T]
}

func (m *sourceImpl[T]) instantiate(ctx *Context, out any, sides []control) (instance, error) {
	r, err := m.src.CreateReader(SourceContext{Name: ctx.Name, Subtask: ctx.Subtask,
		Parallelism: ctx.Parallelism, Clock: ctx.Clock, Logger: ctx.Logger, Restored: ctx.restored,
		Counter: ctx.Counter, Gauge: ctx.Gauge, LabeledGauge: ctx.LabeledGauge})
	if err != nil {
		return nil, err
	}
	x := &sourceInstance[T]{reader: r, ctx: ctx, out: mainOutput[T](out, sides), tsOf: m.strategy.Timestamp,
		dead:        SideOutput(ctx, DeadLetterTag),
		deadCount:   ctx.Counter("deadLetters"),
		recordsOut:  ctx.Counter("recordsRead"),
		watermarkAt: ctx.Gauge(MetricWatermark)}
	x.watermarkAt.Set(watermark.Min)
	x.outRef = refOutputOf(x.out)
	x.outAll = allOutputOf(x.out)
	x.splits = watermark.NewSplits(m.strategy, ctx.Clock, combined[T]{x})
	// Time spent blocked by back-pressure must not count as silence
	// towards idleness (Flink's FLINK-35886).
	ctx.task.onBackpressure = func(blocked bool) {
		if blocked {
			x.splits.PauseAll()
		} else {
			x.splits.ResumeAll()
		}
	}
	return x, nil
}

// sourceInstance is a source subtask: it polls its reader, stamps records,
// runs one watermark generator per split and combines them (I3).
type sourceInstance[T any] struct {
	reader Reader[T]
	ctx    *Context
	out    Output[T]
	outRef refOutput[T] // out's main output, taking records by pointer (nil: Collect)
	outAll allOutput[T] // out's main output, taking runs of records (nil: one by one)
	// pend is the run of records in progress (CollectAll); pend[runFrom:runTo]
	// are those the generator has seen and that have not gone downstream.
	pend           []Record[T]
	runFrom, runTo int
	rec            Record[T] // the record being emitted (outRef's argument)
	tsOf           func(v T, sourceTs int64) (int64, bool)
	splits         *watermark.Splits[T]
	dead           Output[DeadLetter]
	deadCount      *Counter
	recordsOut     *Counter
	watermarkAt    *Gauge
	known          []bool
	closed         bool
	unpublished    int64 // records read, not yet added to recordsOut
	// noted counts the dead letters noted (Metrics.Note) and notedAt is
	// when the last was, to bound their rate.
	noted   int
	notedAt int64
	// finishing is set while a split is removed (FinishSplit) and at the
	// end; idlePending is an idle status the splits reported then, sent
	// when the Poll returns unless the source ended (combined.MarkIdle).
	finishing, idlePending bool
	// outIdle is the status downstream saw last.
	outIdle bool
}

// sendIdle sends a status change downstream.
func (x *sourceInstance[T]) sendIdle(idle bool) {
	if x.ctx.task.err != nil {
		return // I9
	}
	x.outIdle = idle
	x.out.EmitIdle(idle)
}

// publish adds the records read since the last call to the shared counter
// (no atomic operation per record).
func (x *sourceInstance[T]) publish() {
	if x.unpublished > 0 {
		x.recordsOut.Add(x.unpublished)
		x.unpublished = 0
	}
}

func (x *sourceInstance[T]) name() string      { return x.ctx.Name }
func (x *sourceInstance[T]) context() *Context { return x.ctx }
func (x *sourceInstance[T]) parts() []any      { return []any{x.reader} }
func (x *sourceInstance[T]) open() error       { return nil }
func (x *sourceInstance[T]) endInput() error   { return nil }
func (x *sourceInstance[T]) input(int) any     { panic("runtime: a source has no input") }
func (x *sourceInstance[T]) close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	return x.reader.Close()
}

// Collect implements SourceOutput.
func (x *sourceInstance[T]) Collect(split int, v T, ts int64) { x.CollectRef(split, &v, ts) }

// CollectRef implements SourceRefOutput. The value is copied once, into
// the record handed to the chained operator (by pointer where it takes one,
// RecordRefProcessor); the watermark generator reads only ts unless it
// reads records (watermark.TimestampGenerator).
func (x *sourceInstance[T]) CollectRef(split int, v *T, ts int64) {
	if x.ctx.task.err != nil {
		// The subtask has failed (an operator chained to the source, in
		// this Poll): the reader's later records are dropped, as a crash
		// would drop them; a restore reads them again (I9).
		return
	}
	if x.tsOf != nil {
		t, ok := x.tsOf(*v, ts)
		if !ok {
			x.noUsableTimestamp(split, v)
			return
		}
		ts = t
	} else if ts == NoTimestamp {
		x.noTimestamp(split, v)
		return
	}
	if split >= len(x.known) || !x.known[split] {
		x.AddSplit(split)
	}
	// The record goes out before any watermark it causes (a punctuated
	// generator may emit one from OnEvent), or it would be late.
	x.unpublished++
	if x.outRef != nil {
		x.rec.Value, x.rec.Timestamp = *v, ts
		x.outRef.collectRef(&x.rec)
	} else {
		x.out.Collect(Record[T]{Value: *v, Timestamp: ts})
	}
	x.splits.OnEventRef(split, v, ts)
}

// CollectAll implements SourceBatchOutput. Records go downstream in runs,
// through the chained operator's collectAll, and never move relative to
// a watermark, an idle status or a dead letter: where the split's
// generator keeps only the highest timestamp (watermark.RunGenerator) it
// observes the whole run at once, before the records leave, since it
// emits nothing for them; any other generator sees each record in turn,
// and the records it has seen are held (pend[runFrom:runTo]) until
// something else leaves the source (flushRun: an emission, a dead letter)
// or the run ends. Timestamps the source's strategy assigns
// (watermark.Strategy.Timestamp) are written into the run's records.
func (x *sourceInstance[T]) CollectAll(split int, recs []Record[T]) {
	t := x.ctx.task
	if x.outAll == nil || split >= len(x.known) || !x.known[split] || len(recs) == 0 {
		for i := range recs {
			x.CollectRef(split, &recs[i].Value, recs[i].Timestamp)
		}
		return
	}
	if t.err != nil {
		return // as in CollectRef (I9)
	}
	if x.tsOf == nil {
		hi := recs[0].Timestamp
		timed := hi != NoTimestamp
		for i := 1; timed && i < len(recs); i++ {
			ts := recs[i].Timestamp
			timed = ts != NoTimestamp
			hi = max(hi, ts)
		}
		if timed && x.splits.OnTimestamps(split, hi, len(recs)) {
			x.unpublished += int64(len(recs))
			x.outAll.collectAll(recs)
			return
		}
	}
	x.pend, x.runFrom, x.runTo = recs, 0, 0
	for i := range recs {
		ts := recs[i].Timestamp
		if x.tsOf != nil {
			at, ok := x.tsOf(recs[i].Value, ts)
			if !ok {
				x.noUsableTimestamp(split, &recs[i].Value) // sends the records before it
				x.runFrom, x.runTo = i+1, i+1
				continue
			}
			recs[i].Timestamp, ts = at, at
		} else if ts == NoTimestamp {
			x.noTimestamp(split, &recs[i].Value) // sends the records before it
			x.runFrom, x.runTo = i+1, i+1
			continue
		}
		x.runTo = i + 1
		x.splits.OnEventRef(split, &recs[i].Value, ts)
		if t.err != nil {
			break
		}
	}
	x.flushRun()
	x.pend = nil
}

// flushRun sends the records of the run in progress (CollectAll) that the
// generator has seen, before anything else leaves the source.
func (x *sourceInstance[T]) flushRun() {
	if x.runTo > x.runFrom {
		recs := x.pend[x.runFrom:x.runTo]
		x.runFrom = x.runTo
		if x.ctx.task.err == nil {
			x.unpublished += int64(len(recs))
			x.outAll.collectAll(recs)
		}
	}
}

// noUsableTimestamp sends a record whose timestamp the strategy does not
// assign to the dead letters.
func (x *sourceInstance[T]) noUsableTimestamp(split int, v *T) {
	x.DeadLetter(DeadLetter{Split: split, Value: *v, Reason: "record has no usable timestamp"})
}

// noTimestamp sends a record without a timestamp, which the strategy does
// not assign, to the dead letters.
func (x *sourceInstance[T]) noTimestamp(split int, v *T) {
	x.DeadLetter(DeadLetter{Split: split, Value: *v, Reason: "record has no timestamp and the source's strategy assigns none"})
}

// AddSplit implements SourceOutput.
func (x *sourceInstance[T]) AddSplit(split int) {
	for split >= len(x.known) {
		x.known = append(x.known, false)
	}
	if !x.known[split] {
		x.known[split] = true
		x.splits.Add(split)
	}
}

// FinishSplit implements SourceOutput.
func (x *sourceInstance[T]) FinishSplit(split int) {
	x.AddSplit(split)
	x.finishing = true
	x.splits.Remove(split)
	x.finishing = false
	x.known[split] = false // the id may start a new split later
}

// SourceWatermark implements SourceWatermarker.
func (x *sourceInstance[T]) SourceWatermark() int64 { return x.splits.Current() }

// SetSplitIdle implements SourceOutput.
func (x *sourceInstance[T]) SetSplitIdle(split int, idle bool) {
	x.AddSplit(split)
	x.splits.SetIdle(split, idle)
}

// EmitWatermark implements SourceOutput (the split form); see
// sourceInstance.EmitWatermark for the combined output.
func (x *sourceInstance[T]) EmitWatermark(split int, ts int64) {
	x.AddSplit(split)
	x.splits.Watermark(split, ts)
}

// DeadLetter implements SourceOutput.
func (x *sourceInstance[T]) DeadLetter(d DeadLetter) {
	x.flushRun()
	d.Source = x.ctx.Name
	x.deadCount.Inc()
	// A dead letter has no event time of its own. It is stamped with
	// processing time, but never behind the source's watermark, so that an
	// event-time consumer of the dead-letter stream does not see it late.
	now := clock.NowMillis(x.ctx.Clock)
	ts := now
	if wm := x.splits.Current(); wm != watermark.Max && wm >= ts {
		ts = wm + 1
	}
	if x.noted < deadLetterNotesFree || now-x.notedAt >= deadLetterNoteMillis {
		x.noted++
		x.notedAt = now
		x.ctx.Note(NoteKindDeadLetter, d.String())
	}
	x.dead.Collect(Record[DeadLetter]{Value: d, Timestamp: ts})
}

// combined receives the combined watermark of a source subtask's splits.
type combined[T any] struct{ x *sourceInstance[T] }

func (c combined[T]) EmitWatermark(ts int64) {
	c.x.flushRun()
	if c.x.ctx.task.err != nil {
		return // I9
	}
	c.x.watermarkAt.Set(ts)
	c.x.out.EmitWatermark(ts)
}

// MarkIdle sends the idle status, or, when a finished split's removal
// caused it, keeps it until the Poll returns: a reader that finishes its
// last split and then reports Done ends with the maximum watermark and no
// idle moment before it (an idle moment would let consumers move past
// what this subtask's downstream operators still emit), and one that
// finishes a split and adds another in the same Poll never goes idle.
func (c combined[T]) MarkIdle() {
	c.x.flushRun()
	if c.x.finishing {
		c.x.idlePending = true
		return
	}
	c.x.sendIdle(true)
}

// MarkActive sends the active status, or cancels a kept idle one
// (downstream never saw it).
func (c combined[T]) MarkActive() {
	c.x.flushRun()
	if c.x.idlePending {
		c.x.idlePending = false
		return
	}
	c.x.sendIdle(false)
}

func (x *sourceInstance[T]) run(t *task) error {
	// The periodic emission starts after the reader's first Poll, in
	// which it adds the splits it starts with (Reader): a tick before it
	// would find no split and take the subtask idle (watermark I16), and
	// the job's event time would move on without it; its first records
	// would then be late downstream. (Found by the simulator: a loaded
	// machine delayed a Kafka source subtask's first Poll past the first
	// tick, and a window dropped its partitions' records as late.)
	ticking := t.job.cfg.AutoWatermarkInterval <= 0
	startTicks := func() {
		ticking = true
		d := t.job.cfg.AutoWatermarkInterval.Milliseconds()
		if d <= 0 {
			d = 1
		}
		var tick func(now int64)
		tick = func(now int64) {
			x.splits.OnPeriodicEmit()
			t.timers.register(now+d, x.ctx.pos, tick)
		}
		t.timers.register(clock.NowMillis(x.ctx.Clock)+d, x.ctx.pos, tick)
	}
	for {
		if t.err != nil {
			return t.err
		}
		if !t.serve() {
			return errCancelled
		}
		if t.err != nil {
			return t.err
		}
		if t.stopFor != 0 {
			// Past a stop's barrier: nothing more is read. Wait for the
			// cancellation, serving the mailbox (the snapshot's completion
			// or abort; after an abort, reading resumes).
			if err := t.yield(); err != nil {
				return err
			}
			continue
		}
		st, err := x.reader.Poll(x)
		if !ticking {
			startTicks()
		}
		if x.idlePending && st != Done {
			x.idlePending = false
			x.sendIdle(true)
		}
		if err != nil {
			return t.opError(x.ctx.Name, PhaseRead, err)
		}
		if t.err != nil {
			// An operator chained to the source failed in this Poll:
			// end now, not when something next wakes a waiting source
			// (its Ready channel, a timer), which may be never.
			return t.err
		}
		switch st {
		case More:
		case Wait:
			t.flushAll()
			select {
			case <-x.reader.Ready():
			case <-t.mailbox.wake:
				t.runLetters()
			case <-t.timers.C():
				t.fireTimers()
			case <-t.done:
				return errCancelled
			}
		case Done:
			// A bounded source ends with the maximum watermark (every split
			// has finished).
			x.finishing = true
			x.splits.OnPeriodicEmit()
			x.finishing = false
			x.idlePending = false // the maximum watermark follows: never idle before it
			if x.outIdle {
				// A watermark implies active (as a combiner's output does),
				// also for an operator chained to this source.
				x.sendIdle(false)
			}
			combined[T]{x}.EmitWatermark(watermark.Max)
			if t.err != nil {
				return t.err
			}
			return t.awaitFinalCheckpoint()
		default:
			return errors.New("runtime: reader returned an unknown PollStatus")
		}
	}
}
