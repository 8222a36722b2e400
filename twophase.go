package weir

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/runtime"
)

// TwoPhaseCommitter is a sink that writes in transactions and commits
// them only when the checkpoint covering them completes, which makes its
// output exactly-once (Flink's TwoPhaseCommitSinkFunction). TXN describes
// one transaction; it is stored in checkpoints as JSON, so it must survive
// a JSON round trip (exported fields).
//
// Lifecycle, all on the sink subtask's goroutine:
//
//	Begin opens a transaction; Write adds records to it.
//	At a checkpoint barrier: PreCommit (flush everything durable: after it
//	    returns, Commit must be able to succeed, even in another process),
//	    then a new transaction begins.
//	When that checkpoint completes: Commit.
//	When a later checkpoint completes: Release, if the sink is a
//	    TransactionReleaser.
//	After a restore: Commit again for every transaction the checkpoint had
//	    pre-committed (so Commit must be idempotent), then Recover with the
//	    transactions that may be lingering (the open one at the checkpoint)
//	    so the sink can abort them and anything newer.
//	At the end of bounded input: PreCommit and Commit of the open
//	    transaction (there will be no further checkpoint).
//	On failure or cancellation the open transaction is left for Recover.
//	A PreCommit that fails fails the task at once: its transaction is never
//	    written to, pre-committed or committed again, and the restart's
//	    Recover aborts it.
type TwoPhaseCommitter[T, TXN any] interface {
	Begin() (TXN, error)
	Write(txn TXN, r Record[T]) error
	PreCommit(txn TXN) error
	Commit(txn TXN) error
	// Recover aborts lingering transactions: open is the transaction
	// that was open when the restored checkpoint was taken (ok false on a
	// fresh start); the sink should abort it and anything it began later.
	Recover(open TXN, ok bool) error
}

// TransactionReleaser is implemented by a TwoPhaseCommitter that reuses
// what a committed transaction held (ExactlyOnceSink: its Kafka
// transactional id and producer). Release(txn) is called on the subtask's
// goroutine, once per committed transaction, as soon as a checkpoint or
// savepoint taken after the last one that listed txn as pending has
// completed: from then on only checkpoints older than the latest completed
// one still list it, so a restore from the latest completed checkpoint never
// commits txn again. Before Release the sink must not reuse txn's
// resources, since a restore would then commit (by Commit) whatever they
// are doing at the time. Transactions committed at the end of bounded input
// are never released.
type TransactionReleaser[TXN any] interface {
	Release(txn TXN) error
}

// ErrRejected marks an error of Write caused by the record, not by the
// sink or its destination: a value the destination cannot hold (text in a
// numeric column, a required field missing). A Write that returns it must
// leave the transaction as it was, without the record. Sinks wrap it
// (fmt.Errorf("%w: ...", weir.ErrRejected)); with a rejects tag
// (TwoPhaseCommitRejecting) the record goes to that side output with the
// reason and the job goes on, otherwise the job fails as on any other
// error of Write.
var ErrRejected = errors.New("record rejected by the sink")

// CounterRejected is the counter of a two-phase sink operator's rejected
// records (weir_rejected).
const CounterRejected = "rejected"

// Rejected is a record a sink rejected (ErrRejected), with the reason: the
// side output of TwoPhaseCommitRejecting, with the record's timestamp.
type Rejected[T any] struct {
	Value  T
	Reason string
}

// TwoPhaseCommit ends s in a two-phase-commit sink; newSink is called once
// per subtask, when the subtask opens.
func TwoPhaseCommit[T, TXN any](s Stream[T], name string, newSink func(ctx *runtime.Context) (TwoPhaseCommitter[T, TXN], error)) Stream[struct{}] {
	return TwoPhaseCommitChecked(s, name, nil, newSink)
}

// TwoPhaseCommitChecked is TwoPhaseCommit with a check of the sink's
// options: validate (if not nil) runs when the job is built, before any
// task runs (runtime.Validator), so that bad options fail Start instead of
// the first subtask to open.
func TwoPhaseCommitChecked[T, TXN any](s Stream[T], name string, validate func() error, newSink func(ctx *runtime.Context) (TwoPhaseCommitter[T, TXN], error)) Stream[struct{}] {
	return TwoPhaseCommitRejecting(s, name, validate, newSink, nil)
}

