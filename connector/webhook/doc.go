// Package webhook is a source of records posted to an HTTP endpoint: a
// JSON object, a JSON array of records, or JSON lines per request. A
// request is answered 200 only once its records are safe: in a completed
// checkpoint (or, with AckOnEmit, emitted downstream).
//
//	src := webhook.New(webhook.Options[Order]{Listen: "127.0.0.1:8080", Path: "/orders",
//		Token: os.Getenv("INGEST_TOKEN"), Timestamp: func(o Order) (int64, bool) { return o.TS, o.TS > 0 }})
//	orders := weir.FromSource(env, "orders", src, watermark.ForBoundedOutOfOrderness[Order](time.Second))
//
// # Guarantees
//
//	W1. Subtask 0 of the source listens on Options.Listen (127.0.0.1:8080,
//	    loopback only, unless set) and takes POSTs at Options.Path; the
//	    other subtasks have no split and stay idle. The listener is opened
//	    when the job is built (a port in use fails Start) and closed when
//	    the subtask ends; a restarted job listens again.
//	W2. With AckOnCheckpoint (the default), a request is answered 200 only
//	    after a checkpoint whose barrier follows all its records has
//	    completed (NotifyCheckpointComplete): its records are then part of
//	    the job's committed output (with exactly-once sinks) or state. A
//	    client that got 200 need not send again; any other answer, or none,
//	    means it must (W6).
//	W3. With AckOnEmit, for jobs without checkpoints, a request is answered
//	    200 once its records have been handed to the operators after the
//	    source. A failure after that loses them: at most once.
//	W4. A request is all or nothing: every value must decode (and, with
//	    Options.Timestamp, have an event time), or the request is answered
//	    400 naming the first bad value, and nothing of it is emitted. Its
//	    records are emitted together, in request order, between two
//	    checkpoint barriers. Order between requests is their order of
//	    admission.
//	W5. Event time is Options.Timestamp's, or the request's arrival time
//	    (the job's processing-time clock, the same for all its records).
//	    With arrival time the source reports a watermark of now-1 at every
//	    poll, since later requests arrive later.
//	W6. After a failure, restart or stop, every request not answered 200
//	    is answered 503 with Retry-After (or gets no answer if the process
//	    died): the client must send it again; the source keeps nothing in
//	    checkpoints and reads nothing again. A client never gets a 200 for
//	    records that are not in a completed checkpoint. Records of a request
//	    the client abandons (it closed the connection) go on. One window
//	    gives duplicates: a failure after a checkpoint completed but before
//	    the source was told, which answers 503 for records that were
//	    committed; a request id in the records lets downstream deduplicate.
//	W7. Back-pressure is bounded: at most Options.Queue records are held
//	    (queued for the job, or emitted and waiting for their checkpoint);
//	    a request that does not fit is answered 429 with Retry-After
//	    (Options.RetryAfter) at once, without waiting. A request body over
//	    Options.MaxBody, or with more records than Queue, is answered 413.
//	W8. With Options.Token, every request must carry "Authorization:
//	    Bearer TOKEN", compared in constant time (over SHA-256 digests, so
//	    the length does not leak either); otherwise 401 with
//	    WWW-Authenticate. The token is never logged. Other methods than POST
//	    are answered 405, other paths 404.
//
// # Not guaranteed
//
// TLS: put the endpoint behind a reverse proxy that terminates TLS, or keep
// it on loopback. The source does not scale over subtasks (W1).
package webhook
