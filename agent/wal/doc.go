// Package wal is the embedded write-ahead log behind the agent operator's
// action-state store (agent.ActionStateStore) that needs no external
// system: durable on one machine's local disk, with group commit.
//
// Each operator subtask writes one log file, named by the key groups it
// owns (kg-<first>-<last>.wal) in a directory per operator (Factory). A
// record is
//
//	uint32 length | uint32 CRC-32C of type+payload | byte type | payload (JSON)
//
// of type put (an agent.ActionState), discard (a key and position), prune
// (keys and sequence numbers) or checkpoint prune (a prune with the id of
// the checkpoint it follows). The store keeps the live states in memory;
// the log is only read when a store opens. The file store.id holds the
// directory's store id, random, written when the directory gets its first
// store.
//
// # Guarantees
//
//	W1. Durability. Put, DiscardFrom and Prune return after their record has
//	    been written and fsynced (unless Options.NoSync): a state Put
//	    returned for survives a crash of the process or the machine.
//	W2. Group commit. Concurrent writers share fsyncs: while one batch is
//	    being synced the next accumulates, so N actions finishing together
//	    cost one write and one fsync, not N, without weakening W1.
//	    PutQueued (agent.Queuer) queues a state without waiting; its
//	    Pending's Wait returns once it is durable. Batches are written in
//	    order, so a record is durable only once every earlier one is (the
//	    writer is agent/internal/groupcommit's, invariants G1-G5).
//	W3. Recovery. Open replays the logs; a record cut short or corrupted by
//	    a crash (bad length or checksum) ends its log: the records before it
//	    are kept, it and anything after are ignored.
//	W4. Key groups. Open reads every log of the directory whose key-group
//	    range overlaps the subtask's and keeps the records of its own key
//	    groups, so states survive a change of parallelism. It then rewrites
//	    its live states into a fresh log of its own range and deletes the
//	    logs whose ranges lie inside it.
//	W5. Bounded size. When the log has grown past Options.MaxLogBytes and
//	    twice its live content, the live states are rewritten into a new log
//	    (written, fsynced, renamed over the old one).
//	W6. Errors. A failed write or fsync makes every later write fail with an
//	    error naming the file, the writes queued while the failed batch was
//	    being written included: they are not written (groupcommit G2);
//	    nothing is silently lost.
//	W7. Which checkpoints restore (agent.Checkpointed). Marker names the
//	    directory, the host and the directory's store id; Restore (the log
//	    was read by Open) fails with an error wrapping
//	    agent.ErrStatesMissing when a marker's store id is not the
//	    directory's: the checkpoint was taken with a WAL on another host, or
//	    the directory is new or was emptied. PruneCheckpoint records the
//	    checkpoint id with the prune, and compaction keeps the highest
//	    (PruneHorizon), so the operator refuses a checkpoint older than it.
//
// # Limits
//
// After a scale-up, the old logs that span several new subtasks stay on
// disk (each subtask has copied its part) until a restore at a parallelism
// whose ranges contain them; delete them by hand once a checkpoint at the
// new parallelism has completed.
package wal
