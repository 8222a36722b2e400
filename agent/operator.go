package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/agent/segq"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"

	"go.opentelemetry.io/otel/trace"
)

// Options configure Apply. The zero value is usable: every field documents
// its default.
type Options struct {
	// MaxConcurrentKeys bounds the keys whose input is in progress at once
	// in one subtask (the in-flight limit). 0 means 256.
	MaxConcurrentKeys int
	// MaxBufferedInputs bounds the inputs a subtask has accepted but not
	// started (waiting for their key or for a slot). Beyond it
	// ProcessRecord waits for inputs to finish, serving the mailbox
	// (back-pressure); a checkpoint barrier then waits too. 0 means
	// 4 × MaxConcurrentKeys.
	MaxBufferedInputs int
	// ActionTimeout bounds every action run (its context's deadline), on
	// the job's clock (weir.Config.Clock): with a manual clock, an action
	// times out when the clock has moved by ActionTimeout since it
	// started (clock.WithTimeout). 0 means no bound.
	ActionTimeout time.Duration
	// ContinueOnError makes a failed action (an error or a panic) not fail
	// the job: the failure is logged and counted (counter actionErrors),
	// the action's events and memory writes are dropped, and the input goes
	// on with its remaining actions. An error of the action-state store
	// fails the job all the same: without a record, a restore would repeat
	// side effects.
	ContinueOnError bool
	// FailedInputs, with ContinueOnError, receives a FailedInput (the
	// input, its key and sequence number, the action, its RunID and the
	// error) for every failed action run, with the input's timestamp: read
	// it with weir.SideOutput on the stream Apply returns, so that no input
	// is lost without a trace. nil means failed runs are logged and
	// counted (counters actionErrors and failedInputs) only.
	FailedInputs *runtime.OutputTag[FailedInput]
	// Blocking runs actions synchronously on the subtask goroutine, one at
	// a time: the naive design, kept for comparisons (benchmarks). A slow
	// action then stalls the subtask, its timers and checkpoints.
	Blocking bool
	// StallWarning is how long the oldest held watermark may wait before a
	// warning names the keys holding it; 0 means one minute, negative
	// disables the warning.
	StallWarning time.Duration
	// Store, when set, opens the action-state store of each subtask (for
	// example wal.Factory): completed actions are recorded before their
	// outputs leave and skipped after a restore, and durable calls are
	// recorded and replayed (durable execution): Durable calls, and, unless
	// NonDurableCalls, every model and tool call (RunnerContext.Chat and
	// CallTool, so every step of ReAct). nil means no store.
	Store StoreFactory
	// NonDurableCalls makes RunnerContext.Chat and CallTool plain calls
	// even with a Store: not recorded, not replayed after a restore, and
	// without an idempotency key (as they are without a Store). Only
	// Durable calls are then recorded.
	NonDurableCalls bool
	// AllowRepeatedSideEffects lets a restore go on, with a warning, when
	// the action-state store lacks states the restored checkpoint needs
	// (agent.ErrStatesMissing: a WAL directory of another host or a new
	// one, a Kafka topic deleted or past retention, a checkpoint or
	// savepoint older than the store's prune horizon). The actions of the
	// inputs those states belonged to then run again, with their side
	// effects. false means such a restore fails the job with an error
	// saying what is missing.
	AllowRepeatedSideEffects bool
	// Listeners receive the event log of every action run: starts, model
	// and tool calls and their results, outputs, memory updates, errors
	// and replays (see LogEntry; package agent/eventlog writes it to a
	// JSON-lines file or a Kafka topic). nil means no log, at the cost of
	// a nil check per action.
	Listeners []Listener
	// TracerProvider, when set, traces every input's execution tree: a
	// span per input, per action run (replayed ones marked), per model
	// and tool call made through the RunnerContext, with the client's
	// retries and rate-limit waits as span events (trace.go,
	// docs/tracing.md). Sampling is the provider's. nil means no tracing,
	// at the cost of a nil check per input, action and call.
	TracerProvider trace.TracerProvider
	// TraceContent puts the prompts and completions of model calls and
	// the arguments and results of tool calls on their spans
	// (gen_ai.input.messages, gen_ai.output.messages,
	// gen_ai.tool.call.arguments, gen_ai.tool.call.result). false means
	// spans carry no content: the data may be personal.
	TraceContent bool
	// TraceContextOf, with TracerProvider, returns the W3C trace context
	// (traceparent, tracestate) an input carries, such as the headers of
	// the Kafka record it was read from: the input's trace then continues
	// it (its span a child of the remote one). nil means inputs that
	// implement TraceContextCarrier (kafka.Message) carry theirs, others
	// none.
	TraceContextOf func(input any) (traceparent, tracestate string)
	// Budgets bound the tokens and requests of the model calls made
	// through RunnerContext.Chat per key, per model or per job over a
	// tumbling processing-time window, checked before each call, with
	// what a call does at the limit: fail, wait for the next window, or
	// fall back to another model (budget.go). Their spend of the current
	// window is checkpointed. nil means no budgets, at the cost of a nil
	// check per call.
	Budgets []Budget
	// Pricing prices the model calls made through RunnerContext.Chat
	// (model.Pricing: currency per million prompt and completion tokens,
	// by the model that answered, else by the name in Agent.Models): their
	// spend is counted in millionths of the currency by the counter
	// modelSpendMicros, labelled model (the name in Agent.Models), for
	// the calls whose tokens are counted (a reply replayed from the store
	// is not charged again). A call whose model has no price counts
	// nothing. nil means no spend metric.
	Pricing model.Pricing
	// EndAnswers, with ApplyWithAnswers, is called once, from a subtask
	// goroutine, when the agent's input has ended on every subtask and
	// each subtask has finished every input, its pending waits included
	// (answered or timed out). Close the answers source's Stop channel
	// (kafka.Options.Stop) there, so that a job whose input is bounded
	// ends although its answers topic never does: the end of input waits
	// for the pending waits, at most until their deadlines, and the
	// answers input never holds completion. It is called at most once per
	// ApplyWithAnswers, also across restarts of the job (a restarted
	// attempt's waits then end with the answers read until then, or time
	// out). nil means the operator ends when both of its inputs have
	// ended. Apply refuses it.
	EndAnswers func()
}

