// Package postgres writes weir streams to a PostgreSQL table: inserts,
// upserts and deletes, exactly once through weir's two-phase commit or at
// least once, over pgx (a pgxpool per sink subtask).
//
//	postgres.Sink(orders, "orders-pg", postgres.Options[Order]{
//		URL:     "postgres://weir@db:5432/shop?sslmode=verify-full",
//		Table:   "public.orders",
//		Columns: []string{"id", "customer", "total"},
//		Row:     func(o Order) ([]any, error) { return []any{o.ID, o.Customer, o.Total}, nil },
//		Key:     []string{"id"}, // upsert; omit for plain inserts (COPY)
//	})
//
// StructColumns derives Columns and Row from `pg:"column"` struct tags.
// The change stream of a table (CDC) is read by the separate package
// connector/postgres/cdc.
//
// # Exactly-once modes, and why progress-table is the default
//
// progress-table (the default) keeps the rows of a checkpoint interval in
// the sink's transaction, which the checkpoint stores, and writes them
// when the checkpoint completes in one ordinary transaction that also
// inserts the transaction's name into a progress table; a transaction
// whose name is already there is skipped, so committing again (after a
// lost answer, or after a restore) writes nothing twice. It works on any
// server and any role that may create (or write) the progress table,
// holds no lock and no server transaction while the job waits for a
// checkpoint or is down, and has nothing to clean up after a crash. Its
// costs: checkpoints grow by the interval's rows (encoded for COPY),
// and rows reach the server in a burst at each completed checkpoint.
//
// two-phase writes rows as they come into a server transaction, PREPARE
// TRANSACTION at the checkpoint barrier and COMMIT PREPARED when the
// checkpoint completes. Checkpoints stay small and writing is spread over
// the interval; but the server needs max_prepared_transactions > 0 (0 is
// PostgreSQL's default, and many hosted servers keep it), and a prepared
// transaction keeps its row locks, and holds back VACUUM's horizon, until
// it is committed or rolled back, also while the job is down: writers to
// the same rows wait for it. They are listed by
//
//	SELECT gid, prepared, database FROM pg_prepared_xacts WHERE gid LIKE 'weir:%';
//
// and a job that will not be restored can release them with ROLLBACK
// PREPARED 'gid'. A restored job commits those its checkpoint lists and
// rolls back the rest (P4); a fresh start (no checkpoint) rolls back all
// of its subtask's.
//
// # Guarantees
//
//	P1. The table must exist with the columns named; the sink never
//	    creates or alters it. A missing table or column, or a key that is
//	    no primary key or unique constraint, fails the subtask's start.
//	P2. Exactly once (either mode): after any number of failures and
//	    restores, each record that reached the sink before the last
//	    completed checkpoint (or the end of bounded input) is applied to
//	    the table exactly once, in the order the subtask received it
//	    (inserted, upserted or deleted), provided the job is restored from
//	    its latest completed checkpoint with the same ID. Nothing of a
//	    checkpoint interval is visible before that checkpoint completes.
//	P3. progress-table: a transaction's rows are in the checkpoint until
//	    committed, in the COPY format Txn.Format names (a checkpoint of a
//	    version before binary COPY holds text, and commits as text); Commit inserts the row (ID, name) into the progress table
//	    and the rows in one server transaction, or does nothing when that
//	    row exists. Progress rows older than ProgressRetention are deleted
//	    when a subtask starts.
//	P4. two-phase: transaction names are
//	    weir:<ID>:<subtask>:<seq>:<run>, with a new random run per sink
//	    instance and seq numbered, after a restore, from the restored open
//	    transaction's seq on. Commit of a name no longer prepared succeeds
//	    (it was committed before). Recover rolls back the prepared
//	    transactions of the open transaction's subtask with seq >= its seq
//	    (those of the failed run, and of any later run that restored the
//	    same checkpoint); never one a checkpoint lists as pending (those
//	    are older). With max_prepared_transactions = 0 the subtask fails to
//	    start with an error naming the setting and mode progress-table.
//	P5. A transaction that fails with a transient error (Retryable:
//	    serialization failure, deadlock, lost connection,
//	    pg_terminate_backend) is retried whole, with every row it holds,
//	    at most Retries times: the failed attempt committed nothing (or,
//	    when only the answer to COMMIT/PREPARE was lost, the retry finds
//	    the progress row or the prepared transaction and writes nothing
//	    again), so a retry never duplicates a batch.
//	P6. At least once: a batch of Batch rows is committed when full, and
//	    the rest at each checkpoint barrier and at the end of input, so
//	    everything before a completed checkpoint is in the table; a restore
//	    writes again what came after it. With upserts (Key) writing a row
//	    again leaves the same table, so an upsert sink at least once ends
//	    in the state exactly once would give (deletes too), though a reader
//	    may see older values again for a while during the replay.
//	P7. Inserts (no Key) are sent by COPY, in its binary format when every
//	    column's type has a binary encoding (else in text: decided once,
//	    when the sink starts); upserts and deletes as pipelined batches of
//	    at most Batch statements, in record order, with text parameters.
//	    The rows accepted, rejected and stored do not depend on the format
//	    (TestBinaryMatchesText): a Go string for a non-text column is
//	    checked as the text of the column's type in either, and a
//	    time.Time goes with microseconds, the nanoseconds below dropped,
//	    in either (a string with more digits is rounded, in either).
//	P8. The password (in the URL, Password, PGPASSWORD or PGPASSFILE) is
//	    never logged nor put in an error.
//
// weirtest/sinkconformance drives both exactly-once modes (TestConformance):
// in-process failures, and kill -9 of a child process running the job,
// each followed by a restore from the latest checkpoint.
//
// Memory: in exactly-once modes a subtask holds the rows of the open
// checkpoint interval (encoded) until the barrier (two-phase) or until
// the checkpoint completes (progress-table); at least once, at most Batch
// rows.
package postgres
