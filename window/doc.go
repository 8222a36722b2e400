// Package window groups the records of a keyed stream into windows and
// computes a result per key and window, with Flink's WindowOperator
// semantics: tumbling, sliding and session windows in event time or
// processing time, global windows and count windows; incremental Reduce
// and Aggregate, buffering Process; allowed lateness with re-firing; late
// records counted and optionally sent to a side output; custom triggers
// (WithTrigger) and evictors (WithEvictor).
//
//	clicks := weir.KeyBy(events, func(e Click) string { return e.User })
//	perMinute := window.AggregateKeyed(clicks, "clicks-per-minute",
//		window.Tumbling(time.Minute), countClicks,
//		window.AllowedLateness(10*time.Second), window.LateOutput(lateTag))
//
// Every function adds one keyed operator (weir.TransformKeyed): records of
// a key reach one subtask, whose keyed state (package state) holds the
// window contents and whose timer service (package timer) holds one
// trigger and one cleanup timer per window, with the window as namespace.
// Results carry the timestamp Window.MaxTimestamp(), so a result is never
// behind the watermark that fired its window, and windowing the results
// again (a minute of seconds, say) works.
//
// # Guarantees
//
// Let wm be the operator's current watermark, L the allowed lateness
// (AllowedLateness, default 0), and cleanup(w) = w.MaxTimestamp() + L for
// event-time windows (saturating at math.MaxInt64) and w.MaxTimestamp() for
// processing-time windows.
//
//	I1. Assignment. A tumbling window of size s and offset o containing t
//	    starts at t - floorMod(t - o, s), for negative t too (Flink's
//	    t - (t - o + s) % s puts the start after t once t - o + s < 0).
//	    Sliding windows of size s and slide d containing t are
//	    [x, x+s) for x = start(t, o, d), x - d, ... while x > t - s, latest
//	    first. A session record opens [t, t+gap). Every assigned window
//	    contains t. Event-time assigners use the record's timestamp;
//	    processing-time assigners the clock's time when the operator
//	    processes the record.
//	I2. Firing. An event-time window fires when wm reaches its
//	    MaxTimestamp (a timer at MaxTimestamp, fired in timestamp order
//	    before the watermark is forwarded, so results precede the watermark
//	    that fired them). A processing-time window fires when the clock
//	    reaches its MaxTimestamp. A window without records never fires.
//	    Each firing emits what the function makes of the window's whole
//	    contents (Reduce and Aggregate: one record; Process: what it emits),
//	    each with timestamp MaxTimestamp.
//	I3. Lateness. A window w is gone once cleanup(w) <= wm: records are no
//	    longer added to it. A record is added to each of its windows that
//	    is not gone. A record added to an event-time window whose
//	    MaxTimestamp <= wm (possible only with L > 0) fires that window
//	    again at once, with the updated contents.
//	I4. Late records. A record that no window took and whose timestamp
//	    satisfies ts + L <= wm is late: it is counted in the subtask's
//	    counter "lateRecordsDropped" and, with LateOutput, emitted unchanged
//	    to that side output and counted in "lateRecords" too. (A record that
//	    no window took without being late, in the gap of a sliding assigner
//	    whose slide exceeds its size, is dropped uncounted, as in Flink.)
//	    Processing-time windows have no late records.
//	I5. Cleanup. All state of a window (contents, timers, its entry in the
//	    session set) is removed when its cleanup timer fires, that is when
//	    wm (or, in processing time, the clock) reaches cleanup(w); state is
//	    bounded by the windows not yet cleaned up. A key with no open window
//	    has no state.
//	I6. Sessions. Per key, the open session windows never intersect
//	    (Window.Intersects: touching counts, so records exactly one gap
//	    apart share a session). A new window merges with every open window
//	    it intersects into their Cover: their contents are folded together
//	    (Reduce's function, AggregateFunction.Merge, or Process's lists
//	    concatenated), the timers of the merged windows are deleted and the
//	    result gets its own. Merged contents are never lost or counted twice.
//	I7. Routing. Every record of a key is windowed in the subtask that owns
//	    the key's key group (weir I1); windows of different keys never
//	    share state.
//	I8. End of input. A bounded input ends with the maximum watermark,
//	    which fires every event-time window and cleans it up. Processing-
//	    time windows still open when the input ends fire then (weir's
//	    choice: Flink drops them); no state is left either way.
//	I9. Cost. For tumbling and sliding windows the per-record path
//	    allocates nothing beyond what the state maps need (the assigned
//	    windows go into a reused scratch slice), and it touches the timer
//	    queue only for a window's first record (and, after a restore, until
//	    the watermark has passed every restored timer; see I11). Sessions
//	    read and rewrite the key's session set per record. With a Trigger,
//	    each record also costs a trigger call and what the trigger does
//	    (EventTimeTrigger: a timer-queue lookup; CountTrigger: a state
//	    read and write); still no allocation per record.
//	I10. Determinism. Given the same records and watermarks per subtask,
//	    the operator emits the same records in the same order (timer ties
//	    break deterministically, timer I2).
//	I11. Checkpoints. The operator is a runtime.Snapshotter: contents,
//	    session sets, trigger state and timers are written per key group
//	    (format in snapshot.go; windows with WindowCodec, contents with
//	    StateCodec), so a restore, at any parallelism, resumes every open
//	    window and every trigger where it was. The watermark is not
//	    checkpointed and starts over from the minimum: as in Flink, a
//	    record that joins a restored window which had fired already makes
//	    it fire again once the regenerated watermark passes its end (if it
//	    is still within its allowed lateness).
//
// I2 describes the default triggers. With a Trigger (WithTrigger, or the
// default of Global and the count assigners) I2 becomes I12; everything
// else (assignment, lateness, cleanup, merging of contents) stays.
//
//	I12. Triggers. The trigger is called, with Flink's WindowOperator
//	    rules, after each record is added to a window (OnElement), for each
//	    of the window's timers that falls due (OnEventTime as the watermark
//	    reaches it, OnProcessingTime as the clock does, cleanup timers
//	    included), on merges (OnMerge on the result, then Clear on each
//	    window merged away) and at cleanup (Clear). A result that fires
//	    emits what the function makes of the window's current contents
//	    (nothing if they are empty), with timestamp MaxTimestamp; one that
//	    purges then drops the contents but not the window (its timers,
//	    trigger state and cleanup stay). The trigger's state is keyed
//	    state of the operator, per key and window, dropped at the window's
//	    cleanup. A trigger that cannot merge (CanMerge false, or a state
//	    without a merge function) with a merging assigner fails the job
//	    build. The explicit EventTimeTrigger gives exactly the default
//	    path's output (TestWindowsMatchModel, TestSessionsMatchModel).
//	I13. Evictors. With an Evictor the window keeps every record with its
//	    timestamp, Reduce and Aggregate included (their function then runs
//	    over the kept records at each firing, as in Flink's
//	    EvictingWindowOperator); at each firing EvictBefore runs before the
//	    function and EvictAfter after it, and what they evict is removed
//	    for good.
//	I14. Global and count windows. Global puts all records of a key in
//	    GlobalWindow, which is never cleaned up and fires only as its
//	    trigger says (NeverTrigger by default); it has no time domain of
//	    its own, so no record is late. CountTumbling(n) is Global with
//	    PurgingTrigger(CountTrigger(n)): each key's records in windows of n,
//	    each fired at its n-th record, the incomplete last one never.
//	    CountSliding(size, slide) is Global with CountTrigger(slide) and
//	    CountEvictor(size): at every slide-th record of a key, its last size
//	    records.
//
// I8 with a trigger: at the end of input the final watermark fires every
// event-time timer (a continuous event-time trigger then fires once more,
// at the window's end, rather than at every interval left), and in
// processing time the clock is advanced to the latest processing-time
// timer pending at that moment, each timer on the way firing once.
//
// # What it does not do
//
//   - Trigger state is int64 values (TriggerState), enough for every
//     built-in trigger of Flink but not for DeltaTrigger's last element;
//     there is no DeltaTrigger and no ProcessingTimeoutTrigger.
//   - Event-time windows need timestamps: a record with
//     runtime.NoTimestamp fails the job with ErrNoTimestamp.
//   - Timestamps are assumed to leave room for window arithmetic (within
//     about ±2^62 ms); window ends and cleanup times saturate at
//     math.MaxInt64 rather than wrap.
//   - Contents are checkpointed with their codec (StateCodec, default
//     state.DefaultCodec): an accumulator the codec cannot encode fails the
//     checkpoint, it is never silently dropped.
//   - Processing-time timers that fall due while a job is down fire at
//     once after the restore; windows are not re-timed.
package window
