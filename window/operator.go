package window

import (
	"errors"
	"fmt"
	"math"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
	"github.com/weirproject/weir/watermark"
)

// Names of the counters the window operator keeps per subtask.
const (
	// CounterLateDropped counts records that no window took because they
	// were late (I4), whether or not they went to a LateOutput.
	CounterLateDropped = "lateRecordsDropped"
	// CounterLateOutput counts the late records sent to the LateOutput.
	CounterLateOutput = "lateRecords"
	// GaugeLastLateTimestamp and GaugeLastLateWatermark are the timestamp
	// of the latest late record and the watermark it was late against
	// (why it was late: timestamp + allowed lateness <= watermark); both
	// watermark.Min until the first.
	GaugeLastLateTimestamp = "lastLateTimestamp"
	GaugeLastLateWatermark = "lastLateWatermark"
	// GaugeAllowedLateness is the operator's allowed lateness in
	// milliseconds (event-time windows).
	GaugeAllowedLateness = "allowedLatenessMs"
)

// ErrNoTimestamp is returned (failing the job) when an event-time window
// receives a record without a timestamp (runtime.NoTimestamp).
var ErrNoTimestamp = errors.New("window: record without a timestamp in an event-time window; assign timestamps at the source (watermark.Strategy.WithTimestamp) or use a processing-time assigner")

// build adds the window operator for contents made by newContents, or,
// with an evictor, for all records of a window, which elemsFn turns into
// output at each firing.
func build[K comparable, T, OUT any](ks weir.KeyedStream[K, T], fn, name string, a Assigner, opts []Option,
	newContents func() contents[K, T, OUT], elemsFn func(key K, w Window, elems []T, emit func(OUT)) error) weir.Stream[OUT] {
	o, tag := resolve[T](fn, name, a, opts)
	key, hash := ks.Key(), ks.Hasher()
	ranged, _ := a.(rangeAssigner)
	var noClock bool
	switch a.(type) {
	case global, countAssigner:
		noClock = true
	}
	trig := triggerOf(a, o)
	if ev := evictorOf(a, opts); ev != nil {
		codec := contentsCodec[T](fn, name, opts)
		newContents = func() contents[K, T, OUT] {
			return &evicting[K, T, OUT]{fn: elemsFn, evictor: ev, codec: codec}
		}
	}
	return weir.TransformKeyed(ks, name, func() runtime.OneInputOperator[T, OUT] {
		return &operator[K, T, OUT]{
			key: key, hash: hash, assigner: a, ranged: ranged,
			eventTime: a.IsEventTime(), merging: a.IsMerging(), global: noClock,
			lateness: o.lateness, lateTag: tag,
			contents: newContents(),
			trig:     trig,
		}
	})
}

