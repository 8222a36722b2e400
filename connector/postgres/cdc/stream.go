package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// evKind is what an event handed from the streaming goroutine to Poll is.
type evKind uint8

const (
	// evChange carries a change (of the snapshot or the stream).
	evChange evKind = iota
	// evCommit ends a transaction whose end position is lsn.
	evCommit
	// evSnapshotDone follows the snapshot's last row.
	evSnapshotDone
	// evCaughtUp follows the last change before the end position (C7).
	evCaughtUp
	// evStart comes first: the position the stream starts at.
	evStart
)

type event struct {
	kind evKind
	lsn  LSN
	c    Change
}

// wakeEvery bounds how long the streaming goroutine waits for a message
// before it looks at the position to confirm and its pending batch.
const wakeEvery = 100 * time.Millisecond

// streamer is the goroutine that owns the source's two connections: it
// checks the server, creates the slot, copies the snapshot, then streams
// the slot, decoding each change, and hands the events to Poll in batches
// through a bounded channel (C3). It confirms to the server the position
// Poll stores in confirm (C6), and answers the server's keepalives.
//
//	check server (C8) -> create publication/slot if missing (C9)
//	-> [snapshot: copy tables in the exported snapshot] (C5)
//	-> end position: the current WAL insert position (C7)
//	-> START_REPLICATION at the restored position (C6) or the slot's
//	-> loop: receive (with a deadline) -> decode -> batch -> hand over;
//	   status update when due, when asked, or when confirm moved
//
// The goroutine ends when stop is closed or on an error, which it stores
// in err before closing batches.
type streamer struct {
	o        Options
	log      *slog.Logger
	restored *position // nil on a fresh start

	batches chan []event
	ready   chan struct{}
	stop    chan struct{}
	done    chan struct{}
	err     error // set before batches is closed

	// confirm is the position to confirm (C6): stored by Poll's goroutine
	// when a checkpoint completes, read here.
	confirm atomic.Uint64
	// end is the end position once known (0 before).
	end atomic.Uint64

	batch []event
	dec   *decoder
	repl  *pgconn.PgConn
	// streaming is set once START_REPLICATION succeeded; sent is the
	// position the last status update confirmed, next when one is due.
	streaming bool
	sent      LSN
	next      time.Time
}

func newStreamer(o Options, log *slog.Logger, restored *position) *streamer {
	return &streamer{o: o, log: log, restored: restored,
		batches: make(chan []event, o.BufferedBatches), ready: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), dec: newDecoder()}
}

// errStopped ends the goroutine when stop is closed.
var errStopped = errors.New("cdc: stopped")

func (s *streamer) run() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-s.done:
		}
	}()
	err := s.stream(ctx)
	cancel()
	if s.streaming && s.repl != nil {
		// The last position a completed checkpoint covers (C6).
		s.status(false)
	}
	if s.repl != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.repl.Close(cctx)
		ccancel()
	}
	if err == nil || errors.Is(err, errStopped) || (ctx.Err() != nil && isStopped(s.stop)) {
		err = nil
	}
	s.err = err
	close(s.batches)
	s.signal()
}

func isStopped(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (s *streamer) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// replConfig is the replication connection's configuration.
func replConfig(url string) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["replication"] = "database"
	return cfg, nil
}

func (s *streamer) stream(ctx context.Context) error {
	o := s.o
	conn, err := pgx.Connect(ctx, o.URL)
	if err != nil {
		return fmt.Errorf("cdc: connect: %w", err)
	}
	defer conn.Close(context.Background())
	si, err := checkServer(ctx, conn, o, s.log)
	if err != nil {
		return err
	}
	cfg, err := replConfig(o.URL)
	if err != nil {
		return fmt.Errorf("cdc: %w", err)
	}
	s.repl, err = pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("cdc: replication connection: %w", err)
	}
	var start LSN
	snapshot := ""
	switch {
	case s.restored != nil:
		if !si.exists {
			return fmt.Errorf("cdc: restoring at %s, but slot %s does not exist: the changes since the checkpoint are gone; start afresh (without the checkpoint)", s.restored.Pos, o.Slot)
		}
		if si.confirmed > s.restored.Pos {
			return fmt.Errorf("cdc: restoring at %s, but slot %s has confirmed %s already: the changes between are gone from the slot; restore from the newest checkpoint", s.restored.Pos, o.Slot, si.confirmed)
		}
		start = s.restored.Pos
	case o.Snapshot || !si.exists:
		if si.exists {
			// A snapshot is exported only when a slot is created.
			if err := pglogrepl.DropReplicationSlot(ctx, s.repl, o.Slot, pglogrepl.DropReplicationSlotOptions{Wait: true}); err != nil {
				return fmt.Errorf("cdc: dropping slot %s to take a new snapshot: %w", o.Slot, err)
			}
			s.log.Info("cdc: dropped the slot to take a new snapshot")
		}
		action := "NOEXPORT_SNAPSHOT"
		if o.Snapshot {
			action = "EXPORT_SNAPSHOT"
		}
		res, err := pglogrepl.CreateReplicationSlot(ctx, s.repl, o.Slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{SnapshotAction: action, Mode: pglogrepl.LogicalReplication})
		if err != nil {
			return fmt.Errorf("cdc: creating slot %s: %w", o.Slot, err)
		}
		if start, err = pglogrepl.ParseLSN(res.ConsistentPoint); err != nil {
			return fmt.Errorf("cdc: slot %s: consistent point %q: %w", o.Slot, res.ConsistentPoint, err)
		}
		snapshot = res.SnapshotName
		s.log.Info("cdc: created the slot", "consistentPoint", start.String())
	default:
		start = si.confirmed
	}
	s.confirm.Store(uint64(start))
	s.sent = start
	s.batch = append(s.batch, event{kind: evStart, lsn: start})
	if snapshot != "" {
		// The exported snapshot lives until the replication connection's
		// next command: import it before START_REPLICATION (C5).
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("cdc: snapshot: %w", err)
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
			return fmt.Errorf("cdc: importing snapshot %s: %w", snapshot, err)
		}
		if err := s.identify(ctx, conn); err != nil {
			return err
		}
		if err := s.copySnapshot(ctx, tx, start); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("cdc: snapshot: %w", err)
		}
	} else if err := s.identify(ctx, conn); err != nil {
		return err
	}
	conn.Close(ctx)
	args := []string{"proto_version '1'", "publication_names '" + strings.ReplaceAll(pgx.Identifier{o.Publication}.Sanitize(), "'", "''") + "'"}
	if err := s.startReplication(ctx, cfg, start, args); err != nil {
		return err
	}
	s.log.Info("cdc: streaming", "publication", o.Publication, "from", start.String(), "end", LSN(s.end.Load()).String())
	return s.loop(ctx)
}

