package nexmark

import (
	"cmp"
	"slices"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/window"
)

// q11Session is one open session of a bidder: Count bids, window [Start,
// End), as window.Session(Q11Gap) makes it (a bid at t opens [t, t+gap);
// sessions that intersect or touch merge into their cover).
type q11Session struct{ Start, End, Count int64 }

func (s q11Session) intersects(o q11Session) bool { return s.Start <= o.End && s.End >= o.Start }

func (s q11Session) merge(o q11Session) q11Session {
	return q11Session{Start: min(s.Start, o.Start), End: max(s.End, o.End), Count: s.Count + o.Count}
}

// q11Open is a bidder's open sessions: First (Count 0: none), then More,
// which is never changed in place (a copy-on-write snapshot of the state
// may still read it; state I10), only replaced.
type q11Open struct {
	First q11Session
	More  []q11Session
}

// q11Sessions is q11's keyed stage: window.Session(Q11Gap) with a count,
// written out as a keyed process function to spare the session window's
// per-record work that the count does not need. A bid that extends a
// bidder's only session (every bid but a bidder's first, at Nexmark's
// rates) costs one state read and one write; the window operator also
// merged the window into a new one per bid: a state read and write of the
// merging set, the contents' namespace merged, the old window's two
// timers deleted and the new one's registered (q11 was 2.1-2.3x its
// hand-written query's CPU).
//
// Timers are lazy: each open session has an event-time timer at or before
// its MaxTimestamp (End - 1), registered when the session opens; a merge
// keeps the merged sessions' timers, which come no later than the cover's
// end. A timer emits every session of the key with End - 1 <= the
// watermark, stamped End - 1 (as the window's result is), and registers
// one at the earliest End - 1 left. So results, their timestamps and the
// watermark they precede are the window's (window I2, I6); a bid that
// merges with no session and whose window [t, t+gap) has ended by the
// watermark is late, dropped and counted as the window counts it (I3,
// I4). State and timers are the keyed operator's, checkpointed as such;
// the operator is named q11-session-count, not q11-sessions as the window
// was, so a savepoint of the window version is not read as this state.
func q11Sessions(keyed weir.KeyedStream[int64, Bid]) weir.Stream[Q11Out] {
	gap := Q11Gap.Milliseconds()
	return weir.Process(keyed, "q11-session-count", func() weir.KeyedProcessFunction[int64, Bid, Q11Out] {
		var open *state.ValueState[int64, q11Open]
		var late *runtime.Counter
		var scratch []q11Session
		return weir.ProcessFuncs[int64, Bid, Q11Out]{
			OpenFn: func(ctx *weir.KeyedContext[int64, Q11Out]) error {
				open = state.MustValue[int64, q11Open](ctx.State(), "sessions")
				late = ctx.Runtime().Counter(window.CounterLateDropped)
				return nil
			},
			ElementFn: func(_ Bid, ctx *weir.KeyedContext[int64, Q11Out]) error {
				t := ctx.Timestamp()
				nw := q11Session{Start: t, End: t + gap, Count: 1}
				o, _ := open.Value()
				if o.First.Count > 0 && len(o.More) == 0 && o.First.intersects(nw) {
					o.First = o.First.merge(nw)
					open.Update(o)
					return nil
				}
				cover, merged := nw, 0
				scratch = scratch[:0]
				for _, s := range o.all() {
					if s.intersects(nw) {
						cover = cover.merge(s)
						merged++
					} else {
						scratch = append(scratch, s)
					}
				}
				if merged == 0 {
					if nw.End-1 <= ctx.CurrentWatermark() {
						late.Inc()
						return nil
					}
					ctx.RegisterEventTimeTimer(nw.End - 1)
				}
				scratch = append(scratch, cover)
				open.Update(q11OpenOf(scratch))
				return nil
			},
			TimerFn: func(_ int64, ctx *weir.KeyedContext[int64, Q11Out]) error {
				o, ok := open.Value()
				if !ok {
					return nil
				}
				wm := ctx.CurrentWatermark()
				scratch = append(scratch[:0], o.all()...)
				slices.SortFunc(scratch, func(a, b q11Session) int { return cmp.Compare(a.End, b.End) })
				i := 0
				for ; i < len(scratch) && scratch[i].End-1 <= wm; i++ {
					s := scratch[i]
					ctx.CollectAt(Q11Out{Bidder: ctx.Key(), Count: s.Count, Start: s.Start, End: s.End}, s.End-1)
				}
				if i == len(scratch) {
					open.Clear()
					return nil
				}
				open.Update(q11OpenOf(scratch[i:]))
				ctx.RegisterEventTimeTimer(scratch[i].End - 1)
				return nil
			},
		}
	})
}

// all returns o's sessions (a new slice when there are several).
func (o q11Open) all() []q11Session {
	if o.First.Count == 0 {
		return nil
	}
	if len(o.More) == 0 {
		return []q11Session{o.First}
	}
	return append([]q11Session{o.First}, o.More...)
}

// q11OpenOf returns the open sessions ss (not empty) as a q11Open, copying
// what it keeps of ss.
func q11OpenOf(ss []q11Session) q11Open {
	o := q11Open{First: ss[0]}
	if len(ss) > 1 {
		o.More = slices.Clone(ss[1:])
	}
	return o
}
