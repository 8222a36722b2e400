// Package jsonl reads and writes JSON Lines files (one JSON value per line)
// as weir sources and sinks.
//
// Source reads files into a stream: each non-blank line is decoded into T
// with encoding/json. Event time comes from the watermark.Strategy given to
// weir.FromSource (its Timestamp function), or, with Options.Timestamp, from
// the reader itself. Sink writes a stream as JSON lines; DeadLetterSink
// writes a source's dead letters (weir.DeadLetters) as JSON lines.
//
//	s := weir.FromSource(env, "orders", jsonl.Source[Order]("a.jsonl", "b.jsonl"),
//		watermark.ForBoundedOutOfOrderness[Order](time.Second).
//			WithTimestamp(func(o Order, _ int64) (int64, bool) { return o.TS, o.TS > 0 }))
//	weir.ToSink(weir.DeadLetters(s), "bad-orders", jsonl.DeadLetterSink("bad-orders.jsonl"))
//
// # Guarantees
//
//	J1. Every file is one split, with the file's index in the path list as
//	    split id. File i is read by source subtask i % parallelism; a
//	    subtask reads its files one after the other, each from start to end,
//	    and emits the records of a file in line order.
//	J2. Nothing is lost silently: every line of every file ends as exactly
//	    one of: skipped because it is blank (only white space), a record, or
//	    a dead letter. Lines that do not decode, lines longer than
//	    Options.MaxLineSize (blank or not: the reader does not keep a line
//	    past the limit to look at it), and (with Options.Timestamp) records without a
//	    timestamp are dead letters that name the file and 1-based line
//	    number in their Reason, with Split = file index and Position = line
//	    number; they are counted in the source's "deadLetters" metric. None
//	    of them fails the job. Records that the strategy's Timestamp
//	    function rejects are dead-lettered by the runtime (their Split is
//	    the file index and their Value the decoded record, but the runtime
//	    does not know the line).
//	J3. By default, a subtask announces all its files as splits before it
//	    emits anything, so a file not yet read holds the subtask's watermark
//	    back: no record becomes late because an earlier file was read first.
//	    The price is that the watermark of a subtask with several files stays
//	    at watermark.Min until its last file is being read. Options.Ordered
//	    announces each file only when it is opened, for files whose event
//	    times follow each other (hourly logs, say): the watermark then
//	    advances file by file. (With a strategy that has Idleness, a file
//	    not yet read goes idle after the time-out like any split without
//	    records, and stops holding the watermark back.)
//	J4. Errors that are not about one line (a file that cannot be opened
//	    or read) fail the job, naming the file.
//	J5. Poll reads at most 256 lines per call and keeps at most one file
//	    open per subtask. Files are opened when they are first read, not when
//	    the job is built.
//	J6. Sink and DeadLetterSink write through a buffer, flushed (and the
//	    file synced) at every checkpoint, before its barrier leaves the
//	    subtask, and when the sink subtask closes (at the end of the job,
//	    and also when it fails or is cancelled). Each subtask's file length
//	    at the checkpoint is the sink's state. A job that starts afresh
//	    truncates the file; a job restored from a checkpoint or savepoint
//	    cuts it back to that length (what was written after the checkpoint,
//	    a torn last line of a killed process included) and appends to it,
//	    so every record is in the files once when the job ends or has
//	    resumed. At another parallelism subtask 0 cuts the files no subtask
//	    writes any more, and a file the restored job did not write is
//	    truncated. There are no transactions: a reader of a file while the
//	    job runs, or after it died, sees lines whose checkpoint has not
//	    completed, which a restore may cut and write again. A file shorter
//	    than its checkpointed length (rotated or cut by someone else) is
//	    appended to with a warning; a checkpoint of a weir before lengths
//	    were kept is appended to.
//	J7. The source is restorable: at a checkpoint each subtask records, per
//	    file it reads, the lines read and whether the file is done
//	    (runtime.SplitSnapshotter); a restored job skips the done files and
//	    the lines read before the checkpoint (reading them again), so with
//	    exactly-once checkpoints every line is emitted once. The files are
//	    matched by their index in the path list: restore with the same
//	    paths. At another parallelism the files are dealt over the
//	    subtasks (checkpoint.EvenSplit).
//
// # Not guaranteed
//
// Order between files, and between subtasks, is not defined downstream.
// Lines are not checked for being JSON objects: any JSON value that decodes
// into T is a record (including null, which leaves T at its zero value).
package jsonl
