package window

import (
	"fmt"
	"math"
	"time"

	"github.com/weirproject/weir/runtime"
)

// The built-in triggers, each with the semantics of Flink's trigger of the
// same name. They are immutable values, safe to share between operators.

// EventTimeTrigger returns Flink's EventTimeTrigger, the default of
// event-time assigners: a window fires once the watermark reaches its
// MaxTimestamp; a record added to a window the watermark has passed
// (within the allowed lateness) fires it at once. Setting it explicitly
// gives the same output as the default, on the general trigger path.
func EventTimeTrigger() Trigger { return eventTimeTrigger{} }

type eventTimeTrigger struct{}

func (eventTimeTrigger) OnElement(_ int64, w Window, ctx *TriggerContext) TriggerResult {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire
	}
	ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	return Continue
}

func (eventTimeTrigger) OnEventTime(time int64, w Window, _ *TriggerContext) TriggerResult {
	if time == w.MaxTimestamp() {
		return Fire
	}
	return Continue
}

func (eventTimeTrigger) OnProcessingTime(int64, Window, *TriggerContext) TriggerResult {
	return Continue
}

func (eventTimeTrigger) CanMerge() bool { return true }

// OnMerge registers the merged window's timer unless the watermark has
// passed it (then the next record fires it, as OnElement does).
func (eventTimeTrigger) OnMerge(w Window, ctx *TriggerContext) {
	if w.MaxTimestamp() > ctx.CurrentWatermark() {
		ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	}
}

func (eventTimeTrigger) Clear(w Window, ctx *TriggerContext) {
	ctx.DeleteEventTimeTimer(w.MaxTimestamp())
}
func (eventTimeTrigger) States() []*TriggerState { return nil }
func (eventTimeTrigger) String() string          { return "EventTimeTrigger" }

// ProcessingTimeTrigger returns Flink's ProcessingTimeTrigger, the default
// of processing-time assigners: a window fires once the clock reaches its
// MaxTimestamp.
func ProcessingTimeTrigger() Trigger { return processingTimeTrigger{} }

type processingTimeTrigger struct{}

func (processingTimeTrigger) OnElement(_ int64, w Window, ctx *TriggerContext) TriggerResult {
	ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	return Continue
}

func (processingTimeTrigger) OnEventTime(int64, Window, *TriggerContext) TriggerResult {
	return Continue
}

func (processingTimeTrigger) OnProcessingTime(int64, Window, *TriggerContext) TriggerResult {
	return Fire
}

func (processingTimeTrigger) CanMerge() bool { return true }

func (processingTimeTrigger) OnMerge(w Window, ctx *TriggerContext) {
	if w.MaxTimestamp() > ctx.CurrentProcessingTime() {
		ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	}
}

func (processingTimeTrigger) Clear(w Window, ctx *TriggerContext) {
	ctx.DeleteProcessingTimeTimer(w.MaxTimestamp())
}
func (processingTimeTrigger) States() []*TriggerState { return nil }
func (processingTimeTrigger) String() string          { return "ProcessingTimeTrigger" }

// NeverTrigger returns a trigger that never fires: Flink's
// GlobalWindows.NeverTrigger, the default of Global. Windows with it emit
// nothing unless another trigger is set.
func NeverTrigger() Trigger { return neverTrigger{} }

type neverTrigger struct{}

func (neverTrigger) OnElement(int64, Window, *TriggerContext) TriggerResult        { return Continue }
func (neverTrigger) OnEventTime(int64, Window, *TriggerContext) TriggerResult      { return Continue }
func (neverTrigger) OnProcessingTime(int64, Window, *TriggerContext) TriggerResult { return Continue }
func (neverTrigger) CanMerge() bool                                                { return true }
func (neverTrigger) OnMerge(Window, *TriggerContext)                               {}
func (neverTrigger) Clear(Window, *TriggerContext)                                 {}
func (neverTrigger) States() []*TriggerState                                       { return nil }
func (neverTrigger) String() string                                                { return "NeverTrigger" }

