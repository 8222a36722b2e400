package agent

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/weirproject/weir/clock"

	"go.opentelemetry.io/otel/trace"
)

func (o *operator[K, IN, OUT]) prepare(ks *keyState[K, IN]) *completion[K, IN] {
	r := ks.run
	t := r.tasks[r.thead]
	var c *completion[K, IN]
	if n := len(o.freeC); n > 0 {
		c = o.freeC[n-1]
		o.freeC[n-1] = nil
		o.freeC = o.freeC[:n-1]
	} else {
		c = new(completion[K, IN])
	}
	c.ks = ks
	c.rc = &c.rcMem
	*c.rc = RunnerContext{host: o, key: ks.boxed, seq: r.seq, ev: t.ev, action: o.def.actions[t.action], actionIdx: t.action,
		short:   Memory{name: "short-term", base: ks.memory, expiry: ks.expiry, short: true},
		sensory: Memory{name: "sensory", base: r.sensory},
		sent:    c.sent[:0], elog: o.elog, kg: ks.kg}
	if o.takesAnswers {
		c.rc.kstate = ks
	}
	if o.tr != nil {
		if r.span == nil {
			// An input restored unfinished: its span starts with its
			// first task after the restore.
			r.span = o.tr.startInput(ks.boxed, r.seq, r.input.Value, true)
		}
		// An input the sampler dropped has no spans under it: its
		// actions and calls cost nothing more.
		if r.span.IsRecording() {
			c.parent, c.rc.tr = r.span, o.tr
		}
	}
	if len(ks.expiry) > 0 {
		c.rc.short.now = clock.NowMillis(o.Ctx.Clock)
	}
	if o.store != nil {
		c.rc.durable = &durableRun{store: o.store, kg: ks.kg, pos: Position{Seq: r.seq, EventID: t.ev.ID, Action: t.action},
			onReplay: o.cCallsReplayed.Inc, onDiverge: o.cDiverged.Inc, known: &r.known}
	}
	return c
}

// recycle returns an applied completion to the free list.
func (o *operator[K, IN, OUT]) recycle(c *completion[K, IN]) {
	*c = completion[K, IN]{}
	if len(o.freeC) < 4*o.opts.MaxConcurrentKeys {
		o.freeC = append(o.freeC, c)
	}
}

// dispatch queues c for the worker goroutines, starting a worker when
// every worker is busy. Workers live until Close, so a worker's stack has
// grown to what actions need (a goroutine per action would grow a fresh
// stack every time), and a worker that finds more queued work takes it
// without parking. There is at most one queued or running action per
// running key, so the queue (MaxConcurrentKeys long) never blocks, and
// there are never more workers than actions that ran at once (G3).
func (o *operator[K, IN, OUT]) dispatch(c *completion[K, IN]) {
	if o.busy.Add(1) > int64(o.workers) {
		o.workers++
		o.wg.Add(1)
		go o.worker(o.jobs)
	}
	o.jobs <- c
}

func (o *operator[K, IN, OUT]) worker(jobs <-chan *completion[K, IN]) {
	defer o.wg.Done()
	for c := range jobs {
		o.execute(c)
		o.busy.Add(-1)
		o.push(c)
	}
}

// execute runs the action of c (on its own goroutine, or on the subtask
// goroutine in blocking mode), turning a panic into an error.
func (o *operator[K, IN, OUT]) execute(c *completion[K, IN]) {
	ctx := o.runCtx
	if o.opts.ActionTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(ctx, o.Ctx.Clock, o.opts.ActionTimeout)
		defer cancel()
	}
	if c.parent != nil {
		var span trace.Span
		ctx, span = o.tr.startAction(ctx, c.parent, c.rc)
		defer func() {
			if c.replayed && span.IsRecording() {
				span.SetAttributes(attrReplayed.Bool(true))
			}
			endSpan(span, c.err)
		}()
	}
	// The action's context carries the job's clock, so that what an
	// action calls through Context() directly (an embedder, a vector
	// store's client) waits on it as the model and tool calls do.
	c.rc.ctx = clock.NewContext(ctx, o.Ctx.Clock)
	if d := c.rc.durable; d != nil {
		done, err := o.recall(c.rc, d)
		if err != nil || done {
			c.err, c.replayed = err, done && err == nil
			if l := o.elog; l != nil {
				if c.replayed {
					e := c.rc.entry(LogActionReplayed)
					e.Replayed = true
					l.emit(e)
				} else {
					e := c.rc.entry(LogActionError)
					e.Error = err.Error()
					l.emit(e)
				}
			}
			return
		}
	}
	if l := o.elog; l != nil {
		e := c.rc.entry(LogActionStart)
		e.Data = c.rc.ev
		l.emit(e)
	}
	start := o.timer.now()
	func() {
		defer func() {
			if p := recover(); p != nil {
				c.err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		c.err = c.rc.action.Run(c.rc, *c.rc.ev)
	}()
	took := o.timer.since(c.rc.actionIdx, start)
	if l := o.elog; l != nil {
		e := c.rc.entry(LogActionEnd)
		if c.err != nil {
			e.Kind, e.Error = LogActionError, c.err.Error()
		}
		e.DurationMicros = took.Microseconds()
		l.emit(e)
	}
	if d := c.rc.durable; d != nil {
		o.record(c, d)
	}
}