// slotBusyFor bounds how long the source waits for its slot to be
// released by another connection: the WAL sender of a process that was
// killed holds it until it notices the closed connection.
const slotBusyFor = 30 * time.Second

// startReplication starts streaming, waiting while the slot is active
// for another connection (SQLSTATE 55006), with a new connection for each
// try (a failed START_REPLICATION leaves the protocol mid-way).
func (s *streamer) startReplication(ctx context.Context, cfg *pgconn.Config, start LSN, args []string) error {
	give := time.Now().Add(slotBusyFor)
	for {
		err := pglogrepl.StartReplication(ctx, s.repl, s.o.Slot, start, pglogrepl.StartReplicationOptions{PluginArgs: args})
		if err == nil {
			return nil
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55006" || time.Now().After(give) {
			return fmt.Errorf("cdc: START_REPLICATION on slot %s at %s: %w", s.o.Slot, start, err)
		}
		s.log.Info("cdc: the slot is in use by another connection; waiting", "error", pe.Message)
		s.repl.Close(ctx)
		s.repl = nil
		select {
		case <-time.After(200 * time.Millisecond):
		case <-s.stop:
			return errStopped
		}
		if s.repl, err = pgconn.ConnectConfig(ctx, cfg); err != nil {
			return fmt.Errorf("cdc: replication connection: %w", err)
		}
	}
}

// identify reads the end position (C7): the end of the last WAL record
// written. Not IDENTIFY_SYSTEM's flush position: under synchronous_commit
// = off a transaction is visible before its commit record is flushed, and
// a bounded run would leave out transactions committed before it started.
func (s *streamer) identify(ctx context.Context, conn *pgx.Conn) error {
	var end LSN
	err := conn.QueryRow(ctx, "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END").Scan(&end)
	if err != nil {
		return fmt.Errorf("cdc: reading the WAL position: %w", err)
	}
	s.end.Store(uint64(end))
	return nil
}

// copySnapshot emits every row of the published tables, as of the
// snapshot tx runs in, as OpRead changes at lsn.
func (s *streamer) copySnapshot(ctx context.Context, tx pgx.Tx, lsn LSN) error {
	var at time.Time
	if err := tx.QueryRow(ctx, "SELECT now()").Scan(&at); err != nil {
		return fmt.Errorf("cdc: snapshot: %w", err)
	}
	tables, err := publishedTables(ctx, tx, s.o.Publication)
	if err != nil {
		return fmt.Errorf("cdc: snapshot: listing the tables of publication %s: %w", s.o.Publication, err)
	}
	for _, t := range tables {
		rows, err := tx.Query(ctx, "SELECT * FROM "+pgx.Identifier{t[0], t[1]}.Sanitize())
		if err != nil {
			return fmt.Errorf("cdc: snapshot of %s.%s: %w", t[0], t[1], err)
		}
		fields := rows.FieldDescriptions()
		n := 0
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return fmt.Errorf("cdc: snapshot of %s.%s: %w", t[0], t[1], err)
			}
			after := make(map[string]any, len(vals))
			for i, v := range vals {
				after[fields[i].Name] = v
			}
			s.batch = append(s.batch, event{kind: evChange, c: Change{Op: OpRead, Schema: t[0], Table: t[1], LSN: lsn, CommitTime: at, After: after}})
			n++
			if len(s.batch) >= s.o.BatchSize {
				if err := s.flush(); err != nil {
					rows.Close()
					return err
				}
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("cdc: snapshot of %s.%s: %w", t[0], t[1], err)
		}
		s.log.Info("cdc: snapshot of a table copied", "table", t[0]+"."+t[1], "rows", n)
	}
	s.batch = append(s.batch, event{kind: evSnapshotDone})
	return s.flush()
}

// flush hands the pending batch to Poll, waiting while the buffer is
// full (back-pressure, C3) but keeping the status updates going.
func (s *streamer) flush() error {
	if len(s.batch) == 0 {
		return nil
	}
	select {
	case s.batches <- s.batch:
		s.handedOver()
		return nil
	default:
	}
	t := time.NewTicker(wakeEvery)
	defer t.Stop()
	for {
		select {
		case s.batches <- s.batch:
			s.handedOver()
			return nil
		case <-s.stop:
			return errStopped
		case <-t.C:
			if s.streaming {
				if err := s.maybeStatus(); err != nil {
					return err
				}
			}
		}
	}
}

func (s *streamer) handedOver() {
	s.batch = make([]event, 0, s.o.BatchSize)
	s.signal()
}