// operator is the window operator of one subtask: Flink's WindowOperator.
// This file is its path for the default triggers (EventTimeTrigger,
// ProcessingTimeTrigger), specialised because nearly every window uses
// them; with a Trigger set (trig != nil) records and timers take the path
// of triggered.go instead, which calls the trigger as Flink does.
//
// Per record (the key made current first):
//
//	for each window w the assigner gives (after merging, for sessions):
//	    if cleanup(w) <= watermark: skip w                        (I3)
//	    add the record to w's contents
//	    if event time and w.MaxTimestamp() <= watermark: fire w   (re-fire, I3)
//	    else, on w's first record: timer at w.MaxTimestamp()      (I2)
//	    on w's first record: timer at cleanup(w), if different    (I5)
//	if no window took it and ts + lateness <= watermark: late     (I4)
//
// Per timer (key and window from the timer):
//
//	if it is w's trigger time: fire w
//	if it is w's cleanup time: clear w's contents (and merging entry)
//
// Timers live in one timer.Service with the window as namespace, so a
// trigger timer and a cleanup timer at the same time are one timer (the
// common case: lateness 0, or any processing-time window). Registering
// timers only on a window's first record is sound because a window's
// contents exist exactly from its first record until its cleanup timer has
// fired, and its trigger timer, if one was needed, is pending all along
// until the watermark reaches MaxTimestamp (after which records fire the
// window directly). That keeps the timer queue out of the per-record path.
// A restore breaks the premise (the watermark starts over, below windows
// that fired already), so then every record registers until the watermark
// has passed every restored timer (registerBelow).
type operator[K comparable, T, OUT any] struct {
	runtime.Base[OUT]
	key       func(T) K
	hash      keygroup.Hasher[K]
	assigner  Assigner
	eventTime bool
	merging   bool
	global    bool // Global or a count assigner: no clock read per record
	lateness  int64
	lateTag   *runtime.OutputTag[T]
	contents  contents[K, T, OUT]

	assign      keygroup.Assigner // the key group of a key's hash, for the job's max parallelism (checked once)
	backend     *state.Backend[K]
	timers      *timer.Service[K, Window]
	sessions    *state.ValueState[K, []mapping] // merging assigners only
	late        runtime.Output[T]
	lateDropped *runtime.Counter
	lateOut     *runtime.Counter
	lastLateTs  *runtime.Gauge // GaugeLastLateTimestamp
	lastLateWm  *runtime.Gauge // GaugeLastLateWatermark
	scratch     []Window       // assigned windows, reused per record
	// ranged is the assigner if it is a rangeAssigner: then scratch holds
	// the windows of every timestamp in [rangeLo, rangeHi), and a record in
	// that interval reuses them.
	ranged           rangeAssigner
	rangeLo, rangeHi int64
	merged           []Window // merging scratch: windows merged away
	mergedState      []Window // merging scratch: their state windows
	emitTs           int64
	emit             func(OUT)
	fireTimer        func(timer.Timer[K, Window]) // event-time timers: o.onTimer or o.onEventTimer, bound once
	fireProcTimer    func(timer.Timer[K, Window]) // processing-time timers: o.onTimer or o.onProcTimer
	nextWake         int64                        // earliest processing-time wake-up asked of the runtime and not yet run
	// registerBelow: while the watermark is below it, timers are
	// registered on every record, not only on a window's first. A restore
	// sets it to the latest restored event-time timer: the watermark
	// restarts from the minimum, so a restored window that has fired
	// already has no trigger timer, and a record joining it must register
	// one (as Flink's trigger does on every record). Once the watermark
	// passes it, every restored window is gone and the first-record rule
	// holds again.
	registerBelow int64
	err           error // first error of a timer callback; fails the job

	// trig is the Trigger set with WithTrigger or by the assigner; nil
	// means the default triggers, on the path above (see triggered.go).
	trig       Trigger
	tctx       TriggerContext
	trigStates []*state.NamespacedValueState[K, Window, int64] // by index of trig.States()
	trigMerge  []func(a, b int64) int64
	curKey     K   // the key of the current record or timer (trigger path)
	curKG      int // its key group
	elem       T   // the record of the current OnElement (Element)
}

