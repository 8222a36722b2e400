// Package ordering puts keyed streams in event-time order and keeps event
// time moving once the inputs are live (catch-up, then live traffic): Sort, a per-key sort
// that holds records in memory in sorted runs until the watermark passes
// them (held.go), and Clock, a stream without records whose watermark
// follows processing time.
//
//	orders := weir.FromSource(env, "orders", kafkaSrc, strategy)           // caught-up splits go idle
//	clockS := ordering.Clock[Msg](env, "clock", 5*time.Second, time.Second) // now - 5 s
//	sorted := ordering.Sort(weir.KeyBy(weir.Union(orders, clockS), Msg.Item), "sort",
//		ordering.SortOptions[Msg]{Tiebreak: func(m Msg) (int64, int64) { return int64(m.Partition), m.Offset }})
//
// # Guarantees
//
// Sort:
//
//	S1. Each record is held until the watermark passes its timestamp;
//	    nothing is emitted on arrival. When a watermark W arrives, every
//	    held record with timestamp <= W is released, with its timestamp,
//	    before W is forwarded: per key in ascending timestamp order (the
//	    operator keeps the records ordered by timestamp, tiebreak and
//	    arrival: sorted runs per first tiebreak value, such as a Kafka
//	    partition, merged at release, plus a heap for records that arrive
//	    out of their run's order (held.go); it does no per-key state or
//	    timer work per record). Records are held as values, or, with
//	    SortOptions.HeldCodec and a T containing pointers, encoded in byte
//	    slabs the garbage collector does not scan (arena.go); the order
//	    and what is released are the same either way. When the job chose
//	    the Pebble state backend, records are held instead in keyed list
//	    state per (key, timestamp) with an event-time timer each, both in
//	    the backend's database (sortstore.go), so a catch-up that holds
//	    more than memory runs: per key the order is the same (a timer
//	    releases its list sorted by tiebreak, then arrival); across keys,
//	    equal timestamps come out in the order their (key, timestamp) was
//	    first held.
//	S2. Records of one key with equal timestamps are released in Tiebreak
//	    order (then arrival order); with (partition, offset) as tiebreak the
//	    output of a replay is the same.
//	S3. A record that arrives with a timestamp at or behind the operator's
//	    watermark cannot be ordered any more (everything up to the watermark
//	    has been released): it is emitted at once, counted in the
//	    "orderViolations" counter, and also sent to SortOptions.Violations
//	    if set. No stream processor can sort an event it has not seen; the
//	    watermark's lag decides how late a record may be.
//	S4. Held records are in checkpoints and savepoints, per key group, in
//	    the format of keyed list state per (key, timestamp) with an
//	    event-time timer each (the operator's in-memory queue is written in
//	    that form only when a snapshot is taken; the Pebble mode holds them
//	    in that form, and its checkpoints are native)
//	    (so a restore at another parallelism re-slices them, and snapshots
//	    of earlier versions restore); a restored operator releases them as
//	    the watermark passes them again, keeping their order.
//	S5. Metrics: "orderViolations", "recordsReleased" (counters) and
//	    "recordsHeld" (gauge, updated at each watermark).
//	S6. The output is idle only while the input is idle and no record is
//	    held. An input going idle while records are held does not make the
//	    output idle: downstream, this channel keeps holding the minimum at
//	    the forwarded watermark, so the held records, emitted later, are
//	    never late there (an idle channel leaves a consumer's minimum, and
//	    the consumer's other inputs could carry it past them, as a Kafka
//	    source's caught-up, idle splits ending one subtask before the
//	    other did: TestSortHoldsIdleWhileHolding). The sort states it as a
//	    runtime.Holder; the runtime's rule for every such operator (runtime
//	    I8) does the rest.
//
// Clock:
//
//	C1. The stream has one split and no records. At its first poll, and at
//	    every tick of the job's clock (weir.Config.Clock, so a clock.Manual
//	    drives it in tests), its watermark becomes now - lag if that is
//	    higher than before. It never goes idle.
//	C2. Combined with data streams, it moves the minimum only when every
//	    data input is above it or idle: while a Kafka source is catching up,
//	    its splits hold the minimum and the clock changes nothing; once the
//	    topics have caught up (their splits idle, with kafka.LiveStayIdle)
//	    event time follows the clock.
//	C3. The lag bounds lateness in live mode: a live record whose timestamp
//	    is more than lag behind processing time when it reaches Sort is an
//	    order violation (S3).
//
// # Choosing the live mode
//
// With a Clock, give the Kafka sources kafka.LiveStayIdle: caught-up topics
// then never hold event time again, and event time is processing time minus
// the lag. Without a Clock, use kafka.LiveRejoin (the default): caught-up
// splits rejoin the minimum at their first live record and their own
// watermarks (and time-out idleness, if configured) drive event time. Both
// modes are tested (clock_test.go).
package ordering
