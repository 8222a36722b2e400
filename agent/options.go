package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/internal/benchhook"
	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/runtime"

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
	// MaxAnswersPerKey bounds the answers (ApplyWithAnswers) a key keeps
	// that no wait has taken; beyond it the oldest is dropped, logged and
	// counted (answersDropped). After a restore the answers source reads
	// again, at once, what followed the checkpoint, before the key's
	// inputs since then run again and take their answers (or take the
	// outcome their store recorded): give a key room for its answers of a
	// checkpoint interval, plus those that come before their wait. Answers
	// naming a wait that has ended take no room (answersForEndedWaits). 0
	// means 64.
	MaxAnswersPerKey int
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
	// goroutine, when the agent's input has ended (or reached the end of
	// event time, the watermark a bounded source sends when it has read
	// everything, before the job's final checkpoint) on every subtask and
	// each subtask has finished every input, its pending waits included
	// (answered or timed out). An input that arrives after that (a record
	// behind the final watermark, emitted by processing time upstream)
	// still runs; a wait of it ends with the answers read until then or
	// times out. Close the answers source's Stop channel
	// (kafka.Options.Stop) there, so that a job whose input is bounded
	// ends although its answers topic never does: the end of input waits
	// for the pending waits, at most until their deadlines, and the
	// answers input never holds completion. It is called at most once per
	// ApplyWithAnswers, also across restarts of the job (a restarted
	// attempt's waits then end with the answers read until then, or time
	// out). nil means the operator ends when both of its inputs have
	// ended. Apply refuses it.
	EndAnswers func()

	// blocking runs actions synchronously on the subtask goroutine, one
	// at a time: the naive design, kept for comparisons (the benchmarks
	// set it through agent/internal/benchhook). A slow action then stalls
	// the subtask, its timers and checkpoints.
	blocking bool
}

func init() {
	benchhook.SetBlocking = func(opts any) { opts.(*Options).blocking = true }
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
	if o.MaxAnswersPerKey < 0 {
		errs = append(errs, fmt.Errorf("agent: Options.MaxAnswersPerKey %d: want 0 (meaning 64) or a positive number of answers", o.MaxAnswersPerKey))
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
	if o.MaxAnswersPerKey <= 0 {
		o.MaxAnswersPerKey = 64
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