// TwoPhaseCommitRejecting is TwoPhaseCommitChecked whose sink's rejected
// records (a Write error wrapping ErrRejected) go to the side output
// rejects (read it with SideOutput on the returned stream) and are counted
// (CounterRejected), instead of
// failing the job. A nil rejects is TwoPhaseCommitChecked.
func TwoPhaseCommitRejecting[T, TXN any](s Stream[T], name string, validate func() error, newSink func(ctx *runtime.Context) (TwoPhaseCommitter[T, TXN], error), rejects *OutputTag[Rejected[T]]) Stream[struct{}] {
	return Transform(s, name, func() runtime.OneInputOperator[T, struct{}] {
		return &twoPhaseOp[T, TXN]{newSink: newSink, validate: validate, rejectsTag: rejects}
	})
}

// Validate implements runtime.Validator.
func (o *twoPhaseOp[T, TXN]) Validate() error {
	if o.validate == nil {
		return nil
	}
	return o.validate()
}

type pendingTxn[TXN any] struct {
	Checkpoint int64 `json:"checkpoint"`
	Txn        TXN   `json:"txn"`
	// listed is the latest checkpoint whose snapshot lists the
	// transaction as pending (not stored).
	listed int64
}

// twoPhaseOp keeps the open transaction and the pre-committed ones waiting
// for their checkpoint to complete, and, for a TransactionReleaser, the
// committed ones that a restorable checkpoint still lists.
type twoPhaseOp[T, TXN any] struct {
	runtime.Base[struct{}]
	newSink   func(*runtime.Context) (TwoPhaseCommitter[T, TXN], error)
	validate  func() error
	sink      TwoPhaseCommitter[T, TXN]
	releaser  TransactionReleaser[TXN] // nil if the sink is none
	open      TXN
	pending   []pendingTxn[TXN]
	committed []pendingTxn[TXN] // committed, not yet released
	// broken is the error of a PreCommit that failed: the open
	// transaction is then in a state the operator cannot know (a file
	// sink may have closed its file, a Kafka sink half flushed), so it is
	// never written to, pre-committed or committed again: the task fails
	// at once (a declined checkpoint alone would let the job go on), and
	// the restart's Recover aborts the transaction. (Carrying on with it lost records:
	// the file sink re-created the closed file empty at the next Write.)
	broken error

	// rejectsTag, if not nil, receives the records Write rejects
	// (rejects, counted by rejected); only the failure path touches them.
	rejectsTag *OutputTag[Rejected[T]]
	rejects    runtime.Output[Rejected[T]]
	rejected   *runtime.Counter
}

const (
	listPending = "2pc-pending"
	listOpen    = "2pc-open"
)

func (o *twoPhaseOp[T, TXN]) Open(ctx *runtime.Context, out runtime.Output[struct{}]) error {
	o.Base.Open(ctx, out)
	sink, err := o.newSink(ctx)
	if err != nil {
		return err
	}
	o.sink = sink
	o.releaser, _ = sink.(TransactionReleaser[TXN])
	if o.rejectsTag != nil {
		o.rejects = runtime.SideOutput(ctx, o.rejectsTag)
		o.rejected = ctx.Counter(CounterRejected)
	}
	if r := ctx.Restored(); r != nil {
		items, err := r.List(listPending)
		if err != nil {
			return err
		}
		for _, it := range items {
			var p pendingTxn[TXN]
			if err := json.Unmarshal(it, &p); err != nil {
				return fmt.Errorf("weir: restore pending transaction: %w", err)
			}
			if mutant.On(mutant.SinkSkipRecoverCommit) {
				continue
			}
			if err := sink.Commit(p.Txn); err != nil {
				return fmt.Errorf("weir: commit restored transaction of checkpoint %d: %w", p.Checkpoint, err)
			}
			if o.releaser != nil {
				// The restored checkpoint lists it: a restore may
				// commit it again until a checkpoint of this run
				// completes.
				p.listed = r.CheckpointID
				o.committed = append(o.committed, p)
			}
		}
		opens, err := r.List(listOpen)
		if err != nil {
			return err
		}
		for _, it := range opens {
			// A fresh value for each: decoding into the previous one
			// (a pointer TXN) would keep its fields absent here.
			var open TXN
			if err := json.Unmarshal(it, &open); err != nil {
				return fmt.Errorf("weir: restore open transaction: %w", err)
			}
			if err := sink.Recover(open, true); err != nil {
				return err
			}
		}
		if len(opens) == 0 {
			var zero TXN
			if err := sink.Recover(zero, false); err != nil {
				return err
			}
		}
	} else {
		var zero TXN
		if err := sink.Recover(zero, false); err != nil {
			return err
		}
	}
	o.open, err = sink.Begin()
	return err
}