// CountTrigger returns Flink's CountTrigger: it fires a window each time n
// records have been added to it since it last fired (so a window that
// received c records fires floor(c/n) times), keeping a count per window
// in trigger state "count". It does not purge: wrap it in PurgingTrigger
// for windows of n records each. When sessions merge, their counts add up,
// and the merged window fires at its next record if the sum reached n. It
// panics if n < 1.
func CountTrigger(n int64) Trigger {
	if n < 1 {
		panic(fmt.Sprintf("window: CountTrigger: count must be at least 1, got %d", n))
	}
	return &countTrigger{n: n, count: NewTriggerState("count", SumInt64)}
}

type countTrigger struct {
	n     int64
	count *TriggerState
}

func (t *countTrigger) OnElement(_ int64, _ Window, ctx *TriggerContext) TriggerResult {
	c, _ := ctx.Value(t.count)
	if c++; c >= t.n {
		ctx.ClearValue(t.count)
		return Fire
	}
	ctx.SetValue(t.count, c)
	return Continue
}

func (t *countTrigger) OnEventTime(int64, Window, *TriggerContext) TriggerResult { return Continue }
func (t *countTrigger) OnProcessingTime(int64, Window, *TriggerContext) TriggerResult {
	return Continue
}
func (t *countTrigger) CanMerge() bool                        { return true }
func (t *countTrigger) OnMerge(_ Window, ctx *TriggerContext) { ctx.MergeValue(t.count) }
func (t *countTrigger) Clear(_ Window, ctx *TriggerContext)   { ctx.ClearValue(t.count) }
func (t *countTrigger) States() []*TriggerState               { return []*TriggerState{t.count} }
func (t *countTrigger) String() string                        { return fmt.Sprintf("CountTrigger(%d)", t.n) }

// PurgingTrigger returns Flink's PurgingTrigger: t, with every Fire turned
// into FireAndPurge, so that each firing emits what arrived since the
// previous one. It merges if t does. It panics if t is nil.
func PurgingTrigger(t Trigger) Trigger {
	if t == nil {
		panic("window: PurgingTrigger: nil trigger")
	}
	return purgingTrigger{t}
}

type purgingTrigger struct{ t Trigger }

func purge(r TriggerResult) TriggerResult {
	if r.IsFire() {
		return FireAndPurge
	}
	return r
}

func (p purgingTrigger) OnElement(ts int64, w Window, ctx *TriggerContext) TriggerResult {
	return purge(p.t.OnElement(ts, w, ctx))
}

func (p purgingTrigger) OnEventTime(time int64, w Window, ctx *TriggerContext) TriggerResult {
	return purge(p.t.OnEventTime(time, w, ctx))
}

func (p purgingTrigger) OnProcessingTime(time int64, w Window, ctx *TriggerContext) TriggerResult {
	return purge(p.t.OnProcessingTime(time, w, ctx))
}

func (p purgingTrigger) CanMerge() bool                        { return p.t.CanMerge() }
func (p purgingTrigger) OnMerge(w Window, ctx *TriggerContext) { p.t.OnMerge(w, ctx) }
func (p purgingTrigger) Clear(w Window, ctx *TriggerContext)   { p.t.Clear(w, ctx) }
func (p purgingTrigger) States() []*TriggerState               { return p.t.States() }
func (p purgingTrigger) String() string                        { return fmt.Sprintf("PurgingTrigger(%v)", p.t) }

// ContinuousEventTimeTrigger returns Flink's ContinuousEventTimeTrigger:
// an event-time window fires every interval of event time while it is
// open, at the multiples of interval (counted from the Unix epoch, from
// the first record's timestamp rounded down), and at its MaxTimestamp
// (a record added after the watermark passed that fires it at once). The
// next firing time is trigger state "fire-time" (min on merge). It does
// not purge. A record without a timestamp (in a Global window) starts no
// periodic firing. It panics if interval is not a positive whole number
// of milliseconds.
func ContinuousEventTimeTrigger(interval time.Duration) Trigger {
	return &continuousTrigger{
		interval:  millis("ContinuousEventTimeTrigger", "interval", interval, false),
		eventTime: true,
		next:      NewTriggerState("fire-time", MinInt64),
	}
}

