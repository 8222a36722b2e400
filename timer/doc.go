// Package timer holds the timers of a keyed operator subtask: a priority
// queue set of timers (Queue) and the per-subtask timer service (Service)
// with one event-time and one processing-time queue, following the semantics
// of Flink's InternalTimerServiceImpl and HeapPriorityQueueSet. The queue is
// organised by timestamp (a bucket of timers per distinct timestamp, and a
// heap of the timestamps), because many timers usually share one: every
// key's window ends at the same instant.
//
// A service made by NewServiceInStore keeps its timers in a Store instead
// (the Pebble state backend's database, state.Backend.TimerStore), with
// a small cache of each key group's first timers and a heap of key groups
// in memory (store.go), so its timers need not fit in memory. I1
// to I7 hold for it too; equal timestamps keep their registration order
// through a sequence number of the service stored with each timer, also
// after its storage is restored natively (Reload), where "restored timers
// in the order they are restored" becomes "in the order the service that
// wrote them registered them" (timers restored from several old
// databases with equal timestamp and sequence fire by key group).
// I8 does not: see NewServiceInStore for its costs.
//
// # What it guarantees
//
//	I1. Identity. A timer is identified by (Timestamp, Key, Namespace).
//	    Registering a timer that is already registered leaves exactly one timer;
//	    deleting a timer that is not registered is a no-op. The exception is
//	    RegisterNewEventTimeTimer (Queue.AddNew), for a caller that knows the
//	    timer is not registered: it skips the check, and a duplicate would
//	    fire twice.
//	I2. Order. Timers fire in ascending timestamp order. Timers with equal
//	    timestamps fire in the order they were registered (a timer registered
//	    again after it fired or was deleted counts as new; restored timers in
//	    the order they are restored), so the same sequence of operations on a
//	    fresh queue yields the same order.
//	I3. Watermark. AdvanceWatermark(wm) first sets the current watermark to wm,
//	    then fires every event-time timer with Timestamp <= wm. A timer
//	    registered by a callback during the pass fires in the same pass if its
//	    timestamp is <= wm, and a timer deleted by a callback does not fire. The
//	    current watermark never decreases; a wm not above it is ignored.
//	I4. At most once. A fired timer is removed from its queue before its
//	    callback runs, so it never fires twice unless registered again.
//	I5. Processing time. AdvanceProcessingTime(now) fires every
//	    processing-time timer with Timestamp <= now, including those registered
//	    during the pass with Timestamp <= now. The head-change callback is
//	    called only when a registration makes the earliest processing-time
//	    timestamp earlier (not for timers the running pass will fire), so the
//	    runtime keeps a single wake-up and reschedules it only then.
//	I6. Key groups. Each queue counts its timers per key group of its range,
//	    and the first ForEachInKeyGroup after a change groups every timer by
//	    key group in one pass, so visiting all key groups (a snapshot) costs
//	    O(n) once, not O(n) per key group. A timer whose KeyGroup is outside
//	    the range is a routing bug and panics.
//	I7. Snapshots. SnapshotKeyGroup(kg) writes the event-time and
//	    processing-time timers of key group kg without changing the service;
//	    RestoreKeyGroup(kg, blob) adds them back in any service whose range
//	    holds kg (any parallelism), all or nothing, and returns an error, never
//	    panics, on a malformed blob. Keys and namespaces are encoded by codecs
//	    (NewServiceWithCodecs; codec.Default by default).
//	I8. Cost. With b distinct timestamps queued: Add is O(1) amortized when
//	    a timer with its timestamp is queued (one map access on (key,
//	    namespace) once the timestamp has more than a few timers, a scan
//	    below that), O(log b) when it brings a new timestamp; Poll is O(1)
//	    amortized (no hashing), O(log b) when it empties its timestamp;
//	    Remove is like Add; Peek, Contains, Len and LenKeyGroup are O(1).
//	    Emptied buckets are recycled, so a steady state of adds and polls
//	    does not allocate beyond Go map and slice growth.
//
// # What it does not do
//
//   - It is not safe for concurrent use; a Service belongs to the subtask's
//     mailbox goroutine, which calls every method.
//   - It owns no clock and schedules nothing: the runtime calls
//     AdvanceProcessingTime when its wake-up fires, and asks
//     NextProcessingTime after each pass and after a restore (overdue restored
//     timers then fire at once).
//   - It does not forward watermarks or set the current key for callbacks;
//     callers do, using the Timer passed to fire.
//   - It does not decide when to snapshot or where blobs go: the runtime
//     calls SnapshotKeyGroup / RestoreKeyGroup per key group (format under
//     SnapshotVersion and in docs/state-format.md). The current watermark is
//     not snapshotted; sources regenerate watermarks after a restore.
//   - Deleting the earliest processing-time timer does not reschedule the
//     wake-up; the wake-up then fires nothing.
//   - Callbacks must not call AdvanceWatermark / AdvanceProcessingTime
//     (that panics), and ForEach* callbacks must not modify the queue.
package timer