// Open sets up state, timers, counters and outputs.
func (o *operator[K, T, OUT]) Open(ctx *runtime.Context, out runtime.Output[OUT]) error {
	o.Base.Open(ctx, out)
	o.assign = keygroup.NewAssigner(ctx.MaxParallelism)
	backend, err := state.Open[K](ctx.StateOptions(), ctx.KeyGroups)
	if err != nil {
		return err
	}
	o.backend = backend
	o.timers = weir.NewTimerService[K, Window](backend, nil, WindowCodec{})
	o.contents.open(o.backend)
	if ev, ok := o.contents.(*evicting[K, T, OUT]); ok {
		ev.ctx.host = o
	}
	if o.merging {
		o.sessions = state.MustValueWithCodec[K, []mapping](o.backend, sessionSetName, sessionSetCodec{})
	}
	if o.lateTag != nil {
		o.late = runtime.SideOutput(ctx, o.lateTag)
	}
	o.lateDropped = ctx.Counter(CounterLateDropped)
	o.lateOut = ctx.Counter(CounterLateOutput)
	o.lastLateTs = ctx.Gauge(GaugeLastLateTimestamp)
	o.lastLateWm = ctx.Gauge(GaugeLastLateWatermark)
	o.lastLateTs.Set(watermark.Min)
	o.lastLateWm.Set(watermark.Min)
	if o.eventTime {
		ctx.Gauge(GaugeAllowedLateness).Set(o.lateness)
	}
	o.emit = func(v OUT) { o.Out.Collect(runtime.Record[OUT]{Value: v, Timestamp: o.emitTs}) }
	o.fireTimer, o.fireProcTimer = o.onTimer, o.onTimer
	if o.trig != nil {
		o.openTrigger()
	}
	o.nextWake = math.MaxInt64
	o.registerBelow = math.MinInt64
	o.timers.OnProcessingHeadChange(o.schedule)
	// Restore after the head-change callback is in place, so restored
	// processing-time timers get their wake-up (overdue ones fire at once).
	return o.restore(ctx)
}

// cleanupTime is when the state of w goes (I3, I5): MaxTimestamp plus the
// allowed lateness in event time (saturating), MaxTimestamp in processing
// time.
func (o *operator[K, T, OUT]) cleanupTime(w Window) int64 {
	if !o.eventTime {
		return w.MaxTimestamp()
	}
	if mutant.On(mutant.WindowCleanupEarly) {
		return addSat(w.MaxTimestamp(), o.lateness) - 1
	}
	return addSat(w.MaxTimestamp(), o.lateness)
}

// fireTime is when the default event-time trigger fires w: its
// MaxTimestamp (I2).
func fireTime(w Window) int64 {
	if mutant.On(mutant.WindowFiresEarly) {
		return w.MaxTimestamp() - 1
	}
	return w.MaxTimestamp()
}

// ProcessRecord assigns r to its windows.
func (o *operator[K, T, OUT]) ProcessRecord(r runtime.Record[T]) error { return o.ProcessRecordRef(&r) }

// ProcessRecordRef implements runtime.RecordRefProcessor: ProcessRecord
// without a copy of the record, which stays the caller's.
func (o *operator[K, T, OUT]) ProcessRecordRef(r *runtime.Record[T]) error {
	k := o.key(r.Value)
	o.backend.SetCurrentKey(k, o.assign.Assign(o.hash(k)))
	t := r.Timestamp
	if o.eventTime {
		if t == runtime.NoTimestamp {
			return ErrNoTimestamp
		}
	} else if !o.global {
		t = o.Ctx.Clock.Now().UnixMilli()
	}
	if o.ranged != nil {
		if t < o.rangeLo || t >= o.rangeHi {
			o.scratch, o.rangeLo, o.rangeHi = o.ranged.assignRange(t, o.scratch[:0])
		}
	} else {
		o.scratch = o.assigner.AssignWindows(t, o.scratch[:0])
	}
	wm := o.timers.CurrentWatermark()
	var taken bool
	var err error
	switch {
	case o.merging:
		taken, err = o.addMerging(k, *r, wm)
	case o.trig != nil:
		taken, err = o.addTriggered(k, *r, wm)
	default:
		taken, err = o.addTo(k, r.Value, r.Timestamp, wm)
	}
	if err != nil || taken || !o.eventTime {
		return err
	}
	// No window took the record (I4). It is late if its timestamp plus the
	// allowed lateness is at or behind the watermark; a record that fell
	// into no window without being late (a gap between sliding windows) is
	// dropped silently, as in Flink.
	if addSat(t, o.lateness) <= wm {
		o.lateDropped.Inc()
		o.lastLateTs.Set(t)
		o.lastLateWm.Set(wm)
		if o.late != nil {
			o.lateOut.Inc()
			o.late.Collect(*r)
		}
	}
	return nil
}