// ContinuousProcessingTimeTrigger returns Flink's
// ContinuousProcessingTimeTrigger: a window fires every interval of
// processing time, at the multiples of interval from the clock's time of
// its first record rounded down, the last firing time being capped at the
// window's MaxTimestamp. The next firing time is trigger state
// "fire-time" (min on merge). It does not purge. It panics if interval is
// not a positive whole number of milliseconds.
func ContinuousProcessingTimeTrigger(interval time.Duration) Trigger {
	return &continuousTrigger{
		interval: millis("ContinuousProcessingTimeTrigger", "interval", interval, false),
		next:     NewTriggerState("fire-time", MinInt64),
	}
}

// continuousTrigger is both continuous triggers; eventTime chooses the
// domain.
type continuousTrigger struct {
	interval  int64
	eventTime bool
	next      *TriggerState
}

func (t *continuousTrigger) OnElement(ts int64, w Window, ctx *TriggerContext) TriggerResult {
	if t.eventTime {
		if w.MaxTimestamp() <= ctx.CurrentWatermark() {
			return Fire // the watermark has passed the window: fire now
		}
		ctx.RegisterEventTimeTimer(w.MaxTimestamp())
		if ts == runtime.NoTimestamp {
			return Continue
		}
	} else {
		ts = ctx.CurrentProcessingTime()
	}
	if _, ok := ctx.Value(t.next); !ok {
		t.schedule(startOf(ts, 0, t.interval), w, ctx)
	}
	return Continue
}

// schedule sets and registers the next firing: interval after time, at
// the latest at the window's MaxTimestamp. At the end of input (the
// watermark at its maximum) the next firing is the window's end: every
// firing left would see the same contents, and a Global window has no end
// that interval steps could reach in reasonable time.
func (t *continuousTrigger) schedule(time int64, w Window, ctx *TriggerContext) {
	next := min(addSat(time, t.interval), w.MaxTimestamp())
	if t.eventTime && ctx.CurrentWatermark() == math.MaxInt64 {
		next = w.MaxTimestamp()
	}
	ctx.SetValue(t.next, next)
	if t.eventTime {
		ctx.RegisterEventTimeTimer(next)
	} else {
		ctx.RegisterProcessingTimeTimer(next)
	}
}

func (t *continuousTrigger) onTime(time int64, w Window, ctx *TriggerContext) TriggerResult {
	if t.eventTime && time == w.MaxTimestamp() {
		return Fire
	}
	if next, ok := ctx.Value(t.next); ok && next == time {
		ctx.ClearValue(t.next)
		if time < w.MaxTimestamp() {
			t.schedule(time, w, ctx)
		}
		return Fire
	}
	return Continue
}

func (t *continuousTrigger) OnEventTime(time int64, w Window, ctx *TriggerContext) TriggerResult {
	if !t.eventTime {
		return Continue
	}
	return t.onTime(time, w, ctx)
}

func (t *continuousTrigger) OnProcessingTime(time int64, w Window, ctx *TriggerContext) TriggerResult {
	if t.eventTime {
		return Continue
	}
	return t.onTime(time, w, ctx)
}

func (t *continuousTrigger) CanMerge() bool { return true }

func (t *continuousTrigger) OnMerge(w Window, ctx *TriggerContext) {
	ctx.MergeValue(t.next)
	if next, ok := ctx.Value(t.next); ok {
		if t.eventTime {
			ctx.RegisterEventTimeTimer(next)
		} else {
			ctx.RegisterProcessingTimeTimer(next)
		}
	}
	if t.eventTime && w.MaxTimestamp() > ctx.CurrentWatermark() {
		ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	}
}

func (t *continuousTrigger) Clear(w Window, ctx *TriggerContext) {
	if next, ok := ctx.Value(t.next); ok {
		if t.eventTime {
			ctx.DeleteEventTimeTimer(next)
		} else {
			ctx.DeleteProcessingTimeTimer(next)
		}
		ctx.ClearValue(t.next)
	}
	if t.eventTime {
		ctx.DeleteEventTimeTimer(w.MaxTimestamp())
	}
}

func (t *continuousTrigger) States() []*TriggerState { return []*TriggerState{t.next} }

func (t *continuousTrigger) String() string {
	if t.eventTime {
		return fmt.Sprintf("ContinuousEventTimeTrigger(%dms)", t.interval)
	}
	return fmt.Sprintf("ContinuousProcessingTimeTrigger(%dms)", t.interval)
}
