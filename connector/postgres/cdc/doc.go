// Package cdc reads the changes of PostgreSQL tables as a weir source
// (change data capture): an optional consistent snapshot of the existing
// rows, then every insert, update, delete and truncate, through logical
// replication with the built-in pgoutput plugin (jackc/pglogrepl on pgx).
//
//	src := cdc.NewSource(cdc.Options{URL: "postgres://weir@db/shop", Tables: []string{"orders"}, Snapshot: true})
//	changes := weir.FromSource(env, "orders", src,
//		watermark.ForBoundedOutOfOrderness[cdc.Change](0)).UID("orders")
//
// A Change carries the operation, the table, the transaction's commit
// position (LSN) and commit time, and the row before and after as maps of
// column to typed value. Event time is the commit time.
//
// # Server settings
//
// wal_level = logical (restart needed), max_replication_slots and
// max_wal_senders of at least 1 each for the source, and a role with the
// REPLICATION privilege (or a superuser) that may read the tables. For an
// update's old row, ALTER TABLE ... REPLICA IDENTITY FULL; by default the
// server sends the old key only when the key changed, and a delete's key.
//
// # Guarantees
//
//	C1. Changes. Every change of a published table committed after the
//	    stream's start position is emitted once per run, in commit order,
//	    the changes of a transaction in their order and together (no other
//	    transaction's change comes between). Updates carry Before when the
//	    server sends it (replica identity FULL: the old row; otherwise the
//	    old key when the key changed); deletes carry the old row or key; a
//	    TRUNCATE of n published tables is n OpTruncate changes.
//	C2. One split. The slot is one replication stream, one split (id 0),
//	    read by subtask 0 on a fresh start, or by the subtask the split's
//	    state is restored to. A slot cannot be read by two connections, and
//	    a transaction spans tables, so splitting by table would need one
//	    slot per table (each costing the server a WAL sender and WAL
//	    retention) and would lose the commit order across tables; the
//	    source's decoding is cheap next to the server's, so one stream is
//	    not the bottleneck. Other subtasks emit nothing (and end at once
//	    when Bounded).
//	C3. Poll never blocks and emits at most Options.BatchSize changes. A
//	    goroutine per reader holds the connections, decodes, and hands
//	    batches to Poll through a buffer of Options.BufferedBatches; while
//	    it is full the goroutine stops reading (the server buffers, the
//	    slot holds the WAL) but keeps sending status updates.
//	C4. Values are decoded by their column's type (pgx's pgtype): integers
//	    as int16/int32/int64, numeric as pgtype.Numeric, text as string,
//	    timestamps as time.Time, uuid as [16]byte, json as decoded JSON;
//	    types pgx does not know (enums, user types) as their text. Columns
//	    of unchanged TOASTed values are named in Change.Unchanged and absent
//	    from After.
//	C5. Snapshot. With Options.Snapshot and no restored checkpoint, the
//	    slot is created (dropped first if it exists) with an exported
//	    snapshot, every published table is copied in a REPEATABLE READ
//	    transaction using that snapshot (OpRead changes, LSN = the slot's
//	    consistent point, CommitTime = the snapshot's time), and the stream
//	    starts at the consistent point: every row is in the snapshot or in a
//	    later change, never both, never neither. Checkpoints are declined
//	    (aborted, not failed) until the snapshot is done, because a copy
//	    cannot resume in a new snapshot; a failure during the copy restarts
//	    it from a new snapshot.
//	C6. Positions. The split's state in a checkpoint is the end position
//	    of the last transaction emitted whole, plus, when the checkpoint
//	    falls inside a transaction, that transaction's commit position and
//	    the number of its changes emitted. A restore streams from that
//	    position and skips what was emitted before it (a transaction
//	    committed before it, the first changes of the partial one), so
//	    downstream of an exactly-once sink every change is committed once.
//	    The position of a checkpoint is confirmed to the server (standby
//	    status update: written, flushed and applied) only when that
//	    checkpoint completes, so the slot keeps every change a restore may
//	    need; a crash replays from the slot. Status updates go out at least
//	    every Options.StatusInterval, whenever the confirmed position moves,
//	    and when the server asks for one. A restore from a checkpoint older
//	    than the slot's confirmed position fails (those changes are gone
//	    from the slot) with a message naming both positions.
//	C7. Catch-up by position, not by a time-out. When the stream starts,
//	    the server's current WAL insert position (pg_current_wal_insert_lsn:
//	    the end of the last record written; not the flush position, which
//	    lags transactions committed with synchronous_commit = off) is the
//	    end position. The source has caught up when it has received a
//	    transaction committed at or after it, or a keepalive saying the
//	    server has sent everything up to it (the source asks for one at the
//	    start); every change committed before it has then been emitted.
//	    The catch-up is logged once (Source.CaughtUp reports it); only after
//	    it does the split go idle while nothing arrives (active again at the
//	    next change). With Options.Bounded the source ends there:
//	    transactions committed at or after the end position are not
//	    emitted.
//	    A slot still held by another connection (the WAL sender of a
//	    killed process lingers until it notices) is waited for, up to 30s,
//	    before the start fails.
//	C8. Start-up checks. Before streaming, the source refuses a server
//	    whose wal_level is not logical and a role without the REPLICATION
//	    privilege, each with one line naming the setting (ErrServerSetup);
//	    Source.Check runs them alone.
//	C9. The publication (Options.Publication) is created if missing, for
//	    Options.Tables (or all tables when none are given); the slot
//	    (Options.Slot, pgoutput) is created if missing. Both are logged.
//	    Neither is ever dropped, except the slot on a fresh start with
//	    Snapshot (C5): drop an unused slot yourself (pg_drop_replication_slot),
//	    since the server keeps WAL for it.
//
// # Not guaranteed
//
// Schema changes are followed (a table's new columns appear in the next
// changes) but not emitted as changes. Changes of tables added to the
// publication after the slot was created are streamed, but their existing
// rows are not snapshot. Sequences, large objects and logical decoding
// messages are not read. Transactions are decoded at commit (pgoutput
// protocol version 1), so a large transaction reaches the source in full
// when it commits.
package cdc
