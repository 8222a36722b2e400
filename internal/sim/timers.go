package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/weirtest"
)

// The timer branch (Spec.Timers): a KeyedProcessFunction that, for every
// record, adds it to a keyed map entry at t = timestamp + Spec.TimerDelayMS
// and registers an event-time timer at t; the timer emits the entry (the
// records registered for t since its last firing) at t and removes it. A
// record whose t is at or behind the watermark gets a line of its own at
// once (a timer there would fire at the next rise of the watermark, which a
// restore moves: see ProcessElement).

// timerLine is a timer's firing: its key, timestamp, and the count and
// sum of ids of the records that registered it.
func timerLine(key string, t, n, sum int64) string {
	return fmt.Sprintf("T %s t=%d n=%d sum=%d", key, t, n, sum)
}

// lateTimerLine is a record whose timer would be at or behind the
// watermark when it arrived: emitted at once instead.
func lateTimerLine(key string, t, id int64) string {
	return fmt.Sprintf("TL %s t=%d id=%d", key, t, id)
}

// procLine is a processing-time timer's firing (Spec.ProcDelayMS): its key,
// its time, the ids of the records that registered it, and whether the
// processing time had reached it when it fired.
func procLine(key string, t int64, ids []int64, due bool) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	early := ""
	if !due {
		early = " EARLY"
	}
	return fmt.Sprintf("P %s t=%d ids=%s%s", key, t, strings.Join(s, ","), early)
}

type timerFn struct {
	delay     int64
	procDelay int64 // 0: no processing-time timers
	// reached says whether processing time has reached a time
	// (wallClock.reached).
	reached func(ms int64) bool
	pending *state.MapState[string, int64, acc]
	procIDs *state.MapState[string, int64, []int64]
}

func (f *timerFn) Open(ctx *weir.KeyedContext[string, string]) error {
	m, err := state.Map[string, int64, acc](ctx.State(), "pending")
	f.pending = m
	if err != nil || f.procDelay == 0 {
		return err
	}
	f.procIDs, err = state.Map[string, int64, []int64](ctx.State(), "proc-pending")
	return err
}

func (f *timerFn) ProcessElement(e event, ctx *weir.KeyedContext[string, string]) error {
	t := ctx.Timestamp() + f.delay
	if t <= ctx.CurrentWatermark() {
		// Behind the watermark: a line of its own now, no timer. A timer
		// registered there would fire at the next rise of the watermark,
		// which a restore moves (the watermark is not checkpointed: the
		// first one after a restore fires it), so which late records
		// share a firing would depend on where failures strike.
		ctx.CollectAt(lateTimerLine(ctx.Key(), t, e.ID), ctx.Timestamp())
	} else {
		a, _ := f.pending.Get(t)
		f.pending.Put(t, acc{N: a.N + 1, Sum: a.Sum + e.ID})
		ctx.RegisterEventTimeTimer(t)
	}
	if f.procDelay > 0 {
		p := ctx.CurrentProcessingTime() + f.procDelay
		ids, _ := f.procIDs.Get(p)
		f.procIDs.Put(p, append(slices.Clip(ids), e.ID))
		ctx.RegisterProcessingTimeTimer(p)
	}
	return nil
}

func (f *timerFn) OnTimer(t int64, ctx *weir.KeyedContext[string, string]) error {
	if ctx.TimeDomain() == weir.ProcessingTime {
		ids, _ := f.procIDs.Get(t)
		f.procIDs.Remove(t)
		slices.Sort(ids)
		ctx.Collect(procLine(ctx.Key(), t, ids, f.reached(t)))
		return nil
	}
	// A timer with no entry fired twice (or for nothing): n=0, a line the
	// reference never has.
	a, _ := f.pending.Get(t)
	f.pending.Remove(t)
	ctx.CollectAt(timerLine(ctx.Key(), t, a.N, a.Sum), t)
	return nil
}

// timerBranch adds the timer branch behind passed and returns its lines;
// obs is set to its observer (S8).
func timerBranch(spec *Spec, passed weir.Stream[event], reached func(int64) bool, obs **weirtest.Observation[string]) weir.Stream[string] {
	fired := weir.Process(weir.KeyBy(passed, func(e event) string { return e.Key }), "timers",
		func() weir.KeyedProcessFunction[string, event, string] {
			return &timerFn{delay: spec.TimerDelayMS, procDelay: spec.ProcDelayMS, reached: reached}
		}).UID("timers")
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
			if k.t <= wm {
				out = append(out, lateTimerLine(k.key, k.t, st.ID))
				continue
			}
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
				if strings.HasPrefix(e.Value, "P ") || strings.HasPrefix(e.Value, "TL ") {
					continue // a processing-time firing (S9), or a late record
				}
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

// checkProcTimers checks S9 on the committed output's processing-time
// firings (Spec.ProcDelayMS) and returns the other lines. Which records a
// processing-time timer holds depends on when processing time moved,
// which a restore changes, so these lines are not in the reference; what
// must hold is that no record is in two committed firings (exactly once
// across restores), that no firing is empty (a timer fired twice), and
// that none fired before processing time reached it.
func checkProcTimers(got []string) ([]string, *Failure) {
	rest := got[:0:0]
	seen := map[string]string{}
	for _, l := range got {
		if !strings.HasPrefix(l, "P ") {
			rest = append(rest, l)
			continue
		}
		if strings.HasSuffix(l, " EARLY") {
			return nil, &Failure{Invariant: InvProcTimers, Detail: "a processing-time timer fired before processing time reached it", Records: []string{l}}
		}
		_, ids, _ := strings.Cut(l, " ids=")
		if ids == "" {
			return nil, &Failure{Invariant: InvProcTimers, Detail: "a processing-time timer fired with no records: it fired twice", Records: []string{l}}
		}
		key := strings.Fields(l)[1]
		for _, id := range strings.Split(ids, ",") {
			if prev, ok := seen[key+"/"+id]; ok {
				return nil, &Failure{Invariant: InvProcTimers, Detail: fmt.Sprintf("record %s of key %s is in two committed processing-time firings", id, key), Records: []string{prev, l}}
			}
			seen[key+"/"+id] = l
		}
	}
	return rest, nil
}