// addTo adds v (timestamp ts) to the non-merging windows in o.scratch and
// reports whether any took it.
func (o *operator[K, T, OUT]) addTo(k K, v T, ts, wm int64) (taken bool, err error) {
	for _, w := range o.scratch {
		if o.eventTime && o.cleanupTime(w) <= wm {
			continue // I3: the window is gone
		}
		taken = true
		fresh := o.contents.add(w, v, ts)
		if o.afterAddIdle(w, fresh, wm) {
			continue // the usual record
		}
		if err := o.afterAdd(k, w, w, fresh, wm); err != nil {
			return taken, err
		}
	}
	return taken, nil
}

// afterAddIdle reports whether afterAdd(k, w, sw, register, wm) has nothing
// to do: a record that did not open w (register false), outside a restore's
// catch-up, joining an event-time window that has not fired, or any
// processing-time window. Checked before the call, it keeps the usual
// record out of afterAdd.
func (o *operator[K, T, OUT]) afterAddIdle(w Window, register bool, wm int64) bool {
	return !register && (!o.eventTime || (wm >= o.registerBelow && w.MaxTimestamp() > wm))
}

// afterAdd is the default trigger's onElement and the cleanup-timer
// registration for window w (contents in sw) after a record was added.
func (o *operator[K, T, OUT]) afterAdd(k K, w, sw Window, register bool, wm int64) error {
	kg := o.backend.CurrentKeyGroup()
	maxTs := w.MaxTimestamp()
	if o.eventTime {
		if maxTs <= wm {
			// Allowed-late record: the window has fired already (or would
			// have, had it had contents); fire it again now (I3).
			if err := o.fire(k, w, sw); err != nil {
				return err
			}
		} else if register || wm < o.registerBelow {
			o.registerEvent(k, kg, w, fireTime(w), register && wm >= o.registerBelow)
		}
		if c := o.cleanupTime(w); (register || wm < o.registerBelow) && c != maxTs && (o.merging || !mutant.On(mutant.WindowKeepsExpiredState)) {
			o.registerEvent(k, kg, w, c, register && wm >= o.registerBelow)
		}
		return nil
	}
	if register {
		// Processing time: trigger and cleanup are the same timer.
		o.timers.RegisterProcessingTimeTimer(k, kg, w, maxTs)
	}
	return nil
}

// registerEvent registers the event-time timer (k, w, ts). fresh says the
// window's contents were just created outside a restore's catch-up (see
// registerBelow), so that the window cannot have timers yet (the premise at
// the top of this file) and the timer service may skip its duplicate check.
// Merging windows never pass fresh: a merge can make a window that had
// timers under another name.
func (o *operator[K, T, OUT]) registerEvent(k K, kg int, w Window, ts int64, fresh bool) {
	if fresh && !o.merging {
		o.timers.RegisterNewEventTimeTimer(k, kg, w, ts)
		return
	}
	o.timers.RegisterEventTimeTimer(k, kg, w, ts)
}

// fire emits the result of window w (contents in sw) for key k.
func (o *operator[K, T, OUT]) fire(k K, w, sw Window) error {
	o.emitTs = w.MaxTimestamp()
	return o.contents.fire(k, w, sw, o.emit)
}

// onTimer handles a trigger or cleanup timer of window t.Namespace.
func (o *operator[K, T, OUT]) onTimer(t timer.Timer[K, Window]) {
	if o.err != nil {
		return
	}
	o.backend.SetCurrentKey(t.Key, t.KeyGroup)
	w, sw := t.Namespace, t.Namespace
	var set []mapping
	idx := -1
	if o.merging {
		set, _ = o.sessions.Value()
		if idx = find(set, w); idx < 0 {
			return // merged away (its timers were deleted; defensive)
		}
		sw = set[idx].state
	}
	// Default triggers: event time fires at MaxTimestamp exactly (a
	// cleanup timer later than that does not fire); processing time fires
	// on its only timer.
	if !o.eventTime || t.Timestamp == fireTime(w) {
		if err := o.fire(t.Key, w, sw); err != nil {
			o.err = err
			return
		}
	}
	if t.Timestamp == o.cleanupTime(w) {
		o.contents.clear(sw)
		if o.merging {
			o.storeSet(removeFrom(set, idx, !o.sessions.SnapshotMayRead()))
		}
	}
}

