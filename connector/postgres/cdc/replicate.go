package cdc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// txState is the transaction being received.
type txState struct {
	in   bool
	lsn  LSN // commit position (Begin's final LSN)
	time time.Time
	// skip: the whole transaction was emitted before the restored
	// checkpoint; skipN: its first skipN changes were (C6).
	skip  bool
	skipN int
}

// loop receives the replication stream until stop or an error.
func (s *streamer) loop(ctx context.Context) error {
	s.streaming = true
	end := LSN(s.end.Load())
	caught, past := false, false
	var tx txState
	// Ask for a keepalive at once: it says how far the server has sent,
	// which is the catch-up test when nothing is to be sent (C7).
	if err := s.status(true); err != nil {
		return err
	}
	// Receives wait at most until a read deadline on the connection, set
	// once per wakeEvery (a context per receive costs more than decoding
	// a change); stop moves it to the past.
	nc := s.repl.Conn()
	defer context.AfterFunc(ctx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })()
	var deadline time.Time
	caughtUp := func(at LSN) error {
		caught = true
		s.batch = append(s.batch, event{kind: evCaughtUp, lsn: at})
		past = s.o.Bounded
		return s.flush()
	}
	for {
		if err := s.maybeStatus(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return errStopped
		}
		if now := time.Now(); now.After(deadline) {
			deadline = now.Add(wakeEvery)
			nc.SetReadDeadline(deadline)
		}
		msg, err := s.repl.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return errStopped
			}
			var ne net.Error
			if pgconn.Timeout(err) || (errors.As(err, &ne) && ne.Timeout()) {
				// Quiet: hand over what is pending.
				if err := s.flush(); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("cdc: receiving from slot %s: %w", s.o.Slot, err)
		}
		var data []byte
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			data = m.Data
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("cdc: slot %s: %w", s.o.Slot, pgconn.ErrorResponseToPgError(m))
		default:
			continue
		}
		if len(data) == 0 {
			continue
		}
		switch data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
			if err != nil {
				return fmt.Errorf("cdc: slot %s: %w", s.o.Slot, err)
			}
			if pkm.ReplyRequested {
				if err := s.status(false); err != nil {
					return err
				}
			}
			// Everything before the server's sent position has been
			// received (messages arrive in order).
			if !caught && !tx.in && pkm.ServerWALEnd >= end {
				if err := caughtUp(pkm.ServerWALEnd); err != nil {
					return err
				}
			} else if err := s.flush(); err != nil {
				return err
			}
		case pglogrepl.XLogDataByteID:
			if past {
				continue // bounded, and past the end: read only to answer keepalives
			}
			xld, err := pglogrepl.ParseXLogData(data[1:])
			if err != nil {
				return fmt.Errorf("cdc: slot %s: %w", s.o.Slot, err)
			}
			if err := s.message(xld.WALData, &tx, end, &caught, caughtUp); err != nil {
				return err
			}
			if s.o.Bounded && caught {
				past = true
			}
		}
	}
}

// message handles one pgoutput message.
func (s *streamer) message(wal []byte, tx *txState, end LSN, caught *bool, caughtUp func(LSN) error) error {
	lm, err := pglogrepl.Parse(wal)
	if err != nil {
		return fmt.Errorf("cdc: slot %s: decoding a pgoutput message: %w", s.o.Slot, err)
	}
	switch m := lm.(type) {
	case *pglogrepl.RelationMessage:
		s.dec.relation(m)
	case *pglogrepl.BeginMessage:
		if !*caught && m.FinalLSN >= end {
			// Transactions arrive in commit order: every one committed
			// before the end has been received (C7).
			if err := caughtUp(m.FinalLSN); err != nil {
				return err
			}
			if s.o.Bounded {
				return nil
			}
		}
		*tx = txState{in: true, lsn: m.FinalLSN, time: m.CommitTime}
		if r := s.restored; r != nil {
			tx.skip = m.FinalLSN < r.Pos
			if m.FinalLSN == r.TxLSN {
				tx.skipN = r.TxCount
			}
		}
	case *pglogrepl.CommitMessage:
		if !tx.in {
			return nil
		}
		if !tx.skip {
			s.batch = append(s.batch, event{kind: evCommit, lsn: m.TransactionEndLSN})
			// Hand over at once when Poll has nothing (latency), else
			// when the batch is full (throughput).
			if len(s.batch) >= s.o.BatchSize || len(s.batches) == 0 {
				if err := s.flush(); err != nil {
					return err
				}
			}
		}
		*tx = txState{}
	case *pglogrepl.InsertMessage:
		return s.change(tx, OpInsert, m.RelationID, nil, m.Tuple)
	case *pglogrepl.UpdateMessage:
		return s.change(tx, OpUpdate, m.RelationID, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		return s.change(tx, OpDelete, m.RelationID, m.OldTuple, nil)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if err := s.change(tx, OpTruncate, id, nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// change decodes one change into the pending batch, unless it was emitted
// before the restored checkpoint.
func (s *streamer) change(tx *txState, op Op, rel uint32, before, after *pglogrepl.TupleData) error {
	if !tx.in || tx.skip {
		return nil
	}
	if tx.skipN > 0 {
		tx.skipN--
		return nil
	}
	r, err := s.dec.rel(rel)
	if err != nil {
		return err
	}
	c := Change{Op: op, Schema: r.schema, Table: r.table, LSN: tx.lsn, CommitTime: tx.time}
	if c.Before, err = s.dec.tuple(r, before, nil); err != nil {
		return err
	}
	if c.After, err = s.dec.tuple(r, after, &c.Unchanged); err != nil {
		return err
	}
	s.batch = append(s.batch, event{kind: evChange, c: c})
	if len(s.batch) >= s.o.BatchSize {
		return s.flush()
	}
	return nil
}

// status sends a standby status update confirming the position of the
// newest completed checkpoint (C6) as written, flushed and applied.
func (s *streamer) status(reply bool) error {
	pos := LSN(s.confirm.Load())
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos, ReplyRequested: reply})
	if err != nil {
		return fmt.Errorf("cdc: slot %s: standby status update: %w", s.o.Slot, err)
	}
	s.sent = pos
	s.next = time.Now().Add(s.o.StatusInterval)
	return nil
}

// maybeStatus sends a status update when the position to confirm moved or
// the interval has passed.
func (s *streamer) maybeStatus() error {
	if LSN(s.confirm.Load()) != s.sent || !time.Now().Before(s.next) {
		return s.status(false)
	}
	return nil
}
