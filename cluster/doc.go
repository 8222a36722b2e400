// Package cluster runs one weir job across several processes on Kafka,
// and keeps its guarantees when a process dies (kill -9 included): event
// time as in one process, and exactly-once output through the Kafka
// exactly-once sink. Nothing but Kafka and a checkpoint store shared by the
// processes is needed: no coordinator of weir's own.
//
//	err := cluster.Run(ctx, cluster.Config{Brokers: brokers, Group: "totals",
//		SourceTopic: "events", KeyedTasks: 8, CheckpointBase: "/shared/totals"}, job)
//
// # The model (Kafka Streams' tasks, weir's runtime inside each)
//
// A Job is split at its key-by into two stages of small, ordinary local
// weir jobs of parallelism 1, called tasks:
//
//   - source task p (one per partition p of the source topic): the Kafka
//     source on partition p, the Job's Upstream steps, and the exchange
//     operator, which writes each record to the partition of the exchange
//     topic "<Group>-exchange" that owns the record's key group, through a
//     transactional sink;
//   - keyed task q (one per exchange partition, Config.KeyedTasks of
//     them): a source on exchange partition q (read_committed), the Job's
//     Keyed steps, and the exactly-once sink.
//
// Each task checkpoints on its own, to CheckpointBase/tasks/<task>/, and
// its transactional ids are derived from the task's name, the same in
// every process; TaskName gives that name to the Job's callbacks, for the
// ids of further sinks they add (side outputs). Which process runs which task is decided by a Kafka
// consumer group (Group) over the coordination topic "<Group>-tasks",
// which has one partition per task and never holds a record: the
// partitions assigned to a process are the tasks it runs.
//
// # Guarantees
//
//	C1. Exactly once. The committed output (read_committed) of a clustered
//	    run equals that of the same job run as one local job (BuildLocal)
//	    over the same input, whatever processes join, leave or are killed,
//	    provided no record is late in either (the watermarks of the two
//	    differ in timing, not in what they let through: see W4).
//	C2. Ownership. A task runs in at most one process at a time while
//	    processes keep their group sessions (M2). A process that loses its
//	    session (killed, paused, or its hand-over outlasted
//	    Config.RebalanceTimeout) is fenced: its task's new owner opens the
//	    same transactional ids, which aborts the old owner's open
//	    transactions and refuses its later writes, and its TaskStopped
//	    event says SessionLost. A process learns that it lost its session
//	    only at its next group call (a heartbeat, a JoinGroup): until
//	    then its tasks run on, fenced, and a bounded task may even finish
//	    (TaskFinished, with no SessionLost: the process cannot know yet).
//	    Once it learns, every task of that session it still has stops at
//	    once (M3), a finished one included, with SessionLost: the overlap
//	    with the new owner ends no later than the old owner's first group
//	    call that tells it, never when it keeps its session. A bounded
//	    process asks the group before it stops its finished tasks, so
//	    that call comes before their TaskStopped.
//	M1. A process runs exactly the tasks whose partitions of the tasks
//	    topic the group assigned to it; each starts in its own goroutine
//	    (a restore may be long; heartbeats go on).
//	M2. On revoke, each revoked task is checkpointed (bounded by
//	    Config.RevokeCheckpointTimeout) and stopped before the callback
//	    returns; the cooperative protocol gives it to another member only
//	    after that, provided the callback returns within
//	    Config.RebalanceTimeout (past it the group removes the process:
//	    a lost session). Tasks not revoked run on.
//	M3. On a lost session, the lost tasks stop at once, without a
//	    checkpoint (another process may own them already). That includes
//	    a session the process learns it lost when it joins again: franz-go
//	    answers a JoinGroup's UNKNOWN_MEMBER_ID (the coordinator removed
//	    the process, e.g. when it did not rejoin within the rebalance
//	    timeout during a broker outage) by joining as a new member
//	    without calling lost, so the process compares its member id at
//	    each assignment and revoke with the one its tasks were started
//	    under: a new one stops them as lost, and those the new session
//	    still gives it start again from their latest checkpoints.
//	M4. A task that fails is started again from its latest checkpoint
//	    after Config.RestartDelay while its process owns it; a task that
//	    finished (its FINISHED marker) is not run again.
//	M5. The group's membership is readable from any member
//	    (Config.OnGroup): the coordinator's description of the consumer
//	    group, each member named by its client id (its Config.Member and
//	    Config.Advertise) with the tasks-topic partitions assigned to it,
//	    which are its tasks. Nothing else is written for it.
//	M6. Static membership (Config.StaticMembership, KIP-345). The
//	    process's group.instance.id is Config.Member. It does not leave
//	    the group when it stops (its tasks still get their hand-over
//	    checkpoints, M2) nor, of course, when it is killed: its tasks
//	    stay assigned to it, and run nowhere, for Config.SessionTimeout.
//	    Started again within it with the same Member, it is given the
//	    same tasks with no rebalance: no task of another process stops,
//	    starts or moves. Past it, the group removes it and gives its
//	    tasks to the others, as for a dynamic member. It leaves
//	    explicitly (a LeaveGroup request by its instance id) when every
//	    task of a Bounded job has finished, and when it stops with
//	    Config.LeaveOnStop. A dynamic member leaves on every stop and
//	    joins as a new member on every start (one rebalance each).
//	M7. One process per static member. A process that joins with the
//	    Member of a static member still in the group takes that member's
//	    place and tasks at once (no revoke, hence no hand-over
//	    checkpoint); the broker fences the first (FENCED_INSTANCE_ID) at
//	    its next heartbeat, which stops its tasks at once (M3) and makes
//	    its Run return a *FencedMemberError. Until then a task may run in
//	    both: C2's ownership does not hold across a duplicate Member, C4
//	    and the transactional ids' fencing do.
//	C3. Restore. A task's new owner restores it from the task's latest
//	    completed checkpoint with the ordinary restore path: its sinks
//	    commit the transactions that checkpoint pre-committed and abort the
//	    rest (kafka KS4, KS5), its sources continue from its positions.
//	    With Config.RestoreFrom (a group savepoint, restore.go), a task
//	    that has no checkpoint of its own yet restores from its part of
//	    the savepoint instead, and never starts empty.
//	C4. Fencing of checkpoints. Each start of a task claims the task's
//	    checkpoint location (checkpoint.Storage.ClaimLatest: a new epoch,
//	    then the checkpoint it restores) before its first transaction, and
//	    writes with that fence: a process that ran the task before and
//	    still runs it (it lost its session) completes no checkpoint of the
//	    task afterwards (its job fails with checkpoint.ErrFenced and
//	    commits nothing more), and a manifest it published after the claim
//	    is void to every reader. It holds on stores that create a manifest
//	    only if absent (a directory with hard links, S3, GCS, Azure; see
//	    docs/checkpoints.md).
//	W1. Exchange partition q holds exactly key-group range q of
//	    MaxParallelism key groups at parallelism KeyedTasks (Flink's
//	    operator index for a key group), so a keyed task's state is that of
//	    a fixed set of key groups for the life of the job.
//	W2. Control records. A source task writes, to every exchange
//	    partition, control records tagged with its producer id (its source
//	    partition): its watermark when it advances (at most once per
//	    Config.ControlInterval; the latest is always sent), idle and active
//	    when its status changes, end of input, and its catch-up (W6): a
//	    "behind" record first in every run of the task, a "caught up"
//	    record once its partition has caught up. They are marked by the
//	    record header "weir-control". Data records travel in batches
//	    (header "weir-batch"): one Kafka record holds a producer's values
//	    for one exchange partition in order, each with its timestamp; a
//	    batch goes out when it is full (32 KiB), before every control
//	    record (so a control record still follows every record it covers,
//	    in each partition) and at every checkpoint barrier (so it is in
//	    that checkpoint's transaction, W3). A data record without a header
//	    holds one value (written before batches); keyed tasks read both.
//	    A batch's first byte is its version: 2 when its values are the
//	    binary codec's (Job.Codec nil and the type compiles: fields in
//	    type order, dynamic types of interfaces kept, see binCodec), 1
//	    when they are Job.Codec's or JSON's (a type the binary codec does
//	    not encode faithfully, decided once per type). Keyed tasks read
//	    both versions whatever Job.Codec is; a build before version 2
//	    fails on it, naming the version.
//	W3. Fencing of a failed epoch: transactions per checkpoint. A source
//	    task writes to the exchange topic in one transaction per
//	    checkpoint, committed when its checkpoint completes (the
//	    exactly-once sink's two-phase commit), control records included.
//	    So the exchange topic holds, per producer, exactly the output of
//	    its completed checkpoints; what a failed process wrote after its
//	    last completed checkpoint is aborted, never read (read_committed),
//	    and written again by the task's next owner.
//	W4. Watermarks. A keyed task's source treats each expected producer
//	    (every source partition, from the topic's metadata) as a split and
//	    combines them with the runtime's watermark.Combiner: its watermark
//	    is the minimum over the active producers; a producer that has sent
//	    nothing holds it at Min. It keeps each producer's last watermark,
//	    idleness and end in its checkpoints, so a restore never moves a
//	    watermark back. Producers are source partitions, not processes: a
//	    producer whose process died is re-owned by another process, so
//	    event time stalls only during the rebalance, never for good.
//	W5. End. With Config.Bounded, a keyed task ends when every producer has
//	    sent its end of input; Run returns once every task has finished.
//	W6. Catch-up across source tasks. A source task reads one partition,
//	    so its Kafka source's catch-up (kafka K5, K6) covers that partition
//	    alone; the topic's catch-up is decided where every partition's
//	    report meets, in each keyed task. A source task sends "behind" at
//	    the start of each run and "caught up" when its partition has
//	    caught up (read up to its end-offset snapshot with no backlog at
//	    its latest fetch), before the idle record that catch-up causes. A
//	    keyed task holds the source topic caught up once every producer
//	    has reported caught up (or ended) in its current run: until then
//	    the idleness of a caught-up producer is held back (its split stays
//	    active at its last watermark, holding the minimum, as a caught-up
//	    partition does in a local job until its whole topic has caught
//	    up), so a partition that catches up early never lets the others'
//	    replay carry event time past records still written to it. Idleness
//	    of a producer that has not caught up (a time-out of the
//	    Watermarks strategy) applies at once, as in a local job; after the
//	    topic has caught up every producer's idleness applies as sent. A
//	    producer that starts again (failover, restore) is behind until it
//	    has caught up again, in unbounded and bounded runs alike. The
//	    producers' catch-up is part of the keyed task's checkpoints. A
//	    producer made active again (its idleness held back here, or held
//	    by W7) holds the keyed task's watermark where it stands: its split
//	    is given that watermark when its own is lower, since an active
//	    split below the output rejoins the minimum only once it has caught
//	    up with it (watermark I5) and would hold nothing until then (a
//	    restored source task's "behind" made the caught-up producers
//	    active that way, and their restored tasks' records came late).
//	W7. Idleness is checked against the source topic. A source task's
//	    idle record names the position in its partition it went idle at
//	    (and, while it stays idle, a new one is sent when that position
//	    moves: transaction markers, compaction). Before anything of a
//	    poll may move its watermark, a keyed task lists the source
//	    topic's end offsets (last stable offsets under read_committed) and
//	    keeps a producer idle only if its partition still ends at that
//	    position: the records being applied were fetched before the
//	    check, so the producer was idle when the others read what now
//	    moves event time. A producer whose partition has more (its task
//	    was killed while idle, after records arrived, or has not yet
//	    committed what it read) is held: active again at the watermark
//	    the keyed task has reached, until it reports anew (its restored
//	    task's behind, records and watermarks, or a new idle). Without
//	    this a process killed while its source tasks were idle left their
//	    idleness in force, the other producers carried event time past
//	    everything written to their partitions meanwhile, and their
//	    restored tasks sent it late. A check that fails (brokers
//	    unreachable) holds too. Idle records written before W7 name no
//	    position and are applied as sent.
//	K1. Agents. Keyed task q runs as slice q of KeyedTasks of the job's
//	    key groups (runtime.Config.Slice), so its operators know the key
//	    groups it owns (runtime.Context.OwnedKeyGroups), whichever process
//	    runs it. An agent (agent.Apply) in the keyed steps, on the stream
//	    keyed by Job.Key, keeps its action-state store's guarantees across
//	    moves and kills: with the Kafka store (agent/kafkastore; one topic
//	    for the job, which the keyed tasks share, one partition each when
//	    the store creates it) the task's next owner, on any machine,
//	    rebuilds that task's states from the recovery marker in the task's
//	    checkpoint, replays completed actions and recorded calls instead of
//	    making them again, and prunes only that task's runs; every input is
//	    answered once in the output and every durable call is made under
//	    one idempotency key (the agent package's G10, with its
//	    residual window for calls in flight when a task stops). With the
//	    WAL store (agent/wal) the states are on the disk of the machine
//	    that recorded them: processes on one machine that share its
//	    directory move tasks freely; a task restored on another machine
//	    fails its restore with agent.ErrStatesMissing, at every retry
//	    (M4), so its output stops rather than its side effects repeating,
//	    unless agent.Options.AllowRepeatedSideEffects (the actions whose
//	    states are missing then run again, with their calls). A keyed operator keyed by anything but
//	    Job.Key would see keys of other tasks' key groups: an agent's store
//	    refuses them (and the job's state would be split by task anyway).
//
// # Not guaranteed
//
// A static member that stops for good without Config.LeaveOnStop (a
// scale-down) leaves its tasks unowned for Config.SessionTimeout (M6).
// The source topic's partition count, KeyedTasks and MaxParallelism are
// fixed for the life of the job's checkpoints. Records reach the exchange
// topic, and the output, a checkpoint interval after they are read. A
// process that keeps running after losing its session (a pause longer than
// the session timeout) is fenced at Kafka and in the checkpoint store
// (C4), but a task that fails in it before it notices the lost session is
// restarted there and claims the task again; the rightful owner's task is
// then fenced, fails and restarts in turn, until the group tells the old
// process (each restore is correct; the work is repeated). A bounded
// process that sees every task finished asks the group once whether it
// still has the process's member before it stops its tasks (a
// DescribeGroups; removed, they stop with SessionLost, C2); when no
// answer comes within the session timeout (the brokers unreachable), a
// process removed before any group call told it ends its Run without
// reporting SessionLost for them (it never learned). On a store
// without an atomic create (a file system without hard links) the
// manifest's existence check and write are two steps. A caught-up
// producer's time-out idleness is held back too until the topic has caught
// up (W6), where a local job applies it at once (kafka K9). The topic's
// catch-up reaches a keyed task a checkpoint interval late (control records
// travel in the source tasks' transactions, W3), so event time waits that
// much longer for it than in a local job. A keyed task of a version
// before batches cannot read a batch record (its values become dead
// letters), nor one before W6 its catch-up records: upgrade a job's
// processes together. Control and data records that do
// not decode become dead letters of the keyed task's source.
package cluster
