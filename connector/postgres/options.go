package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir"
)

// Delivery is the sink's guarantee.
type Delivery string

const (
	// ExactlyOnce (the default) commits the rows of a checkpoint
	// interval only when that checkpoint completes, through weir's
	// two-phase commit, in the way Mode says.
	ExactlyOnce Delivery = "exactly-once"
	// AtLeastOnce commits each batch as soon as it is full, and what is
	// left at each checkpoint barrier and at the end of input (P6).
	AtLeastOnce Delivery = "at-least-once"
)

// Mode is how an exactly-once sink makes a checkpoint's rows durable
// before the checkpoint completes (see the package documentation).
type Mode string

const (
	// ProgressTable (the default) keeps the rows of an interval in the
	// checkpoint and writes them, with a row of the progress table, in
	// one ordinary transaction when the checkpoint completes (P3).
	ProgressTable Mode = "progress-table"
	// TwoPhase writes the rows as they come into a transaction that is
	// prepared (PREPARE TRANSACTION) at the checkpoint barrier and
	// committed (COMMIT PREPARED) when the checkpoint completes (P4). The
	// server needs max_prepared_transactions > 0.
	TwoPhase Mode = "two-phase"
)

// Options configure a sink. The zero value of every field but URL, Table,
// Columns and Row is usable.
type Options[T any] struct {
	// URL is the connection string: a URL (postgres://user@host:5432/db?
	// sslmode=verify-full&sslrootcert=/path/ca.pem) or a key=value DSN,
	// as libpq reads them: sslmode, sslrootcert, sslcert, sslkey and the
	// PG* environment variables apply, and without a password in the URL
	// the password comes from Password, PGPASSWORD or the PGPASSFILE
	// (~/.pgpass). The sink never logs it nor puts it in an error (P8).
	URL string
	// Password, when set, replaces the URL's password (the pipeline file
	// fills it from ${ENV}).
	Password string
	// Table is the target table, "name" or "schema.name" (not quoted:
	// each part is quoted as an identifier). It must exist: the sink
	// never creates or alters it (P1).
	Table string
	// Columns are the target columns, in the order of the values Row
	// returns.
	Columns []string
	// Row returns the column values of a record, one per column. The
	// sink encodes them (with pgx's types, to the column's type) before
	// it calls Row again, so the slice may be reused. A nil value, or a
	// nil pointer, is NULL.
	Row func(T) ([]any, error)
	// Key are the columns of a primary key or unique constraint of the
	// table. Empty: rows are inserted (COPY). Set: rows are upserted
	// (INSERT ... ON CONFLICT (Key) DO UPDATE SET the other columns),
	// and Delete may delete them.
	Key []string
	// Delete reports whether a record deletes the row of its key (the
	// key columns of Row's values; the others are ignored), such as
	// func(c Change) (bool, error) { return c.Op == "delete", nil }.
	// Needs Key. nil: no record deletes. An error fails the job.
	Delete func(T) (bool, error)
	// Delivery is ExactlyOnce when empty.
	Delivery Delivery
	// Mode is the exactly-once mode, ProgressTable when empty. Ignored
	// at least once.
	Mode Mode
	// Batch is how many rows are sent together (one COPY, or one
	// pipelined batch of statements); at least once it is also how many
	// rows a transaction commits. 0 means 10,000 for inserts (COPY, whose
	// cost is mostly per COPY) and 1,000 with Key.
	Batch int
	// ID names the sink in the server: in the progress table and in the
	// names of prepared transactions. Two jobs (or two sinks of one job)
	// writing exactly once to one database need different IDs; a job
	// restored from a checkpoint needs the ID it had. Letters, digits,
	// '_', '.', '-'; at most 100 characters. Empty: the table name and
	// the operator's UID (or name).
	ID string
	// Rejected, if not nil, receives the records the sink cannot write
	// (weir.ErrRejected: a value its column's type cannot hold, no value
	// for a NOT NULL column, or a Row or Delete error wrapping
	// weir.ErrRejected), with the reason, as a side output of the stream
	// Sink returns (weir.SideOutput); they are counted (deadLetters) and
	// the job goes on. nil: such a record fails the job.
	Rejected *weir.OutputTag[weir.Rejected[T]]
	// ProgressTable is the progress table (mode progress-table), created
	// if missing; "" means weir_sink_progress.
	ProgressTable string
	// ProgressRetention is how long progress rows are kept; rows older
	// than that are deleted when a subtask starts. 0 means 7 days. It
	// must exceed the age of any checkpoint the job may be restored
	// from.
	ProgressRetention time.Duration
	// Retries is how many times a transaction that failed with a
	// transient error (serialization failure, deadlock, a lost
	// connection, the server shutting down) is retried whole; 0 means
	// 5, negative means never.
	Retries int
	// RetryBackoff is the first wait before a retry, doubled each time up
	// to 5s (or RetryBackoff, when longer); 0 means 100ms.
	RetryBackoff time.Duration
}

