package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// Txn is one transaction of the sink: the rows one subtask wrote between
// two checkpoint barriers. It is stored in checkpoints (as JSON).
type Txn struct {
	// ID, Subtask, Seq and Run name the transaction (Name).
	ID      string `json:"id"`
	Subtask int    `json:"subtask"`
	Seq     int64  `json:"seq"`
	Run     string `json:"run"`
	// Rows counts the rows written; a transaction without rows has
	// nothing to commit.
	Rows int64 `json:"rows"`
	// Data and Ops are the rows themselves in mode progress-table (P3),
	// held until Commit, in the format of COPY Format names; empty in the
	// other modes.
	Data []byte `json:"data,omitempty"`
	Ops  []byte `json:"ops,omitempty"`
	// Format is Data's format: "" COPY's text (also that of every
	// checkpoint written before binary COPY, which commit as before),
	// "binary" COPY's binary tuples (a table without key whose types
	// all have a binary encoding).
	Format string `json:"format,omitempty"`
}

// Name is the transaction's name in the server: the gid of its prepared
// transaction (two-phase) or its row in the progress table:
// weir:<ID>:<subtask>:<seq, 12 digits>:<run>.
func (t *Txn) Name() string {
	return fmt.Sprintf("%s%012d:%s", namePrefix(t.ID, t.Subtask), t.Seq, t.Run)
}

func namePrefix(id string, subtask int) string {
	return "weir:" + id + ":" + strconv.Itoa(subtask) + ":"
}

// Sink ends s in a PostgreSQL sink with the guarantee o.Delivery; the
// options are checked when the job is built.
func Sink[T any](s weir.Stream[T], name string, o Options[T]) weir.Stream[struct{}] {
	return weir.TwoPhaseCommitRejecting(s, name, o.Validate, New(o), o.Rejected)
}

// New returns the sink factory for weir.TwoPhaseCommit (Sink calls it).
// Every delivery is a TwoPhaseCommitter: at least once, Write and
// PreCommit commit and Commit does nothing.
func New[T any](o Options[T]) func(ctx *runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
	return func(ctx *runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
		if err := o.Validate(); err != nil {
			return nil, err
		}
		c := o.withDefaults()
		s := &sink[T]{o: c, subtask: ctx.Subtask, log: ctx.Logger, m: pgtype.NewMap(), run: newRun()}
		if s.log == nil {
			s.log = slog.Default()
		}
		s.id = c.ID
		if s.id == "" {
			op := ctx.UID
			if op == "" {
				op = ctx.Name
			}
			s.id = defaultID(c.Table, op)
		}
		s.ctx, s.cancel = context.WithCancel(context.Background())
		if err := s.open(); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
}

func newRun() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// defaultID keeps the characters an ID may hold.
func defaultID(table, op string) string {
	id := []byte(table + "." + op)
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			id[i] = '_'
		}
	}
	if len(id) > 100 {
		id = id[:100]
	}
	return string(id)
}

// sink is one subtask's sink. Every method runs on the subtask's
// goroutine (TwoPhaseCommitter's lifecycle), so nothing is locked.
//
//	progress-table:  Write appends to txn.Data; PreCommit does nothing
//	                 (the checkpoint stores txn); Commit runs
//	                 BEGIN; INSERT progress row (skip all if present); rows; COMMIT.
//	two-phase:       Write appends to buf; a full buf is sent into the
//	                 open server transaction (begun on the first send) and
//	                 kept in sent; PreCommit sends the rest and runs
//	                 PREPARE TRANSACTION name; Commit runs COMMIT PREPARED name.
//	at-least-once:   Write appends to buf; a full buf is committed in a
//	                 transaction of its own; PreCommit commits the rest.
//
// A transaction that fails with a transient error is retried whole (P5):
// in two-phase mode the rows already sent are kept (sent) for that.
type sink[T any] struct {
	o       Options[T]
	id      string
	subtask int
	run     string
	seq     int64
	log     *slog.Logger
	m       *pgtype.Map
	pool    *pgxpool.Pool
	tbl     *table
	ctx     context.Context
	cancel  context.CancelFunc
	scratch []byte
	// progress is the quoted progress table (progress-table mode).
	progress string

	// buf holds rows not sent yet (two-phase, at-least-once).
	buf rowBuf
	// sent holds the rows sent into the open server transaction
	// (two-phase), for a retry; conn holds that transaction, nil when
	// none is open.
	sent []rowBuf
	conn *pgxpool.Conn
	// free holds emptied buffers for reuse (their memory, not rows).
	free []rowBuf
}

