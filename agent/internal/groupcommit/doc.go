// Package groupcommit is the group-commit writer of the action-state
// stores that write a log (agent/wal: a file and its fsync; agent/kafkastore:
// a produce round acknowledged by the in-sync replicas): writes queue into
// the batch that is accumulating, one goroutine writes one batch at a
// time, and the writes queued while a batch is being written form the
// next. N actions finishing together cost one write, not N.
//
// The writer does not know what a batch holds or how it is written: the
// store fills the batch's Data under its own lock and writes it in
// Flusher.Flush. The lock is the store's (New takes it), so that a store
// changes its in-memory index and queues the write's records in one
// critical section: memory and log see concurrent writes in the same
// order.
//
// The pipeline, for every batch:
//
//	queue (store, under its lock):  ErrLocked() == nil; b := QueueLocked(); add to b.Data
//	                                unlock; Wake(); b.Wait() (or hand b out as an agent.Pending)
//	writer goroutine:               lock; take b, start b+1; unlock
//	                                Flush(&b.Data)                 (no lock: writes queue into b+1)
//	                                lock; FlushedLocked(&b.Data, err); unlock
//	                                release b's waiters; Released(&b.Data) if the Flusher is a Releaser
//
// # Invariants
//
//	G1. Order. Batches are flushed one at a time, in the order they were
//	    started; a write is in the batch that was accumulating when it was
//	    queued. So a write is durable only once every write queued before it
//	    is.
//	G2. Sticky failure. Once a batch fails, every later batch fails with
//	    the same (first) error without being flushed, and ErrLocked returns
//	    it: no write queued after a lost one is reported durable, and
//	    nothing is swallowed by a later success.
//	G3. Release. Wait returns only after the batch's FlushedLocked has run
//	    (the store has recorded offsets, sizes, compaction), with the
//	    batch's error; every batch queued before Close is flushed by Close.
//	G4. Close. Close runs once: it refuses further writes (ErrLocked says
//	    the store is closed), flushes what is queued, stops the goroutine,
//	    then releases the store's resource; later calls return nil.
//	G5. Empty batches are never flushed: a batch is taken only once a
//	    write was queued into it.
//
// # Not guaranteed
//
// How long a Flush may take is the store's business (the Kafka store
// bounds it by its delivery timeout). Batches are not bounded in size: they
// are as large as the writes queued during one flush, which the operator
// bounds by its concurrency.
package groupcommit
