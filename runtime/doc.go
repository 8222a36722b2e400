// Package runtime executes weir jobs: it turns a graph of operators into
// subtasks, runs each subtask as one goroutine with a mailbox loop, and moves
// records, watermarks and idleness between subtasks in batches.
//
// Users build jobs with the typed API in the root package (weir); operator
// authors (windows, async I/O, agents) implement OneInputOperator or
// TwoInputOperator from this package.
//
// # Guarantees
//
//	I1. Elements of one channel (one upstream subtask to one downstream
//	    subtask) arrive in the order they were emitted; watermarks and idleness
//	    never overtake the records emitted before them.
//	I2. A subtask's operators are only ever called from its own goroutine:
//	    user functions, state and timers need no locks. Work posted to the
//	    Mailbox from other goroutines runs on that goroutine too.
//	I3. The watermark an operator sees is the minimum over its active inputs
//	    (one watermark.Combiner per input over its channels, and one over the
//	    inputs of a two-input operator) and never decreases.
//	I4. Queues between subtasks are bounded (a fixed number of batch buffers
//	    per channel); a full queue blocks the producer (back-pressure), nothing
//	    is dropped.
//	I5. The per-record path takes no lock and makes no channel operation:
//	    records are appended to a batch buffer, and only a full batch, a
//	    control element (watermark, idleness, end of input) or a flush sends it.
//	I6. A job ends when every source has ended and every subtask has drained
//	    its inputs, or when its context is cancelled, or at the first failure;
//	    the returned error is then an *OperatorError, which names the
//	    operator, its subtask and the phase (open, process, read, end of
//	    input, close, panic, ...) and wraps the operator's own error:
//	    match it with errors.As and errors.Is, never by its text.
//	I7. Context.Yield of an operator runs only mailbox letters and
//	    processing-time callbacks of that operator and of operators
//	    downstream of it in the chain (Flink's MailboxExecutor rule): while
//	    an operator waits in Yield no operator upstream of it runs (it is
//	    never called again mid-call) and no checkpoint is taken (snapshots
//	    see every operator between calls). The subtask loop runs everything
//	    else afterwards; letters of one operator run in posting order.
//	    (mailbox.go states the mailbox's own invariants, M1..M5.)
//	I8. An operator that holds output for later (a Holder: buffered
//	    records, pending event-time timers) is not told that its input is
//	    idle while it holds any: its output stays active at its last
//	    watermark, so a consumer keeps it in its minimum and what it emits
//	    later is never late there. The idle status reaches it once it holds
//	    nothing (idlehold.go, H1..H3).
//	I9. A failure stops the subtask's data at once. From the moment an
//	    operator's method (or Context.Fail) fails the subtask, no operator
//	    of it is given another record, watermark or idle status: not the
//	    rest of a network batch, not the records its source's reader emits
//	    later in the same Poll (dropped, as a crash drops them; a restore
//	    reads them again). So what the subtask's operators and its
//	    consumers saw is a prefix of the input, as with a crash; before,
//	    the records after a failed one went on, and downstream saw the
//	    input with a gap that no run produces (an agent operator numbered
//	    its inputs by it and discarded action states a later attempt
//	    needed: the simulator's seed 3067126113256803544).
//	I10. A two-input operator that implements InputSelectable is given no
//	    record of an input it does not select, with one exception: while a
//	    checkpoint's barriers are being aligned and every live channel of
//	    the other input has delivered its barrier, the deselected input is
//	    read up to its own barriers (otherwise the checkpoint would wait on
//	    the operator, and an operator waiting on the other input's records
//	    behind the barrier would wait for ever). Meanwhile the subtask
//	    serves the other input, its mailbox and its timers, and a batch
//	    stopped by a deselection resumes where it stopped (I1 holds).
//	I11. A source subtask's records, watermarks, idle status and dead
//	    letters leave it in the order its reader's calls imply, whether the
//	    reader emits one record at a time (SourceOutput.Collect) or a run
//	    (SourceBatchOutput.CollectAll): a record goes out before any
//	    watermark or status change its generator derives from it, and a
//	    run's records never pass one emitted between them. A run goes
//	    downstream in one call only where that holds (sourcetask.go,
//	    CollectAll; watermark.RunGenerator).
//	I12. After the barrier of a stop's snapshot (Job.StopWithSavepoint,
//	    Job.StopWithCheckpoint) a source subtask reads nothing and no
//	    subtask runs a processing-time callback, until the job is cancelled
//	    or the snapshot is aborted (then both resume): what reaches the
//	    outputs after it comes only from mailbox letters (answers of
//	    asynchronous calls in flight). A task publishes its record counts
//	    when it ends, however it ends.
//
// # Not guaranteed
//
// Order between different channels is not defined; a record that arrives at
// an operator behind its watermark (late) is passed to the operator, which
// decides (windows drop it or send it to a side output).
package runtime