// Holds implements runtime.Holder: while event-time timers are pending
// (windows to fire or clean up), the operator's output does not go idle
// (runtime I8), so what they emit later is not late downstream.
func (o *operator[K, T, OUT]) Holds() bool {
	return o.timers != nil && o.timers.NumEventTimeTimers() > 0
}

// ProcessWatermark fires the event-time timers the watermark reaches, in
// timestamp order, then forwards it.
func (o *operator[K, T, OUT]) ProcessWatermark(ts int64) error {
	o.timers.AdvanceWatermark(ts, o.fireTimer)
	if o.err != nil {
		return o.err
	}
	o.Out.EmitWatermark(ts)
	if h := testHookWatermark; h != nil {
		h(o.Ctx.Name, o.Ctx.Subtask, ts, o.stats())
	}
	return nil
}

// stats counts what the subtask holds (for tests of I5).
type stats struct {
	contents, sessionKeys, eventTimers, procTimers, triggerState int
}

// numKeys is the number of entries of the state registered as name (0 if
// none is).
func (o *operator[K, T, OUT]) numKeys(name string) int {
	if t, ok := o.backend.Table(name); ok {
		return t.NumKeys()
	}
	return 0
}

func (o *operator[K, T, OUT]) stats() stats {
	s := stats{eventTimers: o.timers.NumEventTimeTimers(), procTimers: o.timers.NumProcessingTimeTimers()}
	s.contents = o.numKeys(contentsName)
	if o.sessions != nil {
		s.sessionKeys = o.numKeys(o.sessions.Name())
	}
	for _, st := range o.trigStates {
		s.triggerState += o.numKeys(st.Name())
	}
	return s
}

// testHookWatermark, set only by tests before a job starts, is called on
// the subtask goroutine after each watermark the operator forwards.
var testHookWatermark func(op string, subtask int, wm int64, s stats)

// schedule asks the runtime for a processing-time wake-up at ts unless an
// earlier one is pending. It is the timer service's head-change callback.
func (o *operator[K, T, OUT]) schedule(ts int64) {
	if ts >= o.nextWake {
		return
	}
	o.nextWake = ts
	o.Ctx.RegisterProcessingTimer(ts, o.wake)
}

// wake fires the due processing-time timers and schedules the next
// wake-up. Wake-ups scheduled earlier for later times may still run; they
// find nothing due, which is harmless.
func (o *operator[K, T, OUT]) wake(now int64) {
	o.nextWake = math.MaxInt64
	o.timers.AdvanceProcessingTime(now, o.fireProcTimer)
	if o.err != nil {
		o.Ctx.Fail(o.err)
		return
	}
	if next, ok := o.timers.NextProcessingTime(); ok {
		o.schedule(next)
	}
}

// EndInput fires the processing-time windows still open (I8): their input
// has ended, so no record can join them any more. Event-time windows have
// fired already, at the final watermark.
func (o *operator[K, T, OUT]) EndInput() error {
	if o.err != nil {
		return o.err
	}
	if !o.eventTime {
		o.timers.AdvanceProcessingTime(o.endOfProcessingTime(), o.fireProcTimer)
	}
	return o.err
}

// String describes the operator for errors and plans.
// Close releases the state backend (a Pebble backend's files).
func (o *operator[K, T, OUT]) Close() error {
	if o.backend == nil {
		return nil
	}
	return o.backend.Close()
}

func (o *operator[K, T, OUT]) String() string {
	return fmt.Sprintf("window operator (%v, lateness %dms)", o.assigner, o.lateness)
}
