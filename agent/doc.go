// Package agent runs AI agents on keyed streams, with Flink's event-time
// semantics kept intact (after Apache Flink Agents' ActionExecution
// operator, without its known defects).
//
// An Agent is a set of Actions. Each action listens to event types and
// gets, with each event, a RunnerContext through which it sends events,
// reads and writes memory, and calls models and tools. Every input record
// becomes an input event; the actions it triggers may send events that
// trigger further actions, an execution tree; output events leave the
// operator as records.
//
//	a := &agent.Agent{
//		Models: map[string]model.ChatModel{"llm": model.OpenAI(model.OpenAIConfig{Model: "gpt-4o-mini"})},
//		Actions: []agent.Action{agent.NewAction("answer", func(c *agent.RunnerContext, ev agent.Event) error {
//			q, err := agent.Input[Question](ev)
//			if err != nil {
//				return err
//			}
//			resp, err := c.Chat("llm", model.Request{Messages: []model.Message{model.User(q.Text)}})
//			if err != nil {
//				return err
//			}
//			c.Output(Answer{ID: q.ID, Text: resp.Message.Content})
//			return nil
//		}, agent.TypeInput)},
//	}
//	answers := agent.Apply[string, Question, Answer](weir.KeyBy(questions, Question.User), "answer", a, agent.Options{})
//
// ReAct builds a ready-made agent that runs a model and tools in turn.
//
// An action may add a CEL condition over the event to its types
// (Action.When, e.g. `event.value.amount > 100`), compiled and
// type-checked when the agent is applied. Short-term entries may have a
// time to live (Memory.SetTTL: processing time, a checkpointed timer per
// entry), and committed changes of short-term memory send
// TypeMemoryUpdated events to the actions that listen to them.
//
// # Guarantees
//
// The operator keeps these (G1..G16 are cited by the code, tests and
// docs):
//
//	G1. One input per key at a time. A key's inputs start in arrival order,
//	    each after the previous one's execution tree has finished; later
//	    inputs wait in keyed state. Each input gets the key's next sequence
//	    number (0 for the first), kept in keyed state.
//	G2. One action per input at a time. The actions of one input run one
//	    after the other, breadth first: the actions triggered by an event
//	    queue behind those already queued, in the order the events were sent
//	    and, per event, in the order the agent declares its actions.
//	G3. Keys run concurrently. Every action runs on its own goroutine, never
//	    on the subtask goroutine, so a slow model call of one key delays
//	    neither other keys nor the subtask's records, timers and checkpoint
//	    barriers. Its result reaches the subtask through the mailbox
//	    (runtime.Mailbox.Post) and is applied there: operator state has no
//	    locks. At most Options.MaxConcurrentKeys keys run at once per
//	    subtask; beyond Options.MaxBufferedInputs waiting inputs the operator
//	    stops taking input (back-pressure through Context.Yield, which runs
//	    only this operator's letters and those of operators downstream of
//	    it: no checkpoint and no upstream operator runs while it waits, also
//	    when it is called from inside an upstream agent's letter). With
//	    ApplyWithAnswers it stops reading its input instead
//	    (runtime.InputSelectable) and goes on reading answers, timers and
//	    letters, so an action holding a slot gets the answer it awaits
//	    under back-pressure; only while a checkpoint's barrier has arrived
//	    on every answers channel does it take the inputs ahead of the
//	    barrier on its input beyond MaxBufferedInputs (the alignment
//	    needs them).
//	G4. Buffered effects. An action's memory writes and sent events take
//	    effect when it returns successfully, in one step on the subtask
//	    goroutine; a failed action leaves no trace. Output events leave at
//	    that moment, stamped with the timestamp of their input.
//	G5. Watermarks are held, never late. A watermark (or idle-status change)
//	    leaves only after every input that arrived before it has finished its
//	    whole execution tree, and never before an earlier one (package segq:
//	    one reference per unfinished input in the newest segment, watermarks
//	    cut segments, released oldest first when the oldest segment is empty;
//	    checked whenever an input finishes). So no output is behind a
//	    watermark already forwarded, and inputs after a watermark never hold
//	    it back.
//	G6. Barriers are not held. A checkpoint snapshots, per key group, each
//	    key's sequence number, short-term memory, waiting inputs, and the
//	    unfinished input with its remaining (event, action) tasks, and
//	    completes without waiting for running actions. After a restore the
//	    unfinished tasks run again (an action that was running re-runs from
//	    its start), the waiting inputs follow, and the segmented queue is
//	    rebuilt with every restored input in its first segment.
//	G7. Stable identities. Every action run has a RunID: (key, sequence
//	    number, triggering event: position, type and content digest,
//	    action), encoded with length prefixes and hashed with SHA-256;
//	    nothing in it depends on pointers, map order or the process, so a run
//	    re-executed after a restore has the same identity.
//	G8. Every finishing path moves on. An input that triggers no action, or
//	    whose actions fail under ContinueOnError, finishes like any other:
//	    its watermark reference is removed and the key's next input starts.
//	    Each failed action run is counted (failedInputs) and, with
//	    Options.FailedInputs, sent there with its input (failed.go; an
//	    input restored unfinished from a checkpoint too): an input is never
//	    lost without a trace.
//	G9. Visible stalls. Gauges heldWatermarks, oldestHeldWatermarkAgeMs,
//	    inFlightInputs and runningKeys, counters actionsRun, actionErrors,
//	    eventsUnhandled and inputsRestored (unfinished inputs a restore
//	    resumed), calls per model and tool with their errors (modelCalls,
//	    toolCalls, callstats.go), the time actions take (actionMicros
//	    over actionsTimed, and histograms per action, model and tool:
//	    actionLatencySeconds, modelCallLatencySeconds,
//	    toolCallLatencySeconds) and the model clients' retries (modelRetries,
//	    modelRateLimitedRetries); Status names the keys holding the oldest watermark,
//	    and a warning is logged when it has waited longer than
//	    Options.StallWarning.
//	G10. Exactly-once side effects, with a store (Options.Store; package wal
//	    is the embedded write-ahead log, package kafkastore a compacted
//	    Kafka topic, MemoryStore the in-memory one; a store that is
//	    Checkpointed puts its recovery marker into every checkpoint and is
//	    rebuilt from the restored markers before the operator resumes). A
//	    finished action's state (memory writes, sent events, call results)
//	    is recorded, durably, before its outputs leave; Durable records each
//	    call's result (or error, or null) as soon as it returns, and so do
//	    the model and tool calls of RunnerContext.Chat and CallTool (every
//	    step of ReAct) unless Options.NonDurableCalls; with a store that
//	    is a Queuer (wal, kafkastore) the action goes on while that record
//	    is written and waits for it before its next durable call starts and
//	    before it completes, so at most one call per running action has
//	    taken effect without its result being durable. After a
//	    restore a recorded completed action is not run again: its writes and
//	    events are applied from the store; an unfinished one runs again and
//	    its recorded calls return their recorded results. A call that
//	    differs from the one recorded at its position, or a run the store
//	    does not know while it knows later ones of the key (another input
//	    under that sequence number), discards the key's recorded future (and
//	    only that key's) and goes on live. A run that failed (under
//	    ContinueOnError) before recording anything is recorded empty, so a
//	    restore that runs it again is not taken for such a divergence.
//	    States of inputs finished before
//	    a checkpoint are pruned once no retained checkpoint needs them
//	    (G11), which also drops the ghosts of inputs that will
//	    never be replayed. Each durable call gets
//	    an idempotency key, the same on every attempt, to pass to services
//	    that honour one (models get it through model.IdempotencyKey;
//	    OpenAIClient and AnthropicClient send it as the Idempotency-Key
//	    header; Go tools get it
//	    through tool.IdempotencyKey, MCP tools send it in _meta under
//	    "weir/idempotencyKey"); DurableReconciled records a pending call first, so
//	    that a restore asks the service (by that key) whether a call whose
//	    result was lost took effect, instead of making it again.
//	G11. Every retained checkpoint restores without repeats. The states of
//	    inputs finished before checkpoint n are pruned only when the oldest
//	    checkpoint the job retains (runtime.CheckpointConfig.Retain) is n or
//	    later, so a restore from any retained checkpoint finds the states
//	    of every input finished after it. A Checkpointed store (wal,
//	    kafkastore) records the newest checkpoint a prune covered (its
//	    prune horizon) and identifies its log in every recovery marker; a
//	    restore whose store lacks states the checkpoint needs (a checkpoint
//	    or savepoint older than the horizon, a WAL directory of another host
//	    or a new one, a Kafka topic deleted or past retention) fails with an
//	    error saying so (ErrStatesMissing), unless
//	    Options.AllowRepeatedSideEffects, which logs a warning and runs
//	    those actions again.
//	G12. Structured output is validated, and counted once. RunnerContext.Chat
//	    with a ResponseFormat returns only a reply that conforms to its
//	    schema (or a model.SchemaError after ResponseFormat.Attempts calls,
//	    each rejection fed back to the model); with a store the validated
//	    reply is what is recorded and replayed. Every call made to a model
//	    through Chat is counted per model name (modelCalls,
//	    modelCallErrors, modelInputTokens, modelOutputTokens and, with
//	    Options.Pricing, modelSpendMicros, label model);
//	    a replayed call is not counted again.
//	G13. An event log, at least once. Options.Listeners get an entry for
//	    every action start, model and tool call and result, end or error,
//	    memory update and output (LogEntry), each naming the run (key,
//	    sequence number, event, action); after a restore, what is taken
//	    from the store instead of being done again is marked Replayed.
//	    Without listeners the log costs a nil check per action.
//	G14. Traces, when asked for. With Options.TracerProvider every input's
//	    execution tree is a trace: a span per input, action run, and model
//	    and tool call made through the RunnerContext (GenAI semantic
//	    conventions; content only with Options.TraceContent), replays from
//	    the store marked weir.agent.replayed, retries and rate-limit waits
//	    as events, an input carrying a W3C traceparent (TraceContextCarrier,
//	    Options.TraceContextOf) a child of that remote span (trace.go,
//	    docs/tracing.md). Without a provider tracing
//	    costs a nil check per input, action and call.
//	G15. Budgets, checked before each call. With Options.Budgets a model call
//	    made through RunnerContext.Chat is let through only while every
//	    budget covering it (per key, per model or per job, over a tumbling
//	    processing-time window) is below its limits (budget.go, B1-B3): a
//	    budget's requests are never exceeded, its tokens by at most the
//	    calls in flight when it was reached (one for a per-key budget). At
//	    the limit the call fails (the input to Options.FailedInputs), waits
//	    for the next window (holding the watermark), or goes to a fallback
//	    model. The current windows' spend is checkpointed; replayed calls
//	    are not charged again.
//	G16. Waits are action state. Await (with ApplyWithAnswers, whose second
//	    input is the answers, keyed like the input) records, with a store,
//	    the wait's identity and deadline, its request (Wait.Ask) and its
//	    outcome as durable calls: a restore neither asks again nor starts
//	    the time-out over. A key's answers not used up are keyed state,
//	    checkpointed with the answers' source offsets, so an answer that
//	    comes before its wait, or before a crash, is not lost, and one
//	    taken stays until its input finishes. A waiting input holds the
//	    watermark (G5) at most until Wait.Timeout passes
//	    (processing time on the job's clock); answers take no part in
//	    event time, nor in the job's end: with Options.EndAnswers the
//	    answers source is told to stop once the input has ended and every
//	    pending wait has ended (await.go, answers.go, docs/agents.md "Human
//	    approval").
//
// Evaluator runs an agent's actions over inputs in-process, without a
// job, a store or state (evaluate.go): package agent/replay uses it to
// evaluate a changed agent over the inputs an event log recorded.
//
// # Limits
//
// A hung action holds every later watermark of its subtask (by design: the
// alternative is late data); bound actions with Options.ActionTimeout and
// watch oldestHeldWatermarkAgeMs. Watermarks held when a checkpoint was
// taken are not re-emitted after a restore (as in Flink, the sources'
// later watermarks cover them). When the operator waits for room
// (back-pressure), a checkpoint barrier arriving through the network
// waits with it. Input values, event attributes and memory values must be
// JSON-serialisable. Keys are kept (with their sequence numbers and
// memory) for the life of the job, in the job's keyed-state backend
// (runtime.Config.StateBackend; on Pebble only the keys with work are
// held in memory: keys.go). Between a call taking effect and its
// result being recorded there is a window (a crash there repeats the
// call): close it with services that honour the idempotency key. Outputs
// of actions replayed after a restore are emitted again; use a
// two-phase-commit sink for exactly-once output. A savepoint is not
// retained by the checkpoint window: once the prune horizon passes it,
// restoring it fails (or, with Options.AllowRepeatedSideEffects, repeats
// side effects). MemoryStore is not Checkpointed: it detects nothing.
package agent