// spare returns an empty buffer, reusing a freed one's memory.
func (s *sink[T]) spare() rowBuf {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		b.reset()
		b.binary = s.tbl.binary // a buffer of a restored transaction may hold another format
		return b
	}
	return rowBuf{binary: s.tbl.binary}
}

// recycle keeps the memory of buffers whose rows are done with (at most
// a few, so a burst does not pin its memory).
func (s *sink[T]) recycle(bs ...rowBuf) {
	for _, b := range bs {
		if len(s.free) < 4 && cap(b.data) > 0 {
			s.free = append(s.free, b)
		}
	}
}

func (s *sink[T]) exactlyOnce() bool { return s.o.Delivery == ExactlyOnce }
func (s *sink[T]) twoPhase() bool    { return s.exactlyOnce() && s.o.Mode == TwoPhase }

func (s *sink[T]) open() error {
	cfg, err := pgxpool.ParseConfig(s.o.URL)
	if err != nil {
		return fmt.Errorf("postgres: URL: %s", redact(err.Error(), s.o.URL, s.o.Password))
	}
	if s.o.Password != "" {
		cfg.ConnConfig.Password = s.o.Password
	}
	// One connection holds the open transaction (two-phase), one more
	// commits prepared ones.
	cfg.MaxConns = 2
	s.pool, err = pgxpool.NewWithConfig(s.ctx, cfg)
	if err != nil {
		return s.errorf("connect: %w", err)
	}
	return s.retry("open", func(ctx context.Context, _ int) error {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		if s.twoPhase() {
			var n string
			if err := conn.QueryRow(ctx, "SHOW max_prepared_transactions").Scan(&n); err != nil {
				return err
			}
			if n == "0" {
				return errPermanent{fmt.Errorf("postgres: mode two-phase needs the server setting max_prepared_transactions > 0 (it is 0: set it in postgresql.conf and restart the server), or use mode progress-table, which works on any server")}
			}
		}
		tbl, err := describe(ctx, conn.Conn(), s.m, mustSplit(s.o.Table), s.o.Columns, s.o.Key)
		if err != nil {
			return errPermanent{err}
		}
		s.tbl = tbl
		s.buf = rowBuf{binary: tbl.binary}
		if s.exactlyOnce() && !s.twoPhase() {
			return s.openProgress(ctx, conn.Conn())
		}
		return nil
	})
}

func mustSplit(t string) pgx.Identifier {
	id, _ := splitTable(t)
	return id
}

// openProgress creates the progress table if it is missing and deletes
// this subtask's rows older than ProgressRetention.
func (s *sink[T]) openProgress(ctx context.Context, conn *pgx.Conn) error {
	s.progress = mustSplit(s.o.ProgressTable).Sanitize()
	_, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.progress+
		" (sink text NOT NULL, txn text NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (sink, txn))")
	if err != nil {
		// Subtasks creating it at once race in the catalog; one wins.
		var exists bool
		if qerr := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", s.progress).Scan(&exists); qerr != nil || !exists {
			return errPermanent{fmt.Errorf("postgres: create progress table %s: %w", s.progress, err)}
		}
	}
	prefix := namePrefix(s.id, s.subtask)
	_, err = conn.Exec(ctx, "DELETE FROM "+s.progress+" WHERE sink = $1 AND left(txn, length($2)) = $2 AND committed_at < now() - make_interval(secs => $3)",
		s.id, prefix, s.o.ProgressRetention.Seconds())
	if err != nil {
		return fmt.Errorf("postgres: prune progress table %s: %w", s.progress, err)
	}
	return nil
}

