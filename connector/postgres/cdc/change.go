package cdc

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// LSN is a position in the server's write-ahead log.
type LSN = pglogrepl.LSN

// Op is what a Change did.
type Op string

// The operations of a Change.
const (
	// OpRead is a row of the initial snapshot (Options.Snapshot).
	OpRead Op = "read"
	// OpInsert is a new row: After holds it.
	OpInsert Op = "insert"
	// OpUpdate is a changed row: After holds the new row; Before the old
	// one if the table's replica identity is FULL, or the old key if the
	// update changed the key (REPLICA IDENTITY DEFAULT or USING INDEX),
	// else nil.
	OpUpdate Op = "update"
	// OpDelete is a removed row: Before holds the old row (REPLICA
	// IDENTITY FULL) or its key (the default: the primary key).
	OpDelete Op = "delete"
	// OpTruncate is a TRUNCATE of the table: Before and After are nil.
	OpTruncate Op = "truncate"
)

// Change is one change of a published table. Its maps are new for every
// change and belong to whoever receives it.
type Change struct {
	Op     Op
	Schema string
	Table  string
	// LSN is the commit position of the change's transaction (all
	// changes of a transaction share it), or, for OpRead, the slot's
	// consistent point (the snapshot's position).
	LSN LSN
	// CommitTime is the transaction's commit time (the change's event
	// time), or, for OpRead, the time the snapshot was taken.
	CommitTime time.Time
	// Before and After map column names to values decoded by their
	// PostgreSQL type (pgx's pgtype: int32, int64, float64, string, bool,
	// time.Time, pgtype.Numeric, [16]byte for uuid, map[string]any for
	// json, ...); values of types pgx does not know are strings in the
	// server's text form. SQL NULL is nil.
	Before, After map[string]any
	// Unchanged names the columns of After the server did not send
	// because an update left their (TOASTed, large) value as it was; they
	// are absent from After.
	Unchanged []string
}

// EventTime is the change's event time in Unix milliseconds.
func (c *Change) EventTime() int64 { return c.CommitTime.UnixMilli() }