// idPattern is what an ID may hold: it is a part of a prepared
// transaction's name and of a LIKE pattern, so no '%', '_' is escaped.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

func (o *Options[T]) withDefaults() Options[T] {
	c := *o
	if c.Delivery == "" {
		c.Delivery = ExactlyOnce
	}
	if c.Mode == "" {
		c.Mode = ProgressTable
	}
	if c.Batch <= 0 {
		c.Batch = 1000
		if len(c.Key) == 0 {
			c.Batch = 10_000
		}
	}
	if c.ProgressTable == "" {
		c.ProgressTable = "weir_sink_progress"
	}
	if c.ProgressRetention <= 0 {
		c.ProgressRetention = 7 * 24 * time.Hour
	}
	if c.Retries == 0 {
		c.Retries = 5
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	return c
}

// Validate checks the options without connecting: the job calls it when
// it is built (weir.TwoPhaseCommitChecked).
func (o *Options[T]) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("postgres: "+format, a...)) }
	if o.URL == "" {
		bad("URL is empty; want a connection string such as postgres://user@host:5432/db?sslmode=verify-full")
	} else if _, err := pgx.ParseConfig(o.URL); err != nil {
		bad("URL does not parse (%s); want postgres://user@host:port/db?options or key=value pairs", redact(err.Error(), o.URL, o.Password))
	}
	if _, err := splitTable(o.Table); err != nil {
		errs = append(errs, err)
	}
	if len(o.Columns) == 0 {
		bad("Columns is empty; want the target columns, in the order Row returns their values")
	}
	seen := map[string]bool{}
	for _, c := range o.Columns {
		if c == "" {
			bad("Columns has an empty name")
		}
		if seen[c] {
			bad("column %q is listed twice", c)
		}
		seen[c] = true
	}
	if o.Row == nil {
		bad("Row is nil; want a function returning a record's column values")
	}
	keys := map[string]bool{}
	for _, k := range o.Key {
		if !seen[k] {
			bad("key column %q is not one of Columns %v", k, o.Columns)
		}
		if keys[k] {
			bad("key column %q is listed twice", k)
		}
		keys[k] = true
	}
	if o.Delete != nil && len(o.Key) == 0 {
		bad("Delete needs Key (rows are deleted by their key columns)")
	}
	switch o.Delivery {
	case "", ExactlyOnce, AtLeastOnce:
	default:
		bad("Delivery %q; want exactly-once or at-least-once", o.Delivery)
	}
	switch o.Mode {
	case "", ProgressTable, TwoPhase:
	default:
		bad("Mode %q; want progress-table or two-phase", o.Mode)
	}
	if o.Batch < 0 {
		bad("Batch %d; want > 0 (or 0 for 1000)", o.Batch)
	}
	if o.ID != "" && !idPattern.MatchString(o.ID) {
		bad("ID %q; want 1 to 100 letters, digits, '_', '.' or '-'", o.ID)
	}
	if o.ProgressTable != "" {
		if _, err := splitTable(o.ProgressTable); err != nil {
			bad("ProgressTable: %v", err)
		}
	}
	if o.ProgressRetention < 0 {
		bad("ProgressRetention %v; want >= 0", o.ProgressRetention)
	}
	return errors.Join(errs...)
}

// splitTable returns the quoted identifier of "name" or "schema.name".
func splitTable(t string) (pgx.Identifier, error) {
	parts := strings.Split(t, ".")
	if t == "" || len(parts) > 2 {
		return nil, fmt.Errorf("postgres: table %q; want name or schema.name", t)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("postgres: table %q; want name or schema.name", t)
		}
	}
	return pgx.Identifier(parts), nil
}

// redact removes the password (of the URL, or given) from s (P8).
func redact(s, url, password string) string {
	if password != "" {
		s = strings.ReplaceAll(s, password, "xxxxx")
	}
	if cfg, err := pgx.ParseConfig(url); err == nil && cfg.Password != "" {
		s = strings.ReplaceAll(s, cfg.Password, "xxxxx")
	}
	if url != "" {
		s = strings.ReplaceAll(s, url, "(the URL)")
	}
	return s
}