// Validate reports what is wrong with the options (nil if nothing is): the
// limits and the action time-out must not be negative. Apply's operator
// fails the job with its error when the job starts.
func (o Options) Validate() error {
	var errs []error
	if o.MaxConcurrentKeys < 0 {
		errs = append(errs, fmt.Errorf("agent: Options.MaxConcurrentKeys %d: want 0 (meaning 256) or a positive number of keys", o.MaxConcurrentKeys))
	}
	if o.MaxBufferedInputs < 0 {
		errs = append(errs, fmt.Errorf("agent: Options.MaxBufferedInputs %d: want 0 (meaning 4 × MaxConcurrentKeys) or a positive number of inputs", o.MaxBufferedInputs))
	}
	if o.ActionTimeout < 0 {
		errs = append(errs, fmt.Errorf("agent: Options.ActionTimeout %v: want 0 (no bound) or a positive duration", o.ActionTimeout))
	}
	if o.FailedInputs != nil && !o.ContinueOnError {
		errs = append(errs, errors.New("agent: Options.FailedInputs is set without ContinueOnError: a failed action fails the job; set ContinueOnError too, or leave FailedInputs nil"))
	}
	errs = append(errs, validateBudgets(o.Budgets)...)
	if err := o.Pricing.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("agent: Options.Pricing: %w", err))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	if o.MaxConcurrentKeys <= 0 {
		o.MaxConcurrentKeys = 256
	}
	if o.MaxBufferedInputs <= 0 {
		o.MaxBufferedInputs = 4 * o.MaxConcurrentKeys
	}
	if o.StallWarning == 0 {
		o.StallWarning = time.Minute
	}
	return o
}

// Apply runs agent a on the keyed stream ks and returns the stream of its
// outputs: the values of the output events, converted to OUT (directly, or
// through JSON), or the output events themselves, lineage included, when
// OUT is Event. It panics if the agent is invalid (no actions, duplicate
// names, an action listening to output events): that is a bug in the code
// building the job. See the package documentation for the guarantees.
func Apply[K comparable, IN, OUT any](ks weir.KeyedStream[K, IN], name string, a *Agent, opts Options) weir.Stream[OUT] {
	def, err := compile(a)
	if err != nil {
		panic(fmt.Sprintf("agent.Apply(%q): %v", name, err))
	}
	optsErr := errors.Join(opts.Validate(), validateBudgetModels(opts.Budgets, def))
	if opts.EndAnswers != nil {
		optsErr = errors.Join(optsErr, errors.New("agent: Options.EndAnswers is for ApplyWithAnswers (an agent with an answers input); leave it nil with Apply"))
	}
	opts = opts.withDefaults()
	key, hash := ks.Key(), ks.Hasher()
	return weir.TransformKeyed(ks, name, func() runtime.OneInputOperator[IN, OUT] {
		op := newOperator[K, IN, OUT](def, key, hash, opts)
		op.optsErr = optsErr
		return op
	})
}

