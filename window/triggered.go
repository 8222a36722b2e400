package window

import (
	"math"

	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/timer"
)

// The trigger path: the window operator with a Trigger (WithTrigger, or an
// assigner's default such as Global's), Flink's WindowOperator with its
// trigger calls. The default triggers keep the specialised path of
// operator.go, which registers timers only on a window's first record; a
// Trigger is called for every record, as in Flink.
//
// Per record (the key made current first):
//
//	for each window w the assigner gives (after merging, for sessions):
//	    if event time and cleanup(w) <= watermark: skip w              (I3)
//	    add the record to w's contents
//	    r := trigger.OnElement(record, w)
//	    if r fires: emit w's result; if r purges: clear w's contents
//	    on w's first record (every record when merging): timer at
//	        cleanup(w), unless w is GlobalWindow                      (I5)
//
// Per timer (key and window from the timer; a window merged away is
// skipped):
//
//	r := trigger.OnEventTime or OnProcessingTime(time, w)
//	if r fires: emit; if r purges: clear the contents
//	if it is w's cleanup timer (in the assigner's domain): clear w's
//	    contents, trigger.Clear(w), the trigger's state of w, and w's
//	    entry in the session set
//
// When sessions merge into w (mergeWindow), trigger.OnMerge(w) runs with
// the merged windows, then trigger.Clear and the cleanup-timer deletion
// for each merged window; the trigger's state of the merged windows is
// dropped after OnMerge had the chance to merge it. Trigger state lives in
// keyed state "window-trigger/<name>" with the (actual, not state) window
// as namespace, so a checkpoint holds it with the contents and timers.

// triggerStatePrefix prefixes the names of trigger states in the backend.
const triggerStatePrefix = "window-trigger/"

// openTrigger registers the trigger's states and binds the timer
// callbacks of the trigger path.
func (o *operator[K, T, OUT]) openTrigger() {
	o.tctx = TriggerContext{host: o, states: o.trig.States(), elem: &o.elem}
	for _, s := range o.tctx.states {
		st := state.MustNamespacedValueWithCodecs[K, Window, int64](o.backend, triggerStatePrefix+s.name, WindowCodec{}, nil)
		o.trigStates = append(o.trigStates, st)
		o.trigMerge = append(o.trigMerge, s.merge)
	}
	o.fireTimer, o.fireProcTimer = o.onEventTimer, o.onProcTimer
}

// addTriggered adds r to the non-merging windows in o.scratch, calling the
// trigger, and reports whether any window took it.
func (o *operator[K, T, OUT]) addTriggered(k K, r runtime.Record[T], wm int64) (taken bool, err error) {
	o.curKey, o.curKG = k, o.backend.CurrentKeyGroup()
	for _, w := range o.scratch {
		if o.eventTime && o.cleanupTime(w) <= wm {
			continue // I3: the window is gone
		}
		taken = true
		fresh := o.contents.add(w, r.Value, r.Timestamp)
		if err := o.onElement(k, w, w, r); err != nil {
			return taken, err
		}
		if fresh {
			o.registerCleanup(w)
		}
	}
	return taken, nil
}

// onElement calls the trigger for record r added to window w (contents in
// sw) and applies its result.
func (o *operator[K, T, OUT]) onElement(k K, w, sw Window, r runtime.Record[T]) error {
	o.elem = r.Value
	o.tctx.w, o.tctx.inElem = w, true
	res := o.trig.OnElement(r.Timestamp, w, &o.tctx)
	o.tctx.inElem = false
	var zero T
	o.elem = zero // do not hold the record past the call
	return o.apply(k, w, sw, res)
}

// apply carries out a trigger's result for window w (contents in sw).
func (o *operator[K, T, OUT]) apply(k K, w, sw Window, res TriggerResult) error {
	if res.IsFire() {
		if err := o.fire(k, w, sw); err != nil {
			return err
		}
	}
	if res.IsPurge() {
		o.contents.clear(sw)
	}
	return nil
}

// registerCleanup registers w's cleanup timer in the assigner's domain;
// the global window has none (Flink skips a cleanup time of
// Long.MAX_VALUE).
func (o *operator[K, T, OUT]) registerCleanup(w Window) {
	if isGlobal(w) {
		return
	}
	if o.eventTime {
		o.timers.RegisterEventTimeTimer(o.curKey, o.curKG, w, o.cleanupTime(w))
	} else {
		o.timers.RegisterProcessingTimeTimer(o.curKey, o.curKG, w, o.cleanupTime(w))
	}
}

// deleteCleanup deletes w's cleanup timer (w merged away).
func (o *operator[K, T, OUT]) deleteCleanup(w Window) {
	if o.eventTime {
		o.timers.DeleteEventTimeTimer(o.curKey, o.curKG, w, o.cleanupTime(w))
	} else {
		o.timers.DeleteProcessingTimeTimer(o.curKey, o.curKG, w, o.cleanupTime(w))
	}
}

