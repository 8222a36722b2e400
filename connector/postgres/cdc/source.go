package cdc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir/runtime"
)

// Source reads the changes of a publication through a logical replication
// slot. Use it with weir.FromSource; the package documentation has the
// guarantees.
type Source[T any] struct {
	o       Options
	err     error
	convert func(*Change) T
	// caughtUp is set once the owning reader has read up to the end
	// position (C7).
	caughtUp atomic.Bool
}

// NewSource returns a source of Changes. Options are checked by Validate
// and again when the job starts.
func NewSource(o Options) *Source[Change] {
	return NewSourceOf(o, func(c *Change) Change { return *c })
}

// NewSourceOf returns a source that emits convert(change) for every
// change. convert runs on the source's subtask goroutine; the Change and
// its maps are its to keep.
func NewSourceOf[T any](o Options, convert func(*Change) T) *Source[T] {
	s := &Source[T]{o: o.withDefaults(), err: o.Validate(), convert: convert}
	if convert == nil && s.err == nil {
		s.err = fmt.Errorf("cdc: NewSourceOf: convert is nil")
	}
	return s
}

// Validate reports what is wrong with the options.
func (s *Source[T]) Validate() error { return s.err }

// CaughtUp reports whether the source has read every change committed
// before it started (C7), in this process.
func (s *Source[T]) CaughtUp() bool { return s.caughtUp.Load() }