func (o *twoPhaseOp[T, TXN]) ProcessRecord(r Record[T]) error {
	if o.broken != nil {
		return o.broken
	}
	if err := o.sink.Write(o.open, r); err != nil {
		if o.rejects == nil || !errors.Is(err, ErrRejected) {
			return err
		}
		o.rejected.Inc()
		o.rejects.Collect(Record[Rejected[T]]{Value: Rejected[T]{Value: r.Value, Reason: err.Error()}, Timestamp: r.Timestamp})
		return nil
	}
	killpoint.Hit("sink.after-write")
	return nil
}

func (o *twoPhaseOp[T, TXN]) SnapshotState(w *runtime.SnapshotWriter) error {
	if o.broken != nil {
		return o.broken
	}
	if err := o.sink.PreCommit(o.open); err != nil {
		o.broken = fmt.Errorf("weir: pre-commit of checkpoint %d failed, the open transaction is unusable: %w", w.CheckpointID(), err)
		o.Ctx.Fail(o.broken)
		return err
	}
	if mutant.On(mutant.SinkCommitBeforeCheckpoint) {
		if err := o.sink.Commit(o.open); err != nil {
			return err
		}
	}
	o.pending = append(o.pending, pendingTxn[TXN]{Checkpoint: w.CheckpointID(), Txn: o.open})
	for i := range o.pending {
		o.pending[i].listed = w.CheckpointID()
	}
	next, err := o.sink.Begin()
	if err != nil {
		// o.open is pre-committed now: the next Write would fail with
		// "not open" and hide this cause.
		o.broken = fmt.Errorf("weir: begin of the transaction after checkpoint %d failed: %w", w.CheckpointID(), err)
		o.Ctx.Fail(o.broken)
		return err
	}
	o.open = next
	items := make([][]byte, 0, len(o.pending))
	for _, p := range o.pending {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		items = append(items, b)
	}
	w.List(listPending, checkpoint.EvenSplit, items)
	b, err := json.Marshal(o.open)
	if err != nil {
		return err
	}
	w.List(listOpen, checkpoint.EvenSplit, [][]byte{b})
	return nil
}

func (o *twoPhaseOp[T, TXN]) NotifyCheckpointComplete(id int64) error {
	// Checkpoint id is now the latest completed one; a committed
	// transaction it does not list is never committed again by a
	// restore from it (nor from a later one).
	kept := o.committed[:0]
	for _, p := range o.committed {
		if p.listed >= id {
			kept = append(kept, p)
			continue
		}
		if err := o.releaser.Release(p.Txn); err != nil {
			return err
		}
	}
	clear(o.committed[len(kept):])
	o.committed = kept
	sort.Slice(o.pending, func(i, j int) bool { return o.pending[i].Checkpoint < o.pending[j].Checkpoint })
	n := 0
	for _, p := range o.pending {
		if p.Checkpoint > id {
			break
		}
		if err := o.sink.Commit(p.Txn); err != nil {
			return err
		}
		if o.releaser != nil {
			o.committed = append(o.committed, p)
		}
		n++
	}
	o.pending = o.pending[n:]
	return nil
}

func (o *twoPhaseOp[T, TXN]) NotifyCheckpointAborted(int64) {}

func (o *twoPhaseOp[T, TXN]) EndInput() error {
	// Bounded input: nothing will be replayed, so commit everything now.
	if o.broken != nil {
		return o.broken
	}
	if err := o.sink.PreCommit(o.open); err != nil {
		return err
	}
	for _, p := range o.pending {
		if err := o.sink.Commit(p.Txn); err != nil {
			return err
		}
	}
	o.pending = nil
	if err := o.sink.Commit(o.open); err != nil {
		return err
	}
	var zero TXN
	o.open = zero
	return nil
}

func (o *twoPhaseOp[T, TXN]) Close() error {
	if c, ok := o.sink.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
