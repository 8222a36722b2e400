// Package mutant plants bugs in weir's real code for the simulator to find
// (issue 29, "the simulator catches planted bugs"; docs/reliability.md,
// Simulation). A planted bug is a branch at a real place of the runtime,
// the watermark combiner, the timers, the window operator, the event-time
// sort, the two-phase sink, the checkpoint storage, the agent operator and
// the Kafka connector:
//
//	if mutant.On(mutant.TimerFiresEarly) { ... the wrong behaviour ... }
//
// In a normal build On is a constant false function: the compiler inlines
// it and removes the branch with its body, so a mutant costs nothing, not
// even a load, on any path (M1; `go build -gcflags=-m` shows On inlined,
// and TestOffIsInert checks a normal build refuses every mutant). Built with the tag weir_mutants, On reports whether name is the
// one active mutant: the environment variable WEIR_MUTANT names it at
// start, and Set (for tests) changes it. At most one mutant is active.
//
// Invariants:
//
//	M1. Without the tag weir_mutants, On returns false for every name and
//	    Set refuses every name but "": no planted bug can run in a
//	    release build.
//	M2. With the tag, On(name) is true exactly while name is the active
//	    mutant; Set accepts only the names of All.
//
// The names are the constants below; All lists them with where each is
// planted. A name says what the wrong code does.
package mutant

// Name is a planted bug's name.
type Name string

