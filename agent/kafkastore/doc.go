// Package kafkastore is an action-state store (agent.ActionStateStore)
// kept in a compacted Kafka topic (after Flink Agents'
// KafkaActionStateStore): a job restored on another machine finds the
// states its actions recorded and does not repeat their side effects,
// which the embedded write-ahead log (package agent/wal), on one machine's
// disk, cannot promise. It works with any Kafka-protocol cluster, the
// embedded broker (package broker) included, through franz-go.
//
// # Layout
//
// One topic per job (Options.Topic), with cleanup.policy=compact. A
// record's key is the run's identity (agent.RunID.Encode), its value a
// binary encoding of the agent.ActionState (see codec.go; records of
// earlier versions hold its JSON, which is still read), or nothing (a
// tombstone) when the state was pruned or discarded. A header "kg" holds the key group (4 bytes, big
// endian) and, on states, a header "pos" the run's position (sequence
// number, event, action: 8 bytes big endian each), so that a restore skips
// the records of other key groups and indexes its own without decoding
// their values (a state is decoded when first asked for). Compaction keeps
// the latest record of every run and, after delete.retention.ms, drops the
// runs that were pruned.
//
// Records are partitioned by key group, in contiguous ranges: key group kg
// goes to partition kg × P / maxParallelism for a topic of P partitions
// (P ≤ maxParallelism; with more, key group kg goes to partition kg), the
// same rule that gives subtasks their key groups. A subtask therefore
// writes and reads only the partitions holding its own key groups: with P
// equal to the parallelism, one. Partitioning by a hash of the run identity
// would spread every subtask's states over every partition, and a restore
// of one subtask would read the whole topic. P must not change for the
// life of the topic (a restore refuses a marker taken with another P).
//
// The keyed tasks of a clustered job (package cluster) are separate jobs
// of parallelism 1, each one slice of the job's key groups
// (runtime.Config.Slice), and share the job's topic the same way: Factory
// opens each task's store on its slice's key groups
// (runtime.Context.OwnedKeyGroups), and a topic it creates has one
// partition per keyed task. So whichever process runs a keyed task, its
// store rebuilds, marks and prunes that task's key groups only, in that
// task's partition.
//
// # Guarantees
//
//	KT1. Durability. Put, DiscardFrom and Prune return once their records are
//	     acknowledged by all in-sync replicas (acks=all) of an idempotent
//	     producer: a retried request is not written twice, and the records of
//	     one partition are written in the order the store handed them over.
//	KT2. Group commit. Writes queue into the current batch; one goroutine
//	     hands a batch to the producer at once and waits for all its
//	     acknowledgements, and the writes queued meanwhile form the next
//	     batch. N actions completing together cost one produce round, not N
//	     (Flink Agents flushes the producer after every write; the
//	     benchmarks compare). PutQueued
//	     (agent.Queuer) queues a state without waiting; its Pending's Wait
//	     returns once it is acknowledged. One batch is in flight at a time
//	     and a failed one fails every later one, so a record is durable only
//	     once every earlier one is (the writer is agent/internal/groupcommit's,
//	     invariants G1-G5).
//	KT3. Errors. A failed batch fails every write in it with the cause, and
//	     every later write of the store fails with it too (the operator fails
//	     the job), the batch queued while it was in flight included, which is
//	     not produced; nothing is swallowed by a later success. Writes that the
//	     cluster cannot take time out after Options.DeliveryTimeout.
//	KT4. Recovery marker (agent.Checkpointed). Marker returns, per partition
//	     of the subtask's key groups, the lowest offset of a live state (not
//	     pruned or discarded) or, when there is none, the end of the log as
//	     last seen by the store; a Put in progress lands at or after it.
//	KT5. Restore. Restore lists the end offsets of the subtask's partitions
//	     once, then reads every partition from the lowest offset the markers
//	     give it until its position (the next offset to fetch, moved past
//	     compaction gaps too) reaches that end; no duration takes part. It
//	     keeps the records of the subtask's key groups, in log order, so a
//	     tombstone removes the state before it. Without markers (the
//	     operator's fresh start) it reads every partition from its start, so
//	     a job that fails before its first checkpoint does not repeat what its
//	     first run recorded; a store opened and never restored is empty.
//	     RestoreContext (agent.ContextRestorer, what the operator calls)
//	     ends with its context: its requests and its waits between
//	     retries, on the clock the context carries, return an error
//	     wrapping the context's error once it is done.
//	KT6. Pruning. Prune and DiscardFrom remove from memory and write
//	     tombstones for exactly the runs of the keys they name that match (a
//	     key's runs up to a sequence number, or from a position on); other
//	     keys' runs are never touched. The operator calls PruneCheckpoint
//	     (Prune and a prune horizon, KT8) in the background after a
//	     checkpoint completes, off the action path.
//	KT7. Topic. Open creates the topic if it is missing, with
//	     cleanup.policy=compact, and fails with an error saying what to do if
//	     it cannot, or if an existing topic is not compacted.
//	KT8. Which checkpoints restore. PruneCheckpoint writes, with its
//	     tombstones, a prune-horizon record (the checkpoint id) to each of
//	     the subtask's partitions, keyed by the subtask's key groups;
//	     Restore reads back the highest horizon its partitions hold from
//	     stores whose key groups overlap its own (PruneHorizon), and the
//	     operator refuses a checkpoint older than it. Horizons of other key
//	     groups do not count: another slice of a clustered job numbers its
//	     checkpoints apart. Restore checks the log against the
//	     markers: a topic of another id (deleted and created again), a
//	     partition ending before a marker's offset or starting after it
//	     (records deleted) make it return, once it has rebuilt what there is,
//	     an error wrapping agent.ErrStatesMissing.
//
// # Limits
//
// One state must fit in a record the topic accepts (max.message.bytes,
// about 1 MB by default); a larger one fails its Put, and the job.
//
// The store keeps the live states of its key groups in memory, as the WAL
// does. A restore loads the states of inputs that finished before the
// checkpoint but were not pruned yet; they go when their key's next input
// finishes (its prune covers every earlier sequence number).
package kafkastore
