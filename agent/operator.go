package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/weirproject/weir/agent/segq"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/completions"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// operator is one subtask of an agent operator.
type operator[K comparable, IN, OUT any] struct {
	runtime.Base[OUT]
	def  *compiled
	opts Options
	// optsErr is Options.Validate of the options given to Apply.
	optsErr error
	keyOf   func(IN) K
	hash    keygroup.Hasher[K]
	kc      state.Codec[K]
	maxP    int

	backend *state.Backend[K]
	keys    *state.ValueState[K, *keyState[K, IN]]
	keysTab state.Table // keys' key-group view (checkpoints skip empty key groups)
	// live holds the keys with work on a Pebble backend (keys.go, S1);
	// nil in memory.
	live  map[K]*keyState[K, IN]
	q     segq.Queue[K, mark]
	ready []*keyState[K, IN] // ready[rhead:]: keys waiting for a slot, FIFO
	rhead int

	running    int // keys with an input in progress
	waiting    int // inputs accepted, not started
	unfinished int // inputs accepted, not finished (running + waiting)

	runCtx     context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mb         *runtime.Mailbox
	completed  completions.Stack[completion[K, IN], *completion[K, IN]] // finished runs (C1-C3)
	jobs       chan *completion[K, IN]                                  // to the workers
	jobsClosed bool
	busy       atomic.Int64         // actions queued or running
	workers    int                  // workers started
	freeC      []*completion[K, IN] // recycled completions
	freeR      []*runState          // recycled run states
	letter     func()
	closed     bool
	err        error
	outEvent   bool // OUT is Event: output events leave whole
	logger     *slog.Logger
	reg        *registration

	store    ActionStateStore
	finished map[string]int64 // key -> last finished seq since the last snapshot (store only)
	// retention decides what the store may prune (retention.go).
	retention retention

	tickArmed bool
	warnedAt  int64 // watermark value last warned about

	gHeld, gAge, gInFlight, gRunning *runtime.Gauge
	cActions, cErrors, cDropped      *runtime.Counter
	cReplayed, cCallsReplayed        *runtime.Counter
	cDiverged, cRestored             *runtime.Counter
	failed                           failedInputs // Options.FailedInputs and its counter
	calls                            callStats    // read-only after Open
	timer                            actionTimer  // used by action workers
	// usage holds the counters of each model of the agent, by name; made
	// in Open, read-only after.
	usage map[string]*modelUsage
	// elog is the event log; nil without Options.Listeners.
	elog *eventLog
	// tr makes spans; nil without Options.TracerProvider.
	tr *tracing
	// budgets is the ledger of Options.Budgets; nil without them.
	budgets *budgets
	// condAct is the activation of trigger conditions (subtask goroutine).
	condAct eventActivation
	// ttl holds a processing-time timer per short-term entry with a TTL
	// (namespace: the entry's name); nextWake is the earliest wake-up
	// asked of the runtime for it.
	ttl       *timer.Service[K, string]
	nextWake  int64
	cExpired  *runtime.Counter
	cMemEvent *runtime.Counter
	// takesAnswers says the operator has an answers input
	// (ApplyWithAnswers); waits are the registered waits of Await, with
	// their keys (subtask goroutine).
	takesAnswers bool
	waits        map[*waiter]any
	// answersEnd, with Options.EndAnswers, is shared by the subtasks;
	// inputEnded says this subtask's first input has ended or reached the
	// end of event time (twoInputOperator.ProcessWatermark), endReported
	// that it told answersEnd it has finished (subtask goroutine).
	answersEnd                                              *answersEnd
	inputEnded, endReported                                 bool
	cAnswers, cAnswersDropped, cAnswersEnded, cWaitTimeouts *runtime.Counter
	gWaits                                                  *runtime.Gauge
}

func newOperator[K comparable, IN, OUT any](def *compiled, keyOf func(IN) K, hash keygroup.Hasher[K], opts Options) *operator[K, IN, OUT] {
	return &operator[K, IN, OUT]{def: def, opts: opts, keyOf: keyOf, hash: hash,
		outEvent: reflect.TypeFor[OUT]() == reflect.TypeFor[Event]()}
}

func (o *operator[K, IN, OUT]) agentDef() *compiled { return o.def }