// Validate implements runtime.Validator: the job does not start with bad
// Options.
func (o *operator[K, IN, OUT]) Validate() error { return o.optsErr }

// mark is a watermark or an idle-status change held by the segmented
// queue.
type mark struct {
	kind int8 // markWatermark, markIdle, markActive
	ts   int64
}

const (
	markWatermark int8 = iota
	markIdle
	markActive
)

// completion is one finished action run, handed from its goroutine to the
// subtask goroutine.
//
// Completions are recycled by the subtask goroutine once applied (an
// action must not use its RunnerContext after it returns), so a run
// allocates nothing of the operator's own in the steady state.
type completion[K comparable, IN any] struct {
	ks   *keyState[K, IN]
	rc   *RunnerContext
	err  error
	next *completion[K, IN]
	// replayed says the run was a completed one replayed from the store.
	replayed bool
	// parent is the input's span (tracing on, the input sampled).
	parent trace.Span
	rcMem  RunnerContext // rc points here
	sent   [2]Event      // initial storage of rc.sent
}

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
	q       segq.Queue[K, mark]
	ready   []*keyState[K, IN] // ready[rhead:]: keys waiting for a slot, FIFO
	rhead   int

	running    int // keys with an input in progress
	waiting    int // inputs accepted, not started
	unfinished int // inputs accepted, not finished (running + waiting)

	runCtx     context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mb         *runtime.Mailbox
	completed  atomic.Pointer[completion[K, IN]]
	jobs       chan *completion[K, IN] // to the workers
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
	prunes   []pendingPrune
	// retained holds the ids of the completed checkpoints a restore may
	// start from (at most Context.RetainedCheckpoints, oldest first; the
	// restored one too); savepoints are the ids of savepoints in progress,
	// which do not count (the runtime keeps them apart).
	retained   []int64
	savepoints map[int64]bool

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
	// inputEnded says this subtask's first input has ended, endReported
	// that it told answersEnd it has finished (subtask goroutine).
	answersEnd                               *answersEnd
	inputEnded, endReported                  bool
	cAnswers, cAnswersDropped, cWaitTimeouts *runtime.Counter
	gWaits                                   *runtime.Gauge
}

// pendingPrune is what a checkpoint covers: the inputs finished before its
// snapshot, prunable from the store once it completes.
type pendingPrune struct {
	id   int64
	upTo map[string]int64
}

func newOperator[K comparable, IN, OUT any](def *compiled, keyOf func(IN) K, hash keygroup.Hasher[K], opts Options) *operator[K, IN, OUT] {
	return &operator[K, IN, OUT]{def: def, opts: opts, keyOf: keyOf, hash: hash,
		outEvent: reflect.TypeFor[OUT]() == reflect.TypeFor[Event]()}
}

func (o *operator[K, IN, OUT]) agentDef() *compiled { return o.def }
func (o *operator[K, IN, OUT]) log() *slog.Logger   { return o.logger }
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
	o.backend = state.NewBackend[K](ctx.KeyGroups)
	o.backend.SetKeyCodec(o.kc)
	var err error
	o.keys, err = state.ValueWithCodec[K, *keyState[K, IN]](o.backend, "agent", keyStateCodec[K, IN]{def: o.def, in: state.JSONCodec[IN]()})
	if err != nil {
		return err
	}
	o.keysTab, _ = o.backend.Table(o.keys.Name())
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
// it first waits for some to start (back-pressure).
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
	if o.err != nil {
		return o.err
	}
	k := o.keyOf(r.Value)
	o.backend.SetCurrentKey(k, keygroup.Assign(o.hash(k), o.maxP))
	ks, ok := o.keys.Value()
	if !ok {
		ks = &keyState[K, IN]{key: k, boxed: k, kg: o.backend.CurrentKeyGroup()}
		o.keys.Update(ks)
	}
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