// Begin implements weir.TwoPhaseCommitter.
func (s *sink[T]) Begin() (*Txn, error) {
	s.seq++
	txn := &Txn{ID: s.id, Subtask: s.subtask, Seq: s.seq, Run: s.run}
	if s.exactlyOnce() && !s.twoPhase() {
		b := s.spare()
		txn.Data, txn.Ops = b.data, b.ops
		if b.binary {
			txn.Format = formatBinary
		}
	}
	return txn, nil
}

// Write implements weir.TwoPhaseCommitter.
func (s *sink[T]) Write(txn *Txn, r weir.Record[T]) error {
	vals, err := s.o.Row(r.Value)
	if err != nil {
		return fmt.Errorf("postgres: Row: %w", err)
	}
	op := byte(opWrite)
	if s.o.Delete != nil {
		del, err := s.o.Delete(r.Value)
		if err != nil {
			return fmt.Errorf("postgres: Delete: %w", err)
		}
		if del {
			op = opDelete
		}
	}
	if s.exactlyOnce() && !s.twoPhase() {
		b := rowBuf{data: txn.Data, ops: txn.Ops, binary: txn.Format == formatBinary}
		s.scratch, err = s.tbl.encodeRow(s.m, &b, op, vals, s.scratch)
		txn.Data, txn.Ops = b.data, b.ops
		if err == nil {
			txn.Rows++
		}
		return err
	}
	if s.scratch, err = s.tbl.encodeRow(s.m, &s.buf, op, vals, s.scratch); err != nil {
		return err
	}
	txn.Rows++
	if s.buf.rows() < s.o.Batch {
		return nil
	}
	if s.twoPhase() {
		return s.send(txn)
	}
	return s.commitBuf()
}

// commitBuf commits buf in a transaction of its own (at least once).
func (s *sink[T]) commitBuf() error {
	if s.buf.rows() == 0 {
		return nil
	}
	err := s.retry("write", func(ctx context.Context, _ int) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return s.tbl.write(ctx, tx.Conn(), &s.buf, s.o.Batch)
		})
	})
	s.buf.reset()
	return err
}

// send moves buf to the open server transaction (two-phase), beginning
// it if there is none: then everything sent before is sent again (the
// transaction is retried whole, never in part, P5).
func (s *sink[T]) send(txn *Txn) error {
	if s.buf.rows() == 0 {
		return nil
	}
	chunk := s.buf
	s.buf = s.spare()
	s.sent = append(s.sent, chunk)
	return s.retry("write", func(ctx context.Context, _ int) error {
		if s.conn != nil {
			if err := s.tbl.write(ctx, s.conn.Conn(), &chunk, s.o.Batch); err != nil {
				s.dropConn()
				return err
			}
			return nil
		}
		return s.beginSent(ctx)
	})
}

// beginSent begins a server transaction and sends it every chunk of
// sent (two-phase).
func (s *sink[T]) beginSent(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	s.conn = conn
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		s.dropConn()
		return err
	}
	for i := range s.sent {
		if err := s.tbl.write(ctx, conn.Conn(), &s.sent[i], s.o.Batch); err != nil {
			s.dropConn()
			return err
		}
	}
	return nil
}

// dropConn ends the open server transaction (two-phase) without
// committing it; the rows stay in sent.
func (s *sink[T]) dropConn() {
	if s.conn == nil {
		return
	}
	if !s.conn.Conn().IsClosed() {
		if _, err := s.conn.Exec(context.Background(), "ROLLBACK"); err != nil {
			s.conn.Conn().Close(context.Background())
		}
	}
	s.conn.Release()
	s.conn = nil
}

// PreCommit implements weir.TwoPhaseCommitter.
func (s *sink[T]) PreCommit(txn *Txn) error {
	switch {
	case !s.exactlyOnce():
		return s.commitBuf()
	case !s.twoPhase():
		return nil // the checkpoint stores txn, rows included (P3)
	}
	if err := s.send(txn); err != nil {
		return err
	}
	if len(s.sent) == 0 {
		return nil
	}
	gid := txn.Name()
	err := s.retry("prepare", func(ctx context.Context, attempt int) error {
		if attempt > 0 && s.conn == nil {
			// The earlier attempt may have prepared it and lost the
			// answer; sending the rows again would then wait forever
			// for the locks the prepared transaction holds.
			var n int
			if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_xacts WHERE gid = $1", gid).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
		}
		if s.conn == nil {
			if err := s.beginSent(ctx); err != nil {
				return err
			}
		}
		_, err := s.conn.Exec(ctx, "PREPARE TRANSACTION "+quote(gid))
		if err != nil {
			s.dropConn()
			return err
		}
		// The session has no transaction now: the prepared one belongs
		// to no session.
		s.conn.Release()
		s.conn = nil
		return nil
	})
	if err == nil {
		s.recycle(s.sent...)
		s.sent = nil
	}
	return err
}