func (o *operator[K, IN, OUT]) log() *slog.Logger { return o.logger }

func (o *operator[K, IN, OUT]) encodeKey(key any) ([]byte, error) {
	k, ok := key.(K)
	if !ok {
		return nil, fmt.Errorf("agent: key %v is a %T, not the operator's key type", key, key)
	}
	b, err := o.kc.Append(nil, k)
	if err != nil {
		return nil, fmt.Errorf("agent: cannot encode key %v: %w", key, err)
	}
	return b, nil
}

// Open sets up state and metrics, restores checkpointed work and resumes
// it.
func (o *operator[K, IN, OUT]) Open(ctx *runtime.Context, out runtime.Output[OUT]) error {
	o.Base.Open(ctx, out)
	o.maxP = ctx.MaxParallelism
	o.logger = ctx.Logger
	o.mb = ctx.Mailbox()
	o.runCtx, o.cancel = context.WithCancel(context.Background())
	o.jobs = make(chan *completion[K, IN], o.opts.MaxConcurrentKeys)
	o.kc = state.DefaultCodec[K]()
	if err := o.openKeys(ctx.StateOptions()); err != nil {
		return err
	}
	clk := ctx.Clock
	o.q.Now = func() int64 { return clock.NowMillis(clk) }
	o.ttl = timer.NewServiceWithCodecs[K, string](ctx.KeyGroups, o.kc, nil)
	o.nextWake = math.MaxInt64
	o.ttl.OnProcessingHeadChange(o.scheduleTTL)
	o.cExpired = ctx.Counter("memoryExpired")
	o.cMemEvent = ctx.Counter("memoryUpdateEvents")
	o.waits = map[*waiter]any{}
	o.cAnswers = ctx.Counter("answersReceived")
	o.cAnswersDropped = ctx.Counter("answersDropped")
	o.cAnswersEnded = ctx.Counter("answersForEndedWaits")
	o.cWaitTimeouts = ctx.Counter("waitTimeouts")
	o.gWaits = ctx.Gauge("pendingWaits")
	o.gHeld = ctx.Gauge("heldWatermarks")
	o.gAge = ctx.Gauge("oldestHeldWatermarkAgeMs")
	o.gInFlight = ctx.Gauge("inFlightInputs")
	o.gRunning = ctx.Gauge("runningKeys")
	o.cActions = ctx.Counter("actionsRun")
	o.cErrors = ctx.Counter("actionErrors")
	o.cDropped = ctx.Counter("eventsUnhandled")
	o.cReplayed = ctx.Counter("actionsReplayed")
	o.cCallsReplayed = ctx.Counter("callsReplayed")
	o.cDiverged = ctx.Counter("divergences")
	o.cRestored = ctx.Counter("inputsRestored")
	o.failed.open(ctx, o.opts.FailedInputs)
	o.calls = newCallStats(ctx, o.def)
	o.timer = newActionTimer(ctx, o.def, clk.Now)
	o.usage = make(map[string]*modelUsage, len(o.def.models))
	for name := range o.def.models {
		o.usage[name] = newModelUsage(ctx, name, clk.Now, o.opts.Pricing)
	}
	if len(o.opts.Listeners) > 0 {
		o.elog = &eventLog{listeners: o.opts.Listeners, operator: ctx.Name, subtask: ctx.Subtask, now: clk.Now}
	}
	o.tr = newTracing(o.opts.TracerProvider, o.opts.TraceContent, ctx.Name, ctx.Subtask)
	if o.tr != nil {
		o.tr.contextOf = o.opts.TraceContextOf
	}
	o.budgets = newBudgets(o.opts.Budgets, o.def.modelNames(), ctx.Parallelism, clk, ctx)
	if o.opts.Store != nil {
		st, err := o.opts.Store(ctx)
		if err != nil {
			return fmt.Errorf("agent: opening the action-state store: %w", err)
		}
		o.store = st
		o.finished = map[string]int64{}
	}
	o.letter = func() {
		if o.closed {
			return
		}
		o.drain()
	}
	o.reg = register(ctx.Name, ctx.Subtask, o.mb, o.status)
	if err := o.restore(ctx); err != nil {
		return err
	}
	o.fillSlots()
	o.gauges()
	return o.err
}

