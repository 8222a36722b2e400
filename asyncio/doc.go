// Package asyncio is weir's asynchronous I/O operator, after Flink's
// AsyncWaitOperator: it calls a function that talks to the outside world
// (a database, an HTTP service, a model) for every record, lets many such
// calls run at once, and emits their results in event-time order.
//
//	enriched := asyncio.Ordered(orders, "lookup-customer", lookup, asyncio.Options{Capacity: 50, Timeout: time.Second})
//
// Ordered emits results in input order; Unordered emits them as they
// complete, but never across a watermark. Each input record starts one
// goroutine running the user's Func; the result is handed back to the
// subtask through its mailbox and emitted from the subtask goroutine, so
// the operator's state needs no locks.
//
// # Guarantees
//
//	I1. Each input record's results are emitted exactly once (unless the job
//	    fails), in the order Func returned them, with the input record's
//	    timestamp. A Func that returns no results emits nothing, but the
//	    input still holds its place in the queue (I3, I4).
//	I2. Func runs on its own goroutine, never on the subtask goroutine, with
//	    a context that is cancelled when the operator closes (the job ends,
//	    fails or is cancelled), when a call of this subtask failed, and when
//	    Options.Timeout passes. Results reach the subtask through
//	    Context.Mailbox().Post; the queue, the output and the metrics are
//	    touched only by the subtask goroutine. The subtask side takes no
//	    lock besides the mailbox's (completions are collected on a lock-free
//	    stack, and one letter drains all completions that have piled up).
//	I3. Ordered: the results of input n are emitted after those of every
//	    input before n (a FIFO of entries, emitted from the head while the
//	    head is complete).
//	I4. Unordered: results are emitted in the order the subtask learns of
//	    their completion, within a segment: watermarks (and idle-status
//	    changes, see I5) split the input into segments, and no result
//	    crosses a segment boundary. The results of the inputs before a
//	    watermark are all emitted before it; the watermark is emitted as soon
//	    as they are; results of inputs after it wait until it has left, even
//	    when they completed earlier (Flink's UnorderedStreamElementQueue).
//	I5. In both modes a watermark is emitted after the results of every
//	    record that arrived before it and before the results of every record
//	    that arrived after it. So a record that was not late at the input is
//	    not late at the output. Idle-status changes are queued exactly like
//	    watermarks (they are segment boundaries in unordered mode) so they
//	    never overtake results either. A watermark or status change that
//	    arrives while the queue is empty is forwarded at once. A watermark
//	    that arrives while the newest queue entry is a watermark not yet
//	    emitted replaces it (watermarks only grow, and no result lies
//	    between them), so a stalled call does not let watermarks pile up;
//	    downstream sees a subsequence of the watermarks that always contains
//	    the newest one. The gauges heldWatermarks and
//	    oldestHeldWatermarkSinceMs say how many are held and since when.
//	I6. Capacity: at most Options.Capacity calls of Func run at once per
//	    subtask, and at most Capacity inputs are queued (accepted, results
//	    not yet emitted). When Capacity inputs are queued, ProcessRecord
//	    holds the next record and waits with Context.Yield, which runs this
//	    operator's mailbox letters and timers (and so delivers completions)
//	    and those of operators downstream of it, until one leaves:
//	    back-pressure, nothing is dropped. Nothing upstream of the operator
//	    and no checkpoint runs meanwhile (see "Re-entrancy" below).
//	I7. A failed call is retried Options.Retries times, waiting
//	    Options.Backoff before the first retry and twice as long before each
//	    further one (at most 32 × Backoff; package internal/retry, without
//	    jitter), on the job's clock (weir.Config.Clock: with a manual clock
//	    the retry is made when the clock is advanced). A call that still fails, times
//	    out on its last attempt (ErrTimeout), or panics fails the job; the
//	    error names the input's position in the subtask's input (0-based),
//	    its timestamp and the number of attempts, and the runtime adds the
//	    operator's name and subtask.
//	I8. EndInput returns only after every call has completed and every
//	    result, watermark and status change has been emitted. Close cancels
//	    the calls still running and waits until their goroutines have
//	    returned: no goroutine outlives the operator (provided Func returns
//	    once its context is done).
//	I9. Metrics per subtask: gauge "inFlight" is the number of queued inputs
//	    (I6); counter "completed" counts calls that completed successfully.
//	I10. A checkpoint stores the inputs whose results have not been emitted
//	    (as JSON, in input order); after a restore their calls run again,
//	    before any new input. Watermarks in the queue are not stored. The
//	    final checkpoint of a bounded job waits for every call first (I8):
//	    it stores no input, and a restore from it calls nothing again.
//
// The operator keeps the input records of every queued entry (and the one
// ProcessRecord holds while it waits for room), in input order, so that a
// checkpoint can store the inputs whose results have not been emitted and
// a restore can call Func for them again (Flink's approach).
//
// # Timeouts
//
// Options.Timeout bounds each attempt, measured on the job's clock
// (weir.Config.Clock, as the agent operator's ActionTimeout; with a manual
// clock an attempt times out when the clock is advanced by Timeout). The
// attempt counts as timed out when its deadline passed before Func
// returned, whatever Func returned (a late success is a timeout too, as in
// Flink). Func should honour its context;
// a Func that ignores it only times out when it returns, and delays Close
// until it does.
//
// # Re-entrancy
//
// A subtask runs a chain of operators on one goroutine, and one mailbox
// serves them all. The runtime's Context.Yield runs only the letters and
// timers of the yielding operator and of operators downstream of it in the
// chain (Flink's MailboxExecutor rule; runtime/mailbox.go M1..M5). So while
// ProcessRecord waits for room:
//
//   - no operator upstream runs, so none can hand this operator another
//     record, watermark or status change mid-call;
//   - no checkpoint is taken (the source's trigger is a task letter, and
//     barriers arrive between records), so a snapshot always sees the
//     operator at a record boundary;
//   - the wait works wherever ProcessRecord is called from, also from
//     inside an upstream operator's letter (another asyncio operator
//     emitting its results): that Yield still finds this operator's
//     completion letter, because letters are taken out one at a time.
//
// Earlier runtimes ran every letter in Yield, and this operator waited for
// its own completions privately inside upstream letters and queued
// re-entrant input behind the record it held. The queueing (the held
// record and the draining guard) is kept as a defence: it costs nothing
// when no re-entrant call happens, and keeps I1..I6 if one ever does (the
// queue may then exceed Capacity by the re-entrant records, while the
// number of running calls never does). Because the record ProcessRecord
// holds is not yet accepted when a snapshot is taken (no snapshot runs
// during the wait), I10 stores it only for that defensive case.
package asyncio
