package ordering

import (
	"cmp"
	"slices"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// storedHeld holds Sort's records in keyed state and timers when the job
// chose the Pebble state backend (runtime.StateBackendConfig), so that a
// catch-up holding more records than memory fits runs: a list per (key,
// timestamp) in the backend's database, with an event-time timer each in
// the same database (timer.NewServiceInStore), the form Sort's snapshots
// have always had (S4), so snapshots are the keyed operators' own
// (weir.SnapshotKeyed: native checkpoints, canonical savepoints that
// restore into either mode). A watermark fires the timers in timestamp
// order; each releases its (key, timestamp)'s records sorted by tiebreak,
// then arrival (the list's order), which keeps S1 and S2 per key. Across
// keys, records with equal timestamps come out in the order their (key,
// timestamp) was first held rather than by tiebreak (S1 and S2 are per
// key). The in-memory queue (held.go) stays the path of the memory
// backend: this one costs a state and a timer access per record.
type storedHeld[K comparable, T any] struct {
	o       *sortOp[K, T]
	backend *state.Backend[K]
	held    *state.NamespacedListState[K, int64, T]
	timers  *timer.Service[K, struct{}]
	n       int // records held
	fire    func(timer.Timer[K, struct{}])
	batch   []heldRec[T]
}

// openStored opens the Pebble backend, its state and timers, and restores
// them.
func (o *sortOp[K, T]) openStored(ctx *runtime.Context) error {
	b, err := state.Open[K](ctx.StateOptions(), ctx.KeyGroups)
	if err != nil {
		return err
	}
	held, err := state.NamespacedListWithCodecs[K, int64, T](b, heldState, state.DefaultCodec[int64](), o.codec)
	if err != nil {
		b.Close()
		return err
	}
	s := &storedHeld[K, T]{o: o, backend: b, held: held, timers: weir.NewTimerService[K, struct{}](b, nil, nil)}
	s.fire = s.release
	o.st = s
	if err := weir.RestoreKeyed(ctx, b, s.timers, nil); err != nil {
		return err
	}
	for kg := ctx.KeyGroups.Start; kg <= ctx.KeyGroups.End; kg++ {
		state.ForEachNamespacedList(held, kg, func(_ K, _ int64, vs []T) { s.n += len(vs) })
	}
	o.holding.Set(int64(s.n))
	return nil
}

func (s *storedHeld[K, T]) push(ts int64, v T) {
	k := s.o.key(v)
	kg := keygroup.Assign(s.o.hash(k), s.o.maxP)
	s.backend.SetCurrentKey(k, kg)
	s.held.Add(ts, v)
	s.timers.RegisterEventTimeTimer(k, kg, struct{}{}, ts)
	s.n++
}

// advance releases the records up to wm and returns how many.
func (s *storedHeld[K, T]) advance(wm int64) (int, error) {
	before := s.n
	s.timers.AdvanceWatermark(wm, s.fire)
	return before - s.n, nil
}

// release emits the records of the timer's (key, timestamp) in tiebreak,
// then arrival, order and drops them.
func (s *storedHeld[K, T]) release(t timer.Timer[K, struct{}]) {
	s.backend.SetCurrentKey(t.Key, t.KeyGroup)
	vs := s.held.Get(t.Timestamp)
	s.held.Clear(t.Timestamp)
	s.n -= len(vs)
	recs := s.batch[:0]
	for i, v := range vs {
		h := heldRec[T]{ts: t.Timestamp, seq: uint64(i), v: v}
		if tb := s.o.opts.Tiebreak; tb != nil {
			h.t1, h.t2 = tb(v)
		}
		recs = append(recs, h)
	}
	slices.SortFunc(recs, func(a, b heldRec[T]) int {
		return cmp.Or(cmp.Compare(a.t1, b.t1), cmp.Compare(a.t2, b.t2), cmp.Compare(a.seq, b.seq))
	})
	for i := range recs {
		s.o.emitHeld(&recs[i])
	}
	clear(recs)
	s.batch = recs[:0]
}

func (s *storedHeld[K, T]) snapshot(w *runtime.SnapshotWriter) error {
	return weir.SnapshotKeyed(w, s.o.Ctx, s.backend, s.timers)
}

func (s *storedHeld[K, T]) close() error { return s.backend.Close() }