// flushLog flushes the event log's buffering listeners; an error is
// logged, not fatal (the log is an observation of the job).
func (o *operator[K, IN, OUT]) flushLog() {
	if err := o.elog.flush(); err != nil {
		o.logger.Warn("agent: writing the event log failed", "err", err)
	}
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

// SnapshotState implements runtime.Snapshotter: per key group, the keyed
// state (sequence numbers, memory, pending inputs, unfinished inputs with
// their remaining tasks). Running actions are not waited for: their tasks
// are stored and run again after a restore. The final checkpoint of a
// bounded job is the exception (runtime.SnapshotWriter.Final): no input
// follows it, so every input is finished first, as at the end of input,
// and the checkpoint covers all the outputs. Otherwise a restore from it
// would run again the inputs whose outputs the end of input has emitted
// (and a two-phase-commit sink committed).
func (o *operator[K, IN, OUT]) SnapshotState(w *runtime.SnapshotWriter) error {
	if w.Final() && o.unfinished > 0 {
		o.logger.Info("agent: finishing the inputs in progress before the final checkpoint", "inputs", o.unfinished, "checkpoint", w.CheckpointID())
		if err := o.finishAll(); err != nil {
			return err
		}
	}
	o.flushLog()
	if o.store != nil && len(o.finished) > 0 {
		if mutant.On(mutant.AgentPruneAtSnapshot) {
			list := make([]KeySeq, 0, len(o.finished))
			for k, s := range o.finished {
				list = append(list, KeySeq{Key: []byte(k), Seq: s})
			}
			if err := o.store.Prune(list); err != nil {
				return err
			}
		}
		o.prunes = append(o.prunes, pendingPrune{id: w.CheckpointID(), upTo: o.finished})
		o.finished = map[string]int64{}
	}
	if o.store != nil && w.Kind() == checkpoint.KindSavepoint {
		if o.savepoints == nil {
			o.savepoints = map[int64]bool{}
		}
		o.savepoints[w.CheckpointID()] = true
	}
	if cp, ok := o.store.(Checkpointed); ok {
		m, err := cp.Marker()
		if err != nil {
			return fmt.Errorf("agent: taking the action-state store's recovery marker: %w", err)
		}
		w.List(storeMarkers, checkpoint.Union, [][]byte{m})
	}
	if o.budgets != nil {
		if err := o.budgets.snapshot(w); err != nil {
			return err
		}
	}
	rng := o.Ctx.KeyGroups
	for kg := rng.Start; kg <= rng.End; kg++ {
		if o.keysTab.NumKeysInKeyGroup(kg) == 0 {
			continue
		}
		st, err := o.backend.AppendSnapshotKeyGroup(nil, kg)
		if err != nil {
			return err
		}
		blob := binary.AppendUvarint([]byte{snapshotFormat}, uint64(len(st)))
		blob = append(blob, st...)
		if blob, err = o.ttl.AppendSnapshotKeyGroup(blob, kg); err != nil {
			return err
		}
		if err := w.KeyGroup(kg, blob); err != nil {
			return err
		}
	}
	return nil
}

// NotifyCheckpointComplete implements runtime.CheckpointListener. The
// store's states of inputs finished before a checkpoint are pruned, in the
// background, once no retained checkpoint needs them: when the oldest
// checkpoint still retained (Context.RetainedCheckpoints) is that
// checkpoint or a later one. A restore from any retained checkpoint then
// finds the states of every input finished after it. Savepoints are not
// retained by the runtime: their states go with the next checkpoint that
// becomes the oldest retained one (package documentation, guarantee 11).
func (o *operator[K, IN, OUT]) NotifyCheckpointComplete(id int64) error {
	if o.store == nil {
		return nil
	}
	if o.savepoints[id] {
		delete(o.savepoints, id)
	} else {
		i, found := slices.BinarySearch(o.retained, id)
		if !found {
			o.retained = slices.Insert(o.retained, i, id)
		}
		if n := len(o.retained) - max(o.Ctx.RetainedCheckpoints, 1); n > 0 {
			o.retained = slices.Delete(o.retained, 0, n)
		}
	}
	if len(o.retained) == 0 {
		return nil
	}
	oldest := o.retained[0]
	upTo := map[string]int64{}
	horizon := int64(0)
	n := 0
	for _, p := range o.prunes {
		if p.id > oldest {
			o.prunes[n] = p
			n++
			continue
		}
		horizon = max(horizon, p.id)
		for k, s := range p.upTo {
			if cur, ok := upTo[k]; !ok || s > cur {
				upTo[k] = s
			}
		}
	}
	clear(o.prunes[n:])
	o.prunes = o.prunes[:n]
	if len(upTo) == 0 {
		return nil
	}
	list := make([]KeySeq, 0, len(upTo))
	for k, s := range upTo {
		list = append(list, KeySeq{Key: []byte(k), Seq: s})
	}
	st := o.store
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var err error
		if cp, ok := st.(Checkpointed); ok {
			err = cp.PruneCheckpoint(horizon, list)
		} else {
			err = st.Prune(list)
		}
		if err != nil {
			o.logger.Warn("agent: pruning the action-state store failed; it will grow until the next prune", "err", err)
		}
	}()
	return nil
}

