// Package kafka reads Kafka topics as weir sources (and, see Sink, writes
// them), with franz-go as the client. It works with any Kafka-protocol
// broker; weir's tests and demo use the embedded one (package broker).
//
//	src := kafka.NewSource(kafka.Options{Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"orders"}},
//		kafka.JSON[Order]())
//	orders := weir.FromSource(env, "orders", src,
//		watermark.ForBoundedOutOfOrderness[Order](time.Second)).UID("orders")
//
// Each partition is a split with its own watermark generator. Record
// timestamps are the Kafka record timestamps; the strategy's Timestamp
// function may replace them.
//
// # Catch-up: reported, not waited for
//
// A job that starts on a backlog must not let one topic's records run
// ahead of another's history: event time may only pass a point once every
// input has shown it has nothing older. A time-out cannot tell a partition
// that is done from one that is slow to start (its first record would be
// late); Kafka can: the end offset of every partition when the job starts
// says exactly how much history there is. So the source snapshots those end
// offsets once, and a topic leaves the watermark minimum (its splits go
// idle) only when every one of its partitions has read up to its snapshot
// and has no backlog: records written while the job replays (a loader
// still writing) queue behind the snapshot, and each fetch response says
// where the log ends, so a partition is caught up only when its position
// is at the log end of its latest fetch too. From then on the topic is
// live (see Live for what live splits do).
//
// # Guarantees
//
//	K1. Assignment. When a job (run) starts, the source lists its topics'
//	    partitions once for all its subtasks (only those in
//	    Options.Partitions, if set), sorted by topic then
//	    partition; partition i of that list is read by subtask
//	    i % parallelism. A subtask without partitions goes idle.
//	K2. Records. Every record of an assigned partition from the start
//	    position on is emitted once per run, in offset order within the
//	    partition, with the Kafka record timestamp in milliseconds (apart
//	    from the repetition a backwards position reset causes, K7). Under
//	    read_committed, records of aborted transactions are never emitted.
//	K3. Poll never blocks and emits at most Options.RecordsPerPoll records.
//	    Fetching runs in goroutines started at the first Poll (one per
//	    leader broker of the subtask's partitions, so at most one fetch per
//	    broker and subtask is outstanding); they hand batches to Poll through
//	    a buffer of Options.BufferedFetches batches and stop while it is
//	    full (back-pressure), and signal Ready when they hand one over.
//	K4. Start. Partitions without a restored position start at
//	    Options.Start: earliest, latest, a timestamp, or the offsets
//	    committed by Options.Group (with a fallback for partitions without
//	    one).
//	K5. Catch-up by end offsets (Options.CatchUp = CatchUpEndOffsets, the
//	    default). Once per reader, when it starts and before it fetches
//	    anything, the source lists the end offset of every assigned
//	    partition: the high watermark, or the last stable offset under
//	    read_committed. A partition is caught up when its consumer position
//	    (the next offset to fetch, all records before it emitted) has
//	    reached that end, and the end of the log as its latest fetch
//	    reported it (the fetch response's high watermark, or last stable
//	    offset under read_committed; fetches whose batches are still
//	    queued count): a backlog behind the snapshot, written during the
//	    replay, is read before the partition counts as caught up. Records
//	    written after the latest fetch are live (no reader can know of
//	    them). Until its topic has caught up, a caught-up partition whose
//	    next fetch finds unread records is behind again. The position moves past transaction markers,
//	    aborted batches and compaction gaps even when no record comes with
//	    them, because the source runs its own fetch loop over the Kafka
//	    protocol and sees each fetch's next offset; so a partition whose
//	    last offsets carry no record still catches up. A partition whose
//	    start is at or after its end (empty, fully deleted, started at
//	    latest) is caught up at once (the snapshot is then the latest log
//	    end known). The snapshot is never re-read.
//	K6. A topic is caught up only when every one of its partitions is, at
//	    one moment, in all subtasks of the run (the readers of a job share
//	    one tracker in the process; the reader that completes a topic checks
//	    every partition's position against the log end its fetches last
//	    reported, and a partition with batches still queued is behind).
//	    Then, and not before, every split of the topic is marked idle
//	    (SourceOutput.SetSplitIdle) in every subtask, once, and every
//	    partition's state is final.
//	    No duration takes part in this decision. Each caught-up partition
//	    and each caught-up topic is logged once; Source.Status reports
//	    every partition's start, end, position and state, and the job's
//	    metrics carry them too (K15).
//	K7. A position the broker no longer has (retention, DeleteRecords; or
//	    one past the end) jumps to the log start (or the end), is logged,
//	    counted in PartitionStatus.Resets, and the catch-up check of K5 is
//	    made again at the new position.
//	K8. Live records. With LiveRejoin (default) a caught-up split becomes
//	    active again at its first live record, before emitting it, and its
//	    own generator drives it from then on (it rejoins the minimum once
//	    its watermark has reached the subtask's). With LiveStayIdle it stays
//	    idle for the rest of the run, so that event time follows the job's
//	    other inputs, such as a clock stream (package ordering).
//	K9. With CatchUpOff the source never marks splits idle (Status and
//	    the logs still report the catch-up). Time-out idleness
//	    (watermark.Strategy.WithIdleness) works with either policy: a split
//	    is idle while either says so.
//	K10. Checkpoints. Each split's position (the next offset to emit) is
//	    part of every checkpoint (runtime.SplitSnapshotter, plus a union
//	    list so that every subtask of a restored job sees all positions). A
//	    restored job, at any parallelism, assigns partitions by K1 and
//	    continues each from its checkpointed position; partitions the
//	    checkpoint does not know start at their earliest offset. With
//	    Options.Group set, the positions of a checkpoint are committed to
//	    the group when (and only when) that checkpoint completes, from a
//	    separate goroutine; the commits are for monitoring, never read back
//	    except by StartCommitted.
//	K11. A record the Deserializer rejects becomes a dead letter (Split =
//	    partition, Position = offset, the raw value, and a reason naming
//	    topic, partition and offset) and does not fail the job, unless
//	    the error wraps ErrFailJob (not the record's fault, such as a
//	    schema registry unreachable past its retry limit): that fails the
//	    job, naming the record, and the record is read again after the
//	    restore.
//	K12. Errors. A topic that does not exist, or brokers that cannot be
//	    reached, fail the job at start with a message that names them.
//	    Leader moves and retriable broker errors are retried (partitions
//	    are looked up again and move to their new leader's fetcher);
//	    non-retriable fetch errors fail the job, naming topic, partition and
//	    offset.
//	K13. With Options.DiscoveryInterval, partitions (and, with a pattern,
//	    topics) created after the start are found by the subtask that owns
//	    them ((start(topic) + partition) % parallelism, Flink's rule), read
//	    from their beginning, and are live from birth: they take no part in
//	    their topic's catch-up, and under CatchUpEndOffsets they start idle
//	    and follow Options.Live like caught-up splits.
//	K14. Stop. With Options.Stop, once the channel is closed each reader
//	    (before emitting anything more) lists the end offsets of its
//	    partitions' topics once (last stable offsets under read_committed).
//	    It emits every record before those offsets that it had not emitted
//	    yet, none at or after them, and ends (runtime.Done) when every
//	    split's position has reached its offset; partitions discovered
//	    after the listing are not read. A reader without partitions ends
//	    at once.
//	K15. Metrics. Each partition's catch-up is in the job's metrics
//	    (runtime.Metrics; Prometheus through package metrics), as gauges of
//	    the source operator and the subtask reading the partition, labelled
//	    topic and partition: MetricPartitionStartOffset (where the run
//	    started reading, -1 until resolved), MetricPartitionEndOffset (the
//	    snapshot, -1 until taken), MetricPartitionPosition (the consumer
//	    position, updated per fetched batch, -1 until resolved),
//	    MetricPartitionCaughtUp (0/1) and MetricPartitionCatchUpMillis
//	    (when it caught up, measured as the topic's below). Each topic has one series of
//	    MetricTopicCaughtUp (1 when every partition of it, in every
//	    subtask, has caught up) and MetricTopicCatchUpMillis (job-clock
//	    milliseconds from the run's first reader start to the topic's
//	    catch-up, -1 until then), labelled topic, on the subtask that
//	    reads the topic's lowest partition. Readers built outside a job
//	    (no SourceContext.LabeledGauge) publish nothing.
//	K16. Security. Options.Security and SinkOptions.Security (TLS and SASL,
//	    package kafkasec) apply to every client the source or sink makes,
//	    the transactional producers and admin clients included, before
//	    ClientOptions; they are validated by NewSource and the sink's
//	    Validate, before any connection.
//
// The sink side:
//
//	KS1. Sink and ExactlyOnceSink write each record with the key, value and
//	     headers Serialize gives, and the record's event time as timestamp
//	     when Serialize sets none.
//	KS2. Sink (at least once) produces asynchronously; a checkpoint (and
//	     the end of input) waits until every record before it is
//	     acknowledged, so a restore loses nothing; records after the
//	     restored checkpoint may be written again. A produce error fails the
//	     job.
//	KS3. ExactlyOnceSink writes each checkpoint interval of each subtask in
//	     one Kafka transaction (transactional id
//	     "<prefix>-<parallelism>-<subtask>-pool-<n>", see KS6), flushed at
//	     the checkpoint and committed when the checkpoint completes;
//	     read_committed readers see every record once.
//	KS4. A pre-committed transaction is committed by whichever process
//	     restores the checkpoint, from the producer id and epoch in it, with
//	     an EndTxn request (franz-go cannot resume another producer's
//	     transaction; this is what Flink's resumeTransaction achieves by
//	     reflection). Committing twice is harmless. If the broker aborted
//	     it meanwhile (TransactionTimeout too short), the restore fails and
//	     says so: those records are lost, not duplicated.
//	KS5. On restore, and on a fresh start, transactions left open by a
//	     failed run are aborted (a producer is initialized with each id of
//	     the pool of the checkpoint's open transaction, below the pool's
//	     size stored with it and on up to an id that was never used, but
//	     the ids of the transactions the restore commits), so they do not
//	     hold read_committed readers back until their time-out. Closing the
//	     sink never ends transactions.
//	KS6. Each subtask reuses a bounded pool of transactional ids
//	     (SinkOptions.TransactionalIDPoolSize, usually 3 or 4 in use), with
//	     their producers kept open: a checkpoint costs no new client and no
//	     InitProducerID, and the broker keeps no state per checkpoint. The
//	     id of a committed transaction returns to the pool only once a
//	     checkpoint or savepoint taken after the last one listing it as
//	     pending has completed, so a restore from the latest completed
//	     checkpoint never commits (KS4) a later transaction on a reused id.
//	     Restoring from an older retained checkpoint is not exactly-once
//	     (see ExactlyOnceSink).
//
// # Not guaranteed
//
// Without DiscoveryInterval, partitions and topics created after the job
// started are not read until the job restarts. The source's positions are
// exact, but end-to-end exactly-once output needs ExactlyOnceSink (or
// another two-phase-commit sink). The catch-up state is shared only
// between readers in one process (package cluster carries it across
// processes through its exchange topic: its W6). Records written to a
// partition after its latest fetch are live records (K5), whatever their
// timestamps: history loaded after the topic has caught up is late. ExactlyOnceSink's ids of one parallelism
// are disjoint from another's, so a rescale never fences a live producer;
// lingering transactions of the old parallelism are aborted only if they
// sit in the pool of a subtask of the restored checkpoint (others time
// out). Each restore may add one id to those a subtask has ever used (the
// probe for ids used after the checkpoint registers the first unused one),
// up to TransactionalIDPoolSize. Status and the
// gauges of K15 describe the current run only: after a restart the gauges
// start again from -1 and 0.
package kafka
