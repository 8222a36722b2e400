// Package httpsink sends a stream's records to an HTTP service: one record
// or a batch per request (a JSON array or JSON lines), each request with an
// idempotency key, retried with back-off, rate limited, and flushed at
// every checkpoint barrier.
//
//	dead := httpsink.Sink(orders, "to-billing", httpsink.Options[Order]{
//		URL:    "https://billing.example/v1/orders",
//		Batch:  100,
//		Header: http.Header{"Authorization": {"Bearer " + os.Getenv("BILLING_TOKEN")}},
//		RequestsPerSecond: 20,
//	})
//	weir.ToSink(dead, "refused", jsonl.Sink[httpsink.DeadLetter[Order]]("refused.jsonl"))
//
// # Guarantees
//
//	S1. A completed checkpoint implies delivered: at a checkpoint barrier
//	    the sink sends its partly filled batch and waits for the service's
//	    answer before it lets the barrier pass (SnapshotState). So every
//	    record before a completed checkpoint's barrier was accepted by the
//	    service (a 2xx) or is a dead letter (S5). Records after the
//	    barrier may have been sent too: after a failure the job restores
//	    the checkpoint and sends them again (at least once).
//	S2. Each request carries an idempotency key (header
//	    Options.IdempotencyKeyHeader, "Idempotency-Key" by default):
//
//	        PREFIX/EPOCH/SUBTASK/FIRST+N/HASH
//
//	    PREFIX is Options.KeyPrefix (default the operator name); EPOCH is
//	    drawn at random when the sink subtask starts afresh and kept in
//	    the checkpoints; FIRST is the sequence number, within the subtask,
//	    of the request's first record and N its number of records
//	    (restored with the checkpoint); HASH is the first 8 bytes of the
//	    body's SHA-256. A request sent again after a restore has the same
//	    key exactly when the sink subtask receives the same records in the
//	    same order after the restored checkpoint as it did before the
//	    failure: true of a sink chained behind a deterministic source
//	    subtask (files, generators, a Kafka subtask reading one partition)
//	    through deterministic steps. A service that honours the key then
//	    receives each record once (exactly once, like an agent's tool call
//	    with an idempotency key, docs/agents.md). When the order differs
//	    (several input channels interleaved, a source that does not
//	    replay, such as the webhook source), the hash makes the keys
//	    differ: the records are delivered again under new keys (at least
//	    once), never dropped as false duplicates. A restore at another
//	    parallelism, and a fresh start, begin a new epoch.
//	S3. Batches are cut where the subtask's sequence number reaches a
//	    multiple of Options.Batch, so after a restore the replayed batches
//	    are those of the failed run; barriers, the end of input and
//	    Options.FlushInterval cut a batch early. A barrier whose checkpoint
//	    did not complete before a failure (or a timed flush) moves the
//	    boundaries of the batch it cut: the records of at most that batch
//	    and the next may then reach the service twice. With Batch 1 every
//	    request is one record and S2 holds per record.
//	S4. Connection errors, time-outs (Options.Timeout per request) and the
//	    answers 408, 429 and 5xx are retried with the same key, up to
//	    Options.Retry.Attempts tries in all, waiting InitialDelay, then
//	    twice as long each time up to MaxDelay, or what the answer's
//	    Retry-After asks (seconds or an HTTP date, at most MaxRetryAfter).
//	    When the tries are used up the job fails; a restart strategy then
//	    restores the last checkpoint and the request is sent again with the
//	    same key (S2). The sink subtask waits while it retries (the
//	    records behind it are held up: back-pressure).
//	S5. Any other answer that is not a 2xx (400, 401, 403, 404, 409, 422,
//	    an unfollowed 3xx, ...) refuses the request for good: each of its
//	    records becomes a dead letter on the sink's output, with the status
//	    and the first 512 bytes of the answer's body in Reason, counted in
//	    the subtask's "deadLetters" metric; the job goes on. One refused
//	    record refuses its whole batch. Records that Options.Encode fails on
//	    are dead letters with Status 0. Dead letters are emitted when their
//	    batch is answered, so they may be behind the watermark.
//	S6. Options.RequestsPerSecond and RecordsPerSecond are token buckets
//	    (golang.org/x/time/rate) per sink subtask, waited on in the job's
//	    processing time before every try; a request of n records takes n
//	    record tokens.
//	S7. Header values (Options.Header) are sent with every request and are
//	    never logged, nor put in errors, metrics or dead letters.
//	S8. At most one request per sink subtask is in flight; a batch holds at
//	    most Options.Batch records.
//
// # Not guaranteed
//
// Order across sink subtasks. Exactly-once delivery to a service that does
// not honour idempotency keys (it receives what S1-S4 send: at least once).
package httpsink