// The planted bugs. Each is a single small change at a real place; the
// comment names the place.
const (
	// CombinerEarly: watermark.Combiner forwards its combined watermark
	// one millisecond ahead of the minimum of its inputs.
	CombinerEarly Name = "watermark.combiner-one-early"
	// CombinerMax: watermark.Combiner forwards the maximum over its inputs
	// rather than the minimum.
	CombinerMax Name = "watermark.combiner-max"
	// TimerFiresEarly: timer.Service fires event-time timers with
	// Timestamp <= wm+1 (a timer fires one millisecond before the
	// watermark reaches it).
	TimerFiresEarly Name = "timer.fires-at-ts-gt-wm"
	// TimerFiresLate: timer.Service fires only timers with Timestamp < wm.
	TimerFiresLate Name = "timer.fires-at-ts-lt-wm"
	// WindowFiresEarly: the window operator registers a window's firing
	// timer at its last millisecond minus one.
	WindowFiresEarly Name = "window.fires-one-ms-early"
	// WindowCleanupEarly: the window operator drops a window's state one
	// millisecond before the watermark reaches its cleanup time.
	WindowCleanupEarly Name = "window.cleanup-one-ms-early"
	// WindowKeepsExpiredState: the window operator does not register the
	// cleanup timer of a window of a non-merging assigner when it is later
	// than the firing timer (allowed lateness above 0), so the window's
	// contents outlive its cleanup time (MaxTimestamp + lateness) for
	// good. The output does not change: a record for the window after
	// that time is late all the same; only what the job keeps grows.
	// (In session windows, kept contents change what later sessions
	// merge into, which the output shows.)
	WindowKeepsExpiredState Name = "window.keeps-expired-state"
	// WindowSessionEditInPlace: the window operator edits a key's session
	// set, read from the state, in place (a merge compacts it into its own
	// backing array, a cleanup shifts it) before writing it back even while
	// a snapshot may read it (ValueState.SnapshotMayRead), so a
	// copy-on-write snapshot in progress captures the edit (the bug
	// 5ea47e2 fixed).
	WindowSessionEditInPlace Name = "window.session-set-edited-in-place"
	// ChannelDropBeforeBarrier: the runtime's local channel loses the last
	// record sent before each checkpoint barrier.
	ChannelDropBeforeBarrier Name = "runtime.drop-last-record-before-barrier"
	// RestoreSecondLatest: checkpoint.Storage.Latest returns the
	// checkpoint before the latest complete one.
	RestoreSecondLatest Name = "checkpoint.restore-second-latest"
	// CheckpointNoSync: checkpoint files are closed without Sync, so a
	// machine crash loses them although the manifest says they exist.
	CheckpointNoSync Name = "checkpoint.skip-fsync"
	// SinkCommitBeforeCheckpoint: weir.TwoPhaseCommit commits a
	// transaction at its pre-commit, before the checkpoint that covers it
	// completes.
	SinkCommitBeforeCheckpoint Name = "sink.commit-before-checkpoint-completes"
	// SinkSkipRecoverCommit: weir.TwoPhaseCommit, restored, does not commit
	// the pre-committed transactions of the checkpoint it restores.
	SinkSkipRecoverCommit Name = "sink.skip-commit-on-restore"
	// SourceForgetsSplit: the runtime's snapshot of a source subtask
	// leaves out the last of the split items its reader returned.
	SourceForgetsSplit Name = "runtime.source-forgets-a-split"
	// SortReleasesEarly: ordering.Sort releases, at a watermark W, the
	// held records with timestamp <= W+1 (one millisecond early).
	SortReleasesEarly Name = "ordering.sort-releases-at-ts-le-wm+1"
	// SortArrivalOrder: the sort's held queue appends a record to its run
	// even when it is out of the run's order, so such records are
	// released in arrival order rather than timestamp order.
	SortArrivalOrder Name = "ordering.sort-keeps-arrival-order"
	// AgentPruneAtSnapshot: the agent operator prunes the action states of
	// the inputs a checkpoint covers when it takes the checkpoint, not once
	// the checkpoint has completed and is the oldest retained one.
	AgentPruneAtSnapshot Name = "agent.prune-before-checkpoint-completes"
	// AgentWatermarkPastRunning: the agent operator forwards a watermark at
	// once when no input waits and none is held, though actions of earlier
	// inputs are still running.
	AgentWatermarkPastRunning Name = "agent.forward-watermark-past-running-actions"
	// AgentCallBeforeRecorded: a durable call starts without waiting for
	// the previous call's result to be durable.
	AgentCallBeforeRecorded Name = "agent.call-before-previous-result-durable"
	// AgentKeyPerInput: the idempotency key of a durable call is derived
	// from the input (key, sequence number) and the call's position in its
	// run, not from the run and the call's name: the first call of an
	// input's second action gets the key of its first action's first call.
	AgentKeyPerInput Name = "agent.idempotency-key-per-input-not-per-run"
	// AgentWaitTimesOutEarly: the agent operator arms a wait's time-out
	// timer at its recorded deadline minus one millisecond, as if the
	// deadline were the wait's last millisecond (as a window's timer is at
	// its MaxTimestamp, end - 1), where it is the first past it: the wait
	// times out one millisecond before Wait.Timeout has passed.
	AgentWaitTimesOutEarly Name = "agent.wait-times-out-early"
	// WALAckWithoutSync: the agent's WAL acknowledges a batch of writes
	// (Put, a queued write's Wait) once written, without its fsync.
	WALAckWithoutSync Name = "wal.ack-without-sync"
	// WALRestoreSkipsLast: the agent's WAL, rebuilding its states from a
	// log file, leaves out the file's last record.
	WALRestoreSkipsLast Name = "wal.restore-skips-last-record"
	// KafkaCommitAtPreCommit: kafka.ExactlyOnceSink commits a transaction
	// at its pre-commit, before the checkpoint that covers it completes.
	KafkaCommitAtPreCommit Name = "kafka.sink-commits-at-pre-commit"
	// KafkaSnapshotOnePast: the kafka source checkpoints each partition's
	// position one past the next record to emit.
	KafkaSnapshotOnePast Name = "kafka.source-snapshots-one-past"
	// KafkaCommitUnknownAsDone: kafka.ExactlyOnceSink takes a commit whose
	// EndTxn got no answer (the connection dropped, the broker
	// unreachable: the outcome is unknown) as committed, instead of
	// failing so that the restore commits the transaction again (KS4).
	KafkaCommitUnknownAsDone Name = "kafka.sink-takes-unanswered-commit-as-done"
	// ProcTimerTrustsWakeup: the runtime's processing-time scheduler,
	// woken by its clock timer, takes the time it armed the timer for as
	// reached without reading the clock: after the wall clock stepped
	// back (the timer measures a duration), it fires callbacks before the
	// clock reads their time.
	ProcTimerTrustsWakeup Name = "runtime.proc-timer-trusts-its-wakeup"
	// ClusterFailedTaskFinished: a clustered task whose job failed is
	// marked finished, as if its input had ended and its output were
	// committed, instead of being restarted from its checkpoint (M4).
	ClusterFailedTaskFinished Name = "cluster.failed-task-marked-finished"
	// ClusterRevokedKeepRunning: a member whose tasks the group revokes
	// in a rebalance does not stop them: they run on beside their new
	// owners (each start of a task claims its checkpoints and fences the
	// other, so the two restart each other) until the member stops (C2,
	// M2).
	ClusterRevokedKeepRunning Name = "cluster.revoked-tasks-keep-running"
	// ClusterStartWithoutCheckpoint: a clustered task's new start (a
	// restart, a move to another member) claims its checkpoint location
	// but restores nothing: it starts from the beginning of its input
	// instead of its latest checkpoint (C3).
	ClusterStartWithoutCheckpoint Name = "cluster.task-starts-without-its-checkpoint"
	// TimerRestoreDropsLast: timer.Service.RestoreKeyGroup leaves out the
	// last event-time timer of a key group's snapshot that holds more
	// than one, so a restored job misses a window's firing or cleanup
	// (or a timer function's timer) that its checkpoint held.
	TimerRestoreDropsLast Name = "timer.restore-drops-last-event-time-timer"
)