// ProcessRecord queues the record as its key's next input and starts it if
// the key is idle and a slot is free. While MaxBufferedInputs inputs wait
// it first waits for some to start (back-pressure, G3).
func (o *operator[K, IN, OUT]) ProcessRecord(r runtime.Record[IN]) error {
	// Wait for room before accepting the record. Yield runs only this
	// operator's letters and those of operators downstream (never a
	// checkpoint, never an upstream operator that could call this one
	// again), also when this call runs inside an upstream agent's letter:
	// the wait is safe wherever ProcessRecord is called from.
	for o.waiting >= o.opts.MaxBufferedInputs && o.err == nil {
		if err := o.Ctx.Yield(); err != nil {
			return err
		}
	}
	return o.accept(r)
}

// accept is ProcessRecord without the wait for room: the two-input
// operator gets no record of its first input while MaxBufferedInputs wait
// (it deselects it, SelectsInput), except while a checkpoint's alignment
// needs it.
func (o *operator[K, IN, OUT]) accept(r runtime.Record[IN]) error {
	if o.err != nil {
		return o.err
	}
	k := o.keyOf(r.Value)
	ks, _ := o.lookup(k, keygroup.Assign(o.hash(k), o.maxP), true)
	ks.pending = append(ks.pending, pendingInput[IN]{value: r.Value, ts: r.Timestamp})
	o.waiting++
	o.unfinished++
	o.q.AddKey(k)
	if ks.run == nil && !ks.queued {
		o.enqueue(ks)
	}
	o.fillSlots()
	o.release()
	o.gauges()
	return o.err
}

// ProcessWatermark queues the watermark behind every unfinished input and
// releases what may leave.
func (o *operator[K, IN, OUT]) ProcessWatermark(ts int64) error {
	if mutant.On(mutant.AgentWatermarkPastRunning) && o.waiting == 0 && o.q.Held() == 0 {
		o.Out.EmitWatermark(ts)
		return o.err
	}
	o.q.AddWatermark(mark{kind: markWatermark, ts: ts})
	o.release()
	return o.err
}

// ProcessIdle queues the status change like a watermark, so that it never
// overtakes outputs of earlier inputs.
func (o *operator[K, IN, OUT]) ProcessIdle(idle bool) error {
	m := mark{kind: markActive}
	if idle {
		m.kind = markIdle
	}
	o.q.AddWatermark(m)
	o.release()
	return o.err
}

// EndInput waits until every input has finished and every held mark has
// left.
func (o *operator[K, IN, OUT]) EndInput() error {
	err := o.finishAll()
	o.flushLog()
	return err
}

// finishAll waits, serving the operator's letters, until every input has
// finished and every held mark has left.
func (o *operator[K, IN, OUT]) finishAll() error {
	for (o.unfinished > 0 || o.q.Held() > 0) && o.err == nil {
		if err := o.Ctx.Yield(); err != nil {
			return err
		}
	}
	return o.err
}

// Close cancels running actions and waits for their goroutines (and the
// store's pruning); it may be called more than once.
func (o *operator[K, IN, OUT]) Close() error {
	o.closed = true
	if o.cancel != nil {
		o.cancel()
	}
	if o.jobs != nil && !o.jobsClosed {
		close(o.jobs)
		o.jobsClosed = true // Close may be called again
	}
	o.wg.Wait()
	o.flushLog()
	if o.backend != nil {
		if err := o.backend.Close(); err != nil {
			o.logger.Warn("agent: closing the keyed-state backend", "err", err)
		}
	}
	if o.store != nil {
		if err := o.store.Close(); err != nil {
			o.logger.Warn("agent: closing the action-state store", "err", err)
		}
		o.store = nil
	}
	if o.reg != nil {
		o.reg.unregister()
		o.reg = nil
	}
	return nil
}

func (o *operator[K, IN, OUT]) enqueue(ks *keyState[K, IN]) {
	ks.queued = true
	o.ready = append(o.ready, ks)
}

