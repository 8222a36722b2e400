package sim

import (
	"fmt"
	"math"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/weirtest"
)

// The timer branch (Spec.Timers): a KeyedProcessFunction that, for every
// record, adds it to a keyed map entry at t = timestamp + Spec.TimerDelayMS
// and registers an event-time timer at t; the timer emits the entry (the
// records registered for t since its last firing) at t and removes it. A
// registration at or behind the watermark fires at the next watermark
// that rises (timer/doc.go 3), so a late record gets a line of its own.

// timerLine is a timer's firing: its key, timestamp, and the count and
// sum of ids of the records that registered it.
func timerLine(key string, t, n, sum int64) string {
	return fmt.Sprintf("T %s t=%d n=%d sum=%d", key, t, n, sum)
}

type timerFn struct {
	delay   int64
	pending *state.MapState[string, int64, acc]
}

func (f *timerFn) Open(ctx *weir.KeyedContext[string, string]) error {
	m, err := state.Map[string, int64, acc](ctx.State(), "pending")
	f.pending = m
	return err
}

func (f *timerFn) ProcessElement(e event, ctx *weir.KeyedContext[string, string]) error {
	t := ctx.Timestamp() + f.delay
	a, _ := f.pending.Get(t)
	f.pending.Put(t, acc{N: a.N + 1, Sum: a.Sum + e.ID})
	ctx.RegisterEventTimeTimer(t)
	return nil
}

func (f *timerFn) OnTimer(t int64, ctx *weir.KeyedContext[string, string]) error {
	// A timer with no entry fired twice (or for nothing): n=0, a line the
	// reference never has.
	a, _ := f.pending.Get(t)
	f.pending.Remove(t)
	ctx.CollectAt(timerLine(ctx.Key(), t, a.N, a.Sum), t)
	return nil
}

// timerBranch adds the timer branch behind passed and returns its lines;
// obs is set to its observer (S8).
func timerBranch(spec *Spec, passed weir.Stream[event], obs **weirtest.Observation[string]) weir.Stream[string] {
	fired := weir.Process(weir.KeyBy(passed, func(e event) string { return e.Key }), "timers",
		func() weir.KeyedProcessFunction[string, event, string] { return &timerFn{delay: spec.TimerDelayMS} }).UID("timers")
	*obs = weirtest.ObserveWith(fired, weirtest.Options{Name: "observe-timers"})
	return fired
}

// timerReference is the timer branch's part of Reference: pending entries
// per (key, t), fired when the watermark rises to t or beyond.
func timerReference(s *Spec) []string {
	type kt struct {
		key string
		t   int64
	}
	splitWM := make([]int64, s.Splits)
	for i := range splitWM {
		splitWM[i] = minWM
	}
	wm := int64(minWM)
	pending := map[kt]acc{}
	var out []string
	advance := func(to int64) {
		if to <= wm {
			return
		}
		wm = to
		for k, a := range pending {
			if k.t <= wm {
				out = append(out, timerLine(k.key, k.t, a.N, a.Sum))
				delete(pending, k)
			}
		}
	}
	for _, st := range s.Steps {
		switch st.Kind {
		case StepWatermark:
			splitWM[st.Split] = max(splitWM[st.Split], st.TS)
			lo := splitWM[0]
			for _, w := range splitWM[1:] {
				lo = min(lo, w)
			}
			advance(lo)
		case StepRecord:
			k := kt{st.Key, st.TS + s.TimerDelayMS}
			a := pending[k]
			pending[k] = acc{N: a.N + 1, Sum: a.Sum + st.ID}
		}
	}
	advance(math.MaxInt64)
	return out
}

// checkTimers checks S8 on what the observer right behind the timer
// function received in one attempt, per subtask (chained: one channel
// each): the firings between two watermarks come in non-decreasing
// timestamp order (timer/doc.go 2), and each is at or behind the
// watermark that follows it (a timer fires only once the watermark
// reaches it: timer/doc.go 3). That each fires once, with the right
// records, S1 checks against timerReference.
func checkTimers(obs *weirtest.Observation[string]) *Failure {
	if obs == nil {
		return nil
	}
	for sub := range obs.Subtasks() {
		var since []weirtest.Event[string] // firings since the last watermark
		for i, e := range obs.Events(sub) {
			switch e.Kind {
			case weirtest.WatermarkEvent:
				for _, p := range since {
					if p.TS > e.TS {
						return &Failure{Invariant: InvTimers,
							Detail:  fmt.Sprintf("timer subtask %d, event %d: a timer at %d fired before watermark %d, which does not reach it", sub, i, p.TS, e.TS),
							Records: []string{p.Value}}
					}
				}
				since = since[:0]
			case weirtest.RecordEvent:
				if n := len(since); n > 0 && e.TS < since[n-1].TS {
					return &Failure{Invariant: InvTimers,
						Detail:  fmt.Sprintf("timer subtask %d, event %d: a timer at %d fired after one at %d in the same pass", sub, i, e.TS, since[n-1].TS),
						Records: []string{since[n-1].Value, e.Value}}
				}
				since = append(since, e)
			}
		}
	}
	return nil
}