// NotifyCheckpointAborted implements runtime.CheckpointListener: what the
// aborted checkpoint covered is pruned with the next one that completes.
func (o *operator[K, IN, OUT]) NotifyCheckpointAborted(id int64) { delete(o.savepoints, id) }

// snapshotFormat is the first byte of every key-group blob: 2 is
// uvarint(len(state)) state timers (the TTL timers, timer.Service's
// format); 1, which restores too, was the state alone.
const snapshotFormat = 2

func (o *operator[K, IN, OUT]) restore(ctx *runtime.Context) error {
	r := ctx.Restored()
	if r != nil && o.budgets != nil {
		if err := o.budgets.restore(r, ctx.KeyGroups, ctx.Parallelism); err != nil {
			return err
		}
	}
	if r == nil {
		// A fresh start: the job may be running again after a failure
		// before its first checkpoint, and the store holds what that run
		// did; rebuild it all so that its side effects are not repeated
		// (the WAL does the same when it opens).
		if cp, ok := o.store.(Checkpointed); ok {
			if err := o.storeGap(cp.Restore(nil)); err != nil {
				return fmt.Errorf("agent: rebuilding the action-state store: %w", err)
			}
		}
		return nil
	}
	// The restored checkpoint is retained until later ones push it out.
	o.retained = []int64{r.CheckpointID}
	if cp, ok := o.store.(Checkpointed); ok {
		markers, err := r.List(storeMarkers)
		if err != nil {
			return fmt.Errorf("agent: reading the action-state store's recovery markers: %w", err)
		}
		if err := o.storeGap(cp.Restore(markers)); err != nil {
			return fmt.Errorf("agent: rebuilding the action-state store for checkpoint %d: %w", r.CheckpointID, err)
		}
		if h := cp.PruneHorizon(); h > r.CheckpointID {
			err := fmt.Errorf("%w: checkpoint %d is older than the store's prune horizon (the states of inputs finished before checkpoint %d were pruned after it completed, so a restore from %d would run their actions again); restore checkpoint %d or a later one",
				ErrStatesMissing, r.CheckpointID, h, r.CheckpointID, h)
			if err := o.storeGap(err); err != nil {
				return fmt.Errorf("agent: restoring checkpoint %d: %w", r.CheckpointID, err)
			}
		}
	}
	err := r.ForEachKeyGroup(func(kg int, data []byte) error {
		if len(data) == 0 || data[0] > snapshotFormat || data[0] == 0 {
			return fmt.Errorf("agent: key-group blob in unknown format %v; was it written by a newer weir?", data[:min(1, len(data))])
		}
		if data[0] == 1 {
			return o.backend.RestoreKeyGroup(kg, data[1:])
		}
		n, w := binary.Uvarint(data[1:])
		if w <= 0 || uint64(len(data)-1-w) < n {
			return fmt.Errorf("agent: corrupt key-group blob %d (state length)", kg)
		}
		st := data[1+w : 1+w+int(n)]
		if err := o.backend.RestoreKeyGroup(kg, st); err != nil {
			return err
		}
		return o.ttl.RestoreKeyGroup(kg, data[1+w+int(n):])
	})
	if err != nil {
		return err
	}
	// The segmented queue is rebuilt, not restored: every key with work
	// goes into the first segment, one reference per unfinished input.
	rng := ctx.KeyGroups
	for kg := rng.Start; kg <= rng.End; kg++ {
		state.ForEachValue(o.keys, kg, func(k K, ks *keyState[K, IN]) {
			ks.key, ks.boxed, ks.kg = k, k, kg
			n := len(ks.pending) - ks.head
			o.waiting += n
			if ks.run != nil {
				n++
			}
			for range n {
				o.q.AddKey(k)
			}
			o.unfinished += n
			if n > 0 {
				o.enqueue(ks)
			}
		})
	}
	if next, ok := o.ttl.NextProcessingTime(); ok {
		o.scheduleTTL(next)
	}
	o.cRestored.Add(int64(o.unfinished))
	if o.unfinished > 0 {
		o.logger.Info("agent: resuming restored work", "inputs", o.unfinished, "keys", len(o.ready)-o.rhead, "checkpoint", r.CheckpointID)
	}
	return nil
}