// fillSlots starts (or resumes) inputs of ready keys while slots are free.
func (o *operator[K, IN, OUT]) fillSlots() {
	for o.running < o.opts.MaxConcurrentKeys && o.rhead < len(o.ready) && o.err == nil {
		ks := o.ready[o.rhead]
		o.ready[o.rhead] = nil
		o.rhead++
		if o.rhead == len(o.ready) {
			o.ready, o.rhead = o.ready[:0], 0
		} else if o.rhead > 1024 && o.rhead*2 > len(o.ready) {
			n := copy(o.ready, o.ready[o.rhead:])
			clear(o.ready[n:])
			o.ready, o.rhead = o.ready[:n], 0
		}
		ks.queued = false
		o.running++
		if ks.run == nil {
			o.begin(ks)
		}
		o.step(ks)
	}
}

// begin starts the key's oldest pending input: it takes the key's next
// sequence number and queues the input event's actions.
func (o *operator[K, IN, OUT]) begin(ks *keyState[K, IN]) {
	p := ks.popPending()
	o.waiting--
	seq := ks.nextSeq
	ks.nextSeq++
	var r *runState
	if n := len(o.freeR); n > 0 {
		r = o.freeR[n-1]
		o.freeR[n-1] = nil
		o.freeR = o.freeR[:n-1]
	} else {
		r = new(runState)
	}
	r.seq, r.ts, r.nextID = seq, p.ts, 1
	r.input = Event{Type: TypeInput, Value: p.value, Parent: -1}
	r.tasks = r.first[:0]
	if o.tr != nil {
		r.span = o.tr.startInput(ks.boxed, seq, any(p.value), false)
	}
	o.addTasks(ks.key, r, &r.input)
	ks.run = r
}

// addTasks queues the actions listening to ev: those of its type whose
// condition, if they have one, it meets. An event no action takes is
// counted as dropped. A condition that fails fails the job, or with
// Options.ContinueOnError counts as an action error and does not trigger
// its action.
func (o *operator[K, IN, OUT]) addTasks(key K, r *runState, ev *Event) {
	acts := o.def.byType[ev.Type]
	added := false
	for _, a := range acts {
		if cond := o.def.conds[a]; cond != nil {
			ok, err := cond.match(&o.condAct, ev)
			if err != nil {
				err = conditionFailed(o.def.actions[a], ev, err)
				o.cErrors.Inc()
				if !o.opts.ContinueOnError {
					o.fail(err)
					return
				}
				o.logger.Warn("agent: a trigger condition failed; the action does not run for this event", "err", err)
				o.sendFailed(key, r, o.def.actions[a], ev, err)
				continue
			}
			if !ok {
				continue
			}
		}
		r.tasks = append(r.tasks, task{ev: ev, action: a})
		added = true
	}
	if !added {
		o.cDropped.Inc()
	}
}

// step runs the key's next task, or finishes its input when none is left.
// In blocking mode it runs every task of the input in turn.
func (o *operator[K, IN, OUT]) step(ks *keyState[K, IN]) {
	for o.err == nil {
		r := ks.run
		if r.thead == len(r.tasks) {
			o.finish(ks)
			return
		}
		c := o.prepare(ks)
		if !o.opts.blocking {
			o.dispatch(c)
			return
		}
		o.execute(c)
		o.apply(c)
		o.recycle(c)
	}
}

// finish ends the key's input: its watermark reference goes, its slot is
// freed, and the key queues again if more inputs wait (G1, G8).
func (o *operator[K, IN, OUT]) finish(ks *keyState[K, IN]) {
	if o.store != nil {
		if kb, err := o.kc.Append(nil, ks.key); err == nil {
			o.finished[string(kb)] = ks.run.seq
		}
	}
	if ks.purgeDue {
		ks.purgeDue = false
		o.purgeExpired(ks)
	}
	ks.dropUsedAnswers()
	if r := ks.run; r.span != nil {
		r.span.End()
	}
	if r := ks.run; len(o.freeR) < 4*o.opts.MaxConcurrentKeys {
		*r = runState{}
		o.freeR = append(o.freeR, r)
	}
	ks.run = nil
	o.running--
	o.unfinished--
	if !o.q.RemoveKey(ks.key) {
		o.fail(fmt.Errorf("agent: internal error: no watermark reference for key %v at the end of its input", ks.key))
		return
	}
	if ks.hasPending() {
		o.enqueue(ks)
	} else {
		o.settle(ks)
	}
}

func (o *operator[K, IN, OUT]) fail(err error) {
	if o.err != nil {
		return
	}
	o.err = err
	o.Ctx.Fail(err)
	o.cancel()
}