// Check connects to the server and runs the start-up checks of C8 (and
// creates the publication if missing, C9), so that a job can refuse to
// start with one line naming the setting to change.
func (s *Source[T]) Check(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	conn, err := pgx.Connect(ctx, s.o.URL)
	if err != nil {
		return fmt.Errorf("cdc: connect: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = checkServer(ctx, conn, s.o, slog.New(slog.DiscardHandler))
	return err
}

// position is the source's split state (C6): Pos is the end of the last
// transaction emitted whole; TxLSN and TxCount say how many changes of the
// transaction committed at TxLSN were emitted after it (a checkpoint
// between two Polls may fall inside a transaction).
type position struct {
	Slot    string `json:"slot"`
	Pos     LSN    `json:"pos"`
	TxLSN   LSN    `json:"txLSN,omitempty"`
	TxCount int    `json:"txCount,omitempty"`
}

// CreateReader implements runtime.Source: the reader of the subtask that
// owns the slot's split (subtask 0 on a fresh start; on a restore the one
// the split's state was given to) streams; the others have nothing to read
// (C2).
func (s *Source[T]) CreateReader(ctx runtime.SourceContext) (runtime.Reader[T], error) {
	if s.err != nil {
		return nil, s.err
	}
	log := ctx.Logger
	if log == nil {
		log = slog.Default()
	}
	r := &reader[T]{src: s, log: log.With("source", ctx.Name, "slot", s.o.Slot), pending: map[int64]LSN{}}
	if ctx.Restored != nil {
		items, err := ctx.Restored.List(runtime.SplitsList)
		if err != nil {
			return nil, err
		}
		switch len(items) {
		case 0:
			return r, nil
		case 1:
		default:
			return nil, fmt.Errorf("cdc: %d split states restored into one subtask; the source has one split", len(items))
		}
		var p position
		if err := json.Unmarshal(items[0], &p); err != nil {
			return nil, fmt.Errorf("cdc: restoring the position %q: %w", items[0], err)
		}
		if p.Slot != s.o.Slot {
			return nil, fmt.Errorf("cdc: the checkpoint holds a position of slot %s, the source reads slot %s; restore with the same slot", p.Slot, s.o.Slot)
		}
		r.owner, r.pos, r.txLSN, r.txCount = true, p.Pos, p.TxLSN, p.TxCount
		r.restored = &p
		return r, nil
	}
	if ctx.Subtask == 0 {
		r.owner = true
		r.starting = true
	}
	return r, nil
}

// reader is one source subtask. All of its fields are owned by the
// subtask goroutine; it talks to its streamer only through the batches
// channel (in) and streamer.confirm (out).
type reader[T any] struct {
	src      *Source[T]
	log      *slog.Logger
	owner    bool
	restored *position
	st       *streamer

	cur  []event // the batch being emitted
	next int     // index in cur of the next event

	pos     LSN // end of the last transaction emitted whole
	txLSN   LSN // commit position of the transaction being emitted
	txCount int // its changes emitted
	// starting: a fresh start whose position is not known yet, or whose
	// snapshot is being copied (C5).
	starting bool
	caughtUp bool
	idle     bool
	finished bool
	// pending maps the checkpoints taken and not yet completed to the
	// position each covers.
	pending map[int64]LSN
	emitted int64
}

// Poll implements runtime.Reader.
func (r *reader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if !r.owner || r.finished {
		if r.src.o.Bounded {
			return runtime.Done, nil
		}
		return runtime.Wait, nil
	}
	if r.st == nil {
		r.st = newStreamer(r.src.o, r.log, r.restored)
		go r.st.run()
		out.AddSplit(0)
	}
	for n := 0; n < r.src.o.BatchSize; {
		if r.next >= len(r.cur) {
			select {
			case b, ok := <-r.st.batches:
				if !ok {
					if r.st.err != nil {
						return 0, r.st.err
					}
					return runtime.Wait, nil // stopped
				}
				r.cur, r.next = b, 0
			default:
				if r.caughtUp && !r.idle {
					// Quiet after the catch-up: the split leaves the
					// watermark minimum until its next change (C7).
					r.idle = true
					out.SetSplitIdle(0, true)
				}
				return runtime.Wait, nil
			}
		}
		ev := &r.cur[r.next]
		r.next++
		switch ev.kind {
		case evChange:
			if r.idle {
				r.idle = false
				out.SetSplitIdle(0, false)
			}
			c := &ev.c
			if c.Op != OpRead && c.LSN != r.txLSN {
				r.txLSN, r.txCount = c.LSN, 0
			}
			r.txCount++
			out.Collect(0, r.src.convert(c), c.CommitTime.UnixMilli())
			*c = Change{} // the batch no longer holds the maps
			r.emitted++
			n++
		case evCommit:
			r.pos, r.txLSN, r.txCount = ev.lsn, 0, 0
		case evStart:
			if r.restored == nil {
				r.pos = ev.lsn
				r.starting = r.src.o.Snapshot
			}
		case evSnapshotDone:
			r.starting, r.txLSN, r.txCount = false, 0, 0
			r.log.Info("cdc: snapshot done", "rows", r.emitted)
		case evCaughtUp:
			r.caughtUp = true
			r.src.caughtUp.Store(true)
			r.log.Info("cdc: caught up with the position the server reported at start",
				"end", LSN(r.st.end.Load()).String(), "reached", ev.lsn.String(), "changes", r.emitted)
			if r.src.o.Bounded {
				r.finished = true
				out.FinishSplit(0)
				return runtime.Done, nil
			}
		}
	}
	return runtime.More, nil
}

// Ready implements runtime.Reader.
func (r *reader[T]) Ready() <-chan struct{} {
	if r.st == nil {
		return nil
	}
	return r.st.ready
}

// SnapshotSplits implements runtime.SplitSnapshotter (C6). A checkpoint
// during the initial snapshot is declined: the exported snapshot dies
// with the connection, so a restore could not go on with it (C5).
func (r *reader[T]) SnapshotSplits(id int64) ([][]byte, error) {
	if !r.owner {
		return nil, nil
	}
	if r.starting {
		return nil, fmt.Errorf("cdc: slot %s: the slot is being set up or the initial snapshot copied; a checkpoint cannot cover part of it (checkpoints are taken once the stream starts)", r.src.o.Slot)
	}
	b, err := json.Marshal(position{Slot: r.src.o.Slot, Pos: r.pos, TxLSN: r.txLSN, TxCount: r.txCount})
	if err != nil {
		return nil, err
	}
	r.pending[id] = r.pos
	return [][]byte{b}, nil
}

// NotifyCheckpointComplete implements runtime.CheckpointListener: the
// position the checkpoint covers is confirmed to the server (C6).
func (r *reader[T]) NotifyCheckpointComplete(id int64) error {
	pos, ok := r.pending[id]
	for k := range r.pending {
		if k <= id {
			delete(r.pending, k)
		}
	}
	if ok && r.st != nil && uint64(pos) > r.st.confirm.Load() {
		r.st.confirm.Store(uint64(pos))
	}
	return nil
}

// NotifyCheckpointAborted implements runtime.CheckpointListener.
func (r *reader[T]) NotifyCheckpointAborted(id int64) { delete(r.pending, id) }

// Close implements runtime.Reader: it stops the streaming goroutine, which
// sends a last status update with the confirmed position first.
func (r *reader[T]) Close() error {
	if r.st == nil {
		return nil
	}
	close(r.st.stop)
	<-r.st.done
	return nil
}