// storeGap returns err, unless it only says the store lacks states a
// restore needs (ErrStatesMissing) and Options.AllowRepeatedSideEffects
// lets the job go on: then it logs a warning and returns nil.
func (o *operator[K, IN, OUT]) storeGap(err error) error {
	if err == nil || !errors.Is(err, ErrStatesMissing) {
		return err
	}
	if !o.opts.AllowRepeatedSideEffects {
		return fmt.Errorf("%w; to go on and run those actions again, with their side effects, set agent.Options.AllowRepeatedSideEffects", err)
	}
	o.logger.Warn("agent: the action-state store lacks states the restored checkpoint needs; going on (Options.AllowRepeatedSideEffects): the actions of their inputs run again, with their side effects", "err", err)
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
		if !o.opts.Blocking {
			o.dispatch(c)
			return
		}
		o.execute(c)
		o.apply(c)
		o.recycle(c)
	}
}

// finish ends the key's input: its watermark reference goes, its slot is
// freed, and the key queues again if more inputs wait.
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
	}
}

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
			onReplay: o.cCallsReplayed.Inc, onDiverge: o.cDiverged.Inc}
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
// there are never more workers than actions that ran at once.
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
	c.rc.ctx = ctx
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
	d := c.rc.durable
	if d == nil {
		return
	}
	if c.err != nil {
		// The last call's record, if queued, must be durable (or its
		// error known) before the failure is applied.
		if d.settle() == nil && len(d.calls) == 0 && len(d.recorded) == 0 {
			// A run that failed before recording anything (a time-out, an
			// error before its first durable call) is recorded, empty and
			// not completed, before its input goes on: else a restore that
			// runs it again finds the store knowing later runs of the key
			// and not this one, takes that for a divergence and discards
			// the key's recorded future, repeating the side effects of
			// every later input of the key (found by internal/sim, seed
			// 51 with the agent branch).
			if err := d.store.Put(&ActionState{ID: d.id, Pos: d.pos, KeyGroup: d.kg}); err != nil {
				d.failed(fmt.Errorf("agent: recording a failed action in the action-state store: %w", err))
			}
		}
		return
	}
	// The store may keep st: it gets its own copies of the slices (the
	// completion, and with it rc.sent's storage, is recycled).
	st := &ActionState{ID: d.id, Pos: d.pos, KeyGroup: d.kg, Completed: true, Calls: slices.Clone(d.calls),
		Short: writesOf(c.rc.short.writes), Sensory: writesOf(c.rc.sensory.writes), Sent: slices.Clone(c.rc.sent)}
	// With a Queuer the completed state is queued before waiting for the
	// last call's record, so that both are usually written together: the
	// action waits for one write, not two in a row.
	var err error
	if q, ok := d.store.(Queuer); ok && d.pending != nil {
		var p Pending
		if p, err = q.PutQueued(st); err == nil {
			if err = d.settle(); err == nil {
				err = p.Wait()
			}
		}
	} else if err = d.settle(); err == nil {
		err = d.store.Put(st)
	}
	if err != nil {
		c.err = fmt.Errorf("recording the completed action in the action-state store (its outputs are held back): %w", err)
		d.failed(c.err)
	}
}

// recall looks the run up in the store (on the action goroutine): a
// completed run is replayed (done is true: its memory writes and events
// are taken from the store and the action is not called), an unfinished
// one hands its recorded calls to Durable, and a run the store does not
// know while it knows later ones of the key is a divergence.
func (o *operator[K, IN, OUT]) recall(rc *RunnerContext, d *durableRun) (done bool, err error) {
	id, err := rc.RunID()
	if err != nil {
		return false, err
	}
	d.id = id
	st, err := d.store.Get(id)
	if err != nil {
		err = fmt.Errorf("reading the action-state store: %w", err)
		d.failed(err)
		return false, err
	}
	if st == nil {
		if latest, ok := d.store.Latest(id.Key); ok && !latest.Less(d.pos) {
			rc.Logger().Warn("agent: the recorded run of this key diverges from this one; discarding its recorded future",
				"recorded", latest, "now", d.pos)
			o.cDiverged.Inc()
			if err := d.store.DiscardFrom(id.Key, d.pos); err != nil {
				err = fmt.Errorf("action-state store: %w", err)
				d.failed(err)
				return false, err
			}
		}
		return false, nil
	}
	if !st.Completed {
		d.recorded = st.Calls
		return false, nil
	}
	o.cReplayed.Inc()
	rc.short.writes = st.Short.buffer()
	rc.sensory.writes = st.Sensory.buffer()
	rc.sent = append(rc.sent[:0], st.Sent...)
	return true, nil
}