func (o *operator[K, T, OUT]) onEventTimer(t timer.Timer[K, Window]) { o.onTriggerTimer(t, true) }
func (o *operator[K, T, OUT]) onProcTimer(t timer.Timer[K, Window])  { o.onTriggerTimer(t, false) }

// onTriggerTimer handles a timer of the trigger path; eventTime is the
// timer's domain.
func (o *operator[K, T, OUT]) onTriggerTimer(t timer.Timer[K, Window], eventTime bool) {
	if o.err != nil {
		return
	}
	o.backend.SetCurrentKey(t.Key, t.KeyGroup)
	o.curKey, o.curKG = t.Key, t.KeyGroup
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
	o.tctx.w = w
	var res TriggerResult
	if eventTime {
		res = o.trig.OnEventTime(t.Timestamp, w, &o.tctx)
	} else {
		res = o.trig.OnProcessingTime(t.Timestamp, w, &o.tctx)
	}
	if err := o.apply(t.Key, w, sw, res); err != nil {
		o.err = err
		return
	}
	if eventTime == o.eventTime && !isGlobal(w) && t.Timestamp == o.cleanupTime(w) {
		o.contents.clear(sw)
		o.clearTrigger(w)
		if o.merging {
			o.storeSet(removeFrom(set, idx, !o.sessions.SnapshotMayRead()))
		}
	}
}

// clearTrigger calls the trigger's Clear for w and drops its state of w.
func (o *operator[K, T, OUT]) clearTrigger(w Window) {
	o.tctx.w = w
	o.trig.Clear(w, &o.tctx)
	for _, st := range o.trigStates {
		st.Clear(w)
	}
}

// mergeTrigger is the trigger's part of merging the windows in merged into
// cover (Flink's MergeFunction): OnMerge on the result, then, per merged
// window, Clear, its trigger state and its cleanup timer dropped.
func (o *operator[K, T, OUT]) mergeTrigger(k K, kg int, cover Window, merged []Window) {
	o.curKey, o.curKG = k, kg
	o.tctx.w, o.tctx.merged = cover, merged
	o.trig.OnMerge(cover, &o.tctx)
	o.tctx.merged = nil
	for _, m := range merged {
		o.clearTrigger(m)
		o.deleteCleanup(m)
	}
}

// endOfProcessingTime is how far EndInput advances processing time (I8):
// past every window on the default path; on the trigger path to the
// latest processing-time timer pending then, so that every pending timer
// fires once while a trigger that keeps re-registering later timers (a
// continuous trigger on Global) cannot loop until the end of time.
func (o *operator[K, T, OUT]) endOfProcessingTime() int64 {
	if o.trig == nil {
		return math.MaxInt64
	}
	last := int64(math.MinInt64)
	rng := o.timers.Range()
	for kg := rng.Start; kg <= rng.End; kg++ {
		o.timers.ForEachProcessingTimeTimer(kg, func(t timer.Timer[K, Window]) {
			last = max(last, t.Timestamp)
		})
	}
	return last
}

// The triggerHost methods, for the current key (curKey, curKG).

func (o *operator[K, T, OUT]) watermark() int64 { return o.timers.CurrentWatermark() }

func (o *operator[K, T, OUT]) processingTime() int64 { return o.Ctx.Clock.Now().UnixMilli() }

func (o *operator[K, T, OUT]) registerEventTimer(w Window, ts int64) {
	o.timers.RegisterEventTimeTimer(o.curKey, o.curKG, w, ts)
}

func (o *operator[K, T, OUT]) deleteEventTimer(w Window, ts int64) {
	o.timers.DeleteEventTimeTimer(o.curKey, o.curKG, w, ts)
}

func (o *operator[K, T, OUT]) registerProcTimer(w Window, ts int64) {
	o.timers.RegisterProcessingTimeTimer(o.curKey, o.curKG, w, ts)
}

func (o *operator[K, T, OUT]) deleteProcTimer(w Window, ts int64) {
	o.timers.DeleteProcessingTimeTimer(o.curKey, o.curKG, w, ts)
}

func (o *operator[K, T, OUT]) stateValue(i int, w Window) (int64, bool) {
	return o.trigStates[i].Value(w)
}

func (o *operator[K, T, OUT]) setStateValue(i int, w Window, v int64) { o.trigStates[i].Update(w, v) }

func (o *operator[K, T, OUT]) clearStateValue(i int, w Window) { o.trigStates[i].Clear(w) }

func (o *operator[K, T, OUT]) mergeStateValue(i int, target Window, sources []Window) {
	o.trigStates[i].MergeNamespaces(target, sources, o.trigMerge[i])
}