// Commit implements weir.TwoPhaseCommitter; committing a transaction
// again is a no-op (P2, P4).
func (s *sink[T]) Commit(txn *Txn) error {
	if txn == nil || txn.Rows == 0 || !s.exactlyOnce() {
		return nil
	}
	if s.twoPhase() {
		return s.retry("commit", func(ctx context.Context, _ int) error {
			_, err := s.pool.Exec(ctx, "COMMIT PREPARED "+quote(txn.Name()))
			if code(err) == "42704" {
				// No such prepared transaction: committed before (by
				// an earlier attempt whose answer was lost, or before a
				// restore). Recover never rolls back a transaction a
				// checkpoint lists as pending (P4).
				return nil
			}
			return err
		})
	}
	if txn.Format != formatText && txn.Format != formatBinary {
		return fmt.Errorf("postgres: transaction %s: rows in format %q, which this version does not know (a checkpoint of a later version?)", txn.Name(), txn.Format)
	}
	b := rowBuf{data: txn.Data, ops: txn.Ops, binary: txn.Format == formatBinary}
	err := s.retry("commit", func(ctx context.Context, _ int) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, "INSERT INTO "+s.progress+" (sink, txn) VALUES ($1, $2) ON CONFLICT DO NOTHING", s.id, txn.Name())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return nil // committed before: its rows are there (P3)
			}
			return s.tbl.write(ctx, tx.Conn(), &b, s.o.Batch)
		})
	})
	if err == nil {
		// The checkpoint will not store txn again (it is no longer
		// pending), so its memory can hold the next transaction's rows.
		s.recycle(b)
		txn.Data, txn.Ops = nil, nil
	}
	return err
}

// Recover implements weir.TwoPhaseCommitter. Only two-phase mode leaves
// anything in the server to abort: the prepared transactions of the open
// transaction's subtask numbered from the open one on (those a run that
// restored the same checkpoint and failed again prepared too, since a
// restored run numbers its transactions from the open one's, P4). On a
// fresh start, all of this subtask's.
func (s *sink[T]) Recover(open *Txn, ok bool) error {
	if !s.twoPhase() {
		return nil
	}
	sub, from := s.subtask, int64(0)
	if ok && open != nil {
		sub, from = open.Subtask, open.Seq
		if open.Subtask == s.subtask && open.Seq-1 > s.seq {
			s.seq = open.Seq - 1
		}
	}
	prefix := namePrefix(s.id, sub)
	return s.retry("recover", func(ctx context.Context, _ int) error {
		rows, err := s.pool.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND left(gid, length($1)) = $1", prefix)
		if err != nil {
			return err
		}
		gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, gid := range gids {
			rest := strings.TrimPrefix(gid, prefix)
			seq, err := strconv.ParseInt(strings.SplitN(rest, ":", 2)[0], 10, 64)
			if err != nil || seq < from {
				continue
			}
			s.log.Info("postgres: rolling back a prepared transaction no checkpoint commits", "gid", gid)
			if _, err := s.pool.Exec(ctx, "ROLLBACK PREPARED "+quote(gid)); err != nil && code(err) != "42704" {
				return err
			}
		}
		return nil
	})
}

// Close ends the open server transaction, if any, and the pool.
func (s *sink[T]) Close() error {
	s.dropConn()
	if s.pool != nil {
		s.pool.Close()
	}
	s.cancel()
	return nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (s *sink[T]) errorf(format string, a ...any) error {
	err := fmt.Errorf("postgres: "+format, a...)
	return errors.New(redact(err.Error(), s.o.URL, s.o.Password))
}