// push hands c to the subtask goroutine: completions pile up on a
// lock-free stack, and the first one on an empty stack posts the letter
// that drains it.
func (o *operator[K, IN, OUT]) push(c *completion[K, IN]) {
	for {
		top := o.completed.Load()
		c.next = top
		if o.completed.CompareAndSwap(top, c) {
			if top == nil {
				o.mb.Post(o.letter)
			}
			return
		}
	}
}

// drain applies every completion on the stack, in completion order, then
// starts waiting inputs and releases watermarks.
func (o *operator[K, IN, OUT]) drain() {
	top := o.completed.Swap(nil)
	var list *completion[K, IN]
	for top != nil {
		next := top.next
		top.next = list
		list, top = top, next
	}
	for c := list; c != nil; {
		if o.err != nil {
			return
		}
		next, ks := c.next, c.ks
		o.apply(c)
		o.recycle(c)
		o.step(ks)
		c = next
	}
	o.fillSlots()
	o.release()
	o.gauges()
}

// apply commits a finished action run on the subtask goroutine: memory
// writes, then its events in the order sent (outputs leave at once with
// the input's timestamp, others queue the actions listening to them).
func (o *operator[K, IN, OUT]) apply(c *completion[K, IN]) {
	ks, rc := c.ks, c.rc
	r := ks.run
	if d := rc.durable; d != nil && d.storeErr != nil {
		// The store cannot record: going on would repeat side effects
		// after a restore, ContinueOnError or not.
		o.cErrors.Inc()
		o.fail(fmt.Errorf("agent: action %q of key %v (input %d): the action-state store failed: %w",
			rc.action.Name, ks.key, r.seq, d.storeErr))
		return
	}
	if c.err != nil {
		o.cErrors.Inc()
		err := fmt.Errorf("agent: action %q failed for key %v (input %d, event %d %q): %w",
			rc.action.Name, ks.key, r.seq, rc.ev.ID, rc.ev.Type, c.err)
		if !o.opts.ContinueOnError {
			o.fail(fmt.Errorf("%w; fix the action, or set agent.Options.ContinueOnError to skip failed actions", err))
			return
		}
		o.logger.Warn("agent: action failed; skipping it", "err", err)
		o.sendFailed(ks.key, r, rc.action, rc.ev, c.err)
	} else {
		if o.elog != nil {
			o.logApplied(c)
		}
		updates := o.applyShort(ks, rc.short.writes)
		r.sensory = applyWrites(r.sensory, rc.sensory.writes)
		for i := range rc.sent {
			ev := &rc.sent[i]
			ev.ID, ev.Parent, ev.Action = r.nextID, rc.ev.ID, rc.action.Name
			r.nextID++
			if ev.Type == TypeOutput {
				if err := o.emit(ev, r.ts); err != nil {
					o.fail(fmt.Errorf("agent: action %q of key %v: %w", rc.action.Name, ks.key, err))
					return
				}
				continue
			}
			// The completion is recycled: the event moves to the heap.
			e := new(Event)
			*e = *ev
			o.addTasks(ks.key, r, e)
		}
		for _, u := range updates {
			e := &Event{Type: TypeMemoryUpdated, Value: u, ID: r.nextID, Parent: rc.ev.ID, Action: rc.action.Name}
			r.nextID++
			o.cMemEvent.Inc()
			o.addTasks(ks.key, r, e)
		}
	}
	o.cActions.Inc()
	r.popTask()
}