// All lists every planted bug with the file it is planted in.
var All = []struct {
	Name  Name
	Where string
}{
	{CombinerEarly, "watermark/combiner.go emitMin"},
	{CombinerMax, "watermark/combiner.go emitMin"},
	{TimerFiresEarly, "timer/service.go AdvanceWatermark"},
	{TimerFiresLate, "timer/service.go AdvanceWatermark"},
	{TimerRestoreDropsLast, "timer/snapshot.go RestoreKeyGroup"},
	{WindowFiresEarly, "window/operator.go fireTime"},
	{WindowCleanupEarly, "window/operator.go cleanupTime"},
	{WindowKeepsExpiredState, "window/operator.go afterAdd"},
	{WindowSessionEditInPlace, "window/merging.go removeAt, mergeWindow"},
	{ChannelDropBeforeBarrier, "runtime/channel.go writer.barrier"},
	{RestoreSecondLatest, "checkpoint/fs.go Storage.Latest"},
	{CheckpointNoSync, "checkpoint/store.go dirWriter.Close"},
	{SinkCommitBeforeCheckpoint, "twophase.go SnapshotState"},
	{SinkSkipRecoverCommit, "twophase.go Open (restore)"},
	{SourceForgetsSplit, "runtime/taskcheckpoint.go task.checkpoint (snapshot of a source subtask)"},
	{SortReleasesEarly, "ordering/sort.go ProcessWatermark"},
	{SortArrivalOrder, "ordering/held.go heldQueue.push"},
	{AgentPruneAtSnapshot, "agent/snapshot.go SnapshotState"},
	{AgentWatermarkPastRunning, "agent/operator.go ProcessWatermark"},
	{AgentCallBeforeRecorded, "agent/durable.go durable"},
	{AgentKeyPerInput, "agent/durable.go idempotencyKey"},
	{AgentWaitTimesOutEarly, "agent/answers.go registerWait"},
	{WALAckWithoutSync, "agent/wal/write.go flusher.Flush"},
	{WALRestoreSkipsLast, "agent/wal/log.go Store.loadFrom"},
	{KafkaCommitAtPreCommit, "connector/kafka/sink.go txnSink.PreCommit"},
	{KafkaSnapshotOnePast, "connector/kafka/reader.go reader.states"},
	{KafkaCommitUnknownAsDone, "connector/kafka/sink.go txnSink.Commit"},
	{ProcTimerTrustsWakeup, "runtime/ptimers.go procTimers.fireFrom"},
	{ClusterFailedTaskFinished, "cluster/task.go taskRunner.loop"},
	{ClusterStartWithoutCheckpoint, "cluster/job.go taskEnv"},
	{ClusterRevokedKeepRunning, "cluster/member.go member.revoked"},
}