// logApplied logs what applying c commits: the short-term memory writes
// and the outputs (on the subtask goroutine, before c is recycled).
func (o *operator[K, IN, OUT]) logApplied(c *completion[K, IN]) {
	rc := c.rc
	if len(rc.short.writes) > 0 {
		e := rc.entry(LogMemory)
		w := maps.Clone(rc.short.writes)
		maps.DeleteFunc(w, func(k string, _ json.RawMessage) bool { return strings.HasPrefix(k, ttlPrefix) })
		e.Name, e.Data, e.Replayed = "short-term", w, c.replayed
		o.elog.emit(e)
	}
	for i := range rc.sent {
		if rc.sent[i].Type == TypeOutput {
			e := rc.entry(LogOutput)
			e.Data, e.Replayed = rc.sent[i].Value, c.replayed
			o.elog.emit(e)
		}
	}
}

func (o *operator[K, IN, OUT]) emit(ev *Event, ts int64) error {
	var v OUT
	if o.outEvent {
		v = any(*ev).(OUT)
	} else {
		var err error
		v, err = convert[OUT](ev.Value, "the output", "", "")
		if err != nil {
			return err
		}
	}
	o.Out.Collect(runtime.Record[OUT]{Value: v, Timestamp: ts})
	return nil
}

// release forwards every held mark whose inputs have all finished, oldest
// first.
func (o *operator[K, IN, OUT]) release() {
	for {
		m, ok := o.q.PopReady()
		if !ok {
			break
		}
		switch m.kind {
		case markWatermark:
			o.Out.EmitWatermark(m.ts)
		case markIdle:
			o.Out.EmitIdle(true)
		case markActive:
			o.Out.EmitIdle(false)
		}
	}
	if o.q.Held() > 0 && !o.tickArmed && !o.closed {
		o.tickArmed = true
		o.Ctx.RegisterProcessingTimer(clock.NowMillis(o.Ctx.Clock)+tickMillis, o.tick)
	}
	o.maybeEndAnswers()
}

const tickMillis = 1000

// tick refreshes the age gauge while marks are held and warns, once per
// held watermark, when the oldest has waited longer than StallWarning.
func (o *operator[K, IN, OUT]) tick(now int64) {
	o.tickArmed = false
	if o.closed {
		return
	}
	o.gauges()
	if o.q.Held() == 0 {
		return
	}
	if o.opts.StallWarning > 0 {
		m, _, _ := o.q.Oldest()
		if age := o.q.OldestAge(); age >= o.opts.StallWarning.Milliseconds() && (m.ts != o.warnedAt || m.kind != markWatermark) {
			o.warnedAt = m.ts
			s := o.status()
			o.logger.Warn("agent: a watermark is held back by unfinished inputs",
				"watermark", s.OldestHeldWatermark, "ageMs", s.OldestHeldAgeMs, "heldWatermarks", s.HeldWatermarks,
				"keys", s.OldestHeldBy, "keyCount", s.OldestHeldByCount)
		}
	}
	o.tickArmed = true
	o.Ctx.RegisterProcessingTimer(now+tickMillis, o.tick)
}

func (o *operator[K, IN, OUT]) gauges() {
	o.gHeld.Set(int64(o.q.Held()))
	o.gAge.Set(o.q.OldestAge())
	o.gInFlight.Set(int64(o.unfinished))
	o.gRunning.Set(int64(o.running))
}

func (o *operator[K, IN, OUT]) fail(err error) {
	if o.err != nil {
		return
	}
	o.err = err
	o.Ctx.Fail(err)
	o.cancel()
}

// status describes the subtask (on the subtask goroutine).
func (o *operator[K, IN, OUT]) status() SubtaskStatus {
	s := SubtaskStatus{Operator: o.Ctx.Name, Subtask: o.Ctx.Subtask, HeldWatermarks: o.q.Held(),
		RunningKeys: o.running, WaitingInputs: o.waiting, InFlightInputs: o.unfinished,
		PendingWaits: o.pendingWaits(clock.NowMillis(o.Ctx.Clock))}
	if m, _, ok := o.q.Oldest(); ok {
		s.OldestHeldWatermark = m.ts
		s.OldestHeldIsStatus = m.kind != markWatermark
		s.OldestHeldAgeMs = o.q.OldestAge()
		s.OldestHeldByCount = o.q.OldestKeyCount()
		for k, n := range o.q.OldestKeys(statusKeys) {
			s.OldestHeldBy = append(s.OldestHeldBy, HeldKey{Key: fmt.Sprint(k), Inputs: n})
		}
		sortHeld(s.OldestHeldBy)
	}
	return s
}

const statusKeys = 20
