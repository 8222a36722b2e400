package window

import "fmt"

// TriggerResult is what a Trigger decides for a window: Flink's
// TriggerResult. Fire emits the window's result from its current contents;
// Purge drops the contents (not the window: its timers, trigger state and
// cleanup stay); FireAndPurge does both, in that order.
type TriggerResult uint8

const (
	// Continue does nothing.
	Continue TriggerResult = iota
	// Fire emits the window's result and keeps its contents.
	Fire
	// Purge drops the window's contents without emitting.
	Purge
	// FireAndPurge emits the window's result, then drops its contents.
	FireAndPurge
)

// IsFire reports whether r emits the window (Fire, FireAndPurge).
func (r TriggerResult) IsFire() bool { return r == Fire || r == FireAndPurge }

// IsPurge reports whether r drops the window's contents (Purge,
// FireAndPurge).
func (r TriggerResult) IsPurge() bool { return r == Purge || r == FireAndPurge }

func (r TriggerResult) String() string {
	switch r {
	case Continue:
		return "CONTINUE"
	case Fire:
		return "FIRE"
	case Purge:
		return "PURGE"
	case FireAndPurge:
		return "FIRE_AND_PURGE"
	}
	return fmt.Sprintf("TriggerResult(%d)", uint8(r))
}

// Trigger decides when a window fires and when its contents are purged:
// Flink's Trigger. Set one with WithTrigger; without it the window operator
// uses the assigner's default (EventTimeTrigger for event-time assigners,
// ProcessingTimeTrigger for processing-time ones, NeverTrigger for Global),
// on a path specialised for it (see operator.go).
//
// Lifecycle, per key and window (the context's key and window are those of
// the call; ts values are Unix ms):
//
//   - OnElement for every record added to the window, after it was added,
//     with the record's timestamp (runtime.NoTimestamp if it has none; the
//     record itself through Element).
//   - OnEventTime when an event-time timer the trigger (or the operator's
//     cleanup) registered for the window is reached by the watermark;
//     OnProcessingTime likewise for processing-time timers and the clock.
//     The cleanup timer (see AllowedLateness) reaches the trigger too,
//     before the window's state is cleared.
//   - OnMerge when session windows merge, with the merged result as the
//     window and TriggerContext.MergedWindows naming the windows merged away; the
//     trigger re-registers the timers it needs for the result and merges
//     its state into it (TriggerContext.MergeValue). Clear is then called
//     for each merged-away window.
//   - Clear when the window's state is removed (its cleanup time, I5): the
//     trigger deletes the timers it registered and its state. The
//     operator clears the state named in States itself as well, so Clear
//     matters for timers.
//
// What a result does is described at TriggerResult; Fire on empty
// contents (after a Purge) emits nothing, as in Flink. Timers are
// deduplicated per (key, window, time).
//
// A trigger keeps per-window state only through the TriggerStates it
// declares in States: that state lives in the operator's keyed state, is
// checkpointed with the window contents and survives a restore, at any
// parallelism. A trigger value may serve several operators and subtasks at
// once, so it must not keep mutable fields of its own. All methods run on
// the operator's subtask goroutine; ctx is valid only during the call.
type Trigger interface {
	// OnElement is called for each record added to window w.
	OnElement(ts int64, w Window, ctx *TriggerContext) TriggerResult
	// OnEventTime is called when an event-time timer at time of w fires.
	OnEventTime(time int64, w Window, ctx *TriggerContext) TriggerResult
	// OnProcessingTime is called when a processing-time timer at time of w
	// fires.
	OnProcessingTime(time int64, w Window, ctx *TriggerContext) TriggerResult
	// CanMerge reports whether the trigger supports merging (session)
	// windows: a trigger whose CanMerge is false fails the job build with
	// a merging assigner.
	CanMerge() bool
	// OnMerge is called when windows merge into w (merging assigners
	// only).
	OnMerge(w Window, ctx *TriggerContext)
	// Clear removes what the trigger keeps for window w (timers, state).
	Clear(w Window, ctx *TriggerContext)
	// States declares the per-window state the trigger uses (nil if
	// none): the same *TriggerState values it passes to the context
	// (they are matched by identity). It is called when the operator is
	// built and when each subtask opens.
	States() []*TriggerState
}

// TriggerState declares one int64 a trigger keeps per key and window (a
// count, the next firing time), Flink's partitioned trigger state reduced
// to the value every built-in trigger of Flink keeps: the window operator
// stores it in its keyed state under the name "window-trigger/" + name, so
// it is checkpointed and restored with the windows. Read and write it
// through the TriggerContext of a call.
//
// Values are int64 rather than any type because the state is stored in a
// table typed by the operator's key type, which a trigger does not know;
// an int64 needs neither a codec nor an allocation per access.
type TriggerState struct {
	name  string
	merge func(a, b int64) int64
}

// NewTriggerState declares a trigger state. name must be unique among the
// states of one trigger (nested triggers included) and stable across
// versions of a job (it is in snapshots). merge combines the values of two
// windows when session windows merge (sum for a count, min for a next
// firing time); nil means the state cannot merge, which fails the job
// build with a merging assigner. It panics if name is empty.
func NewTriggerState(name string, merge func(a, b int64) int64) *TriggerState {
	if name == "" {
		panic("window: NewTriggerState: empty name")
	}
	return &TriggerState{name: name, merge: merge}
}

// Name returns the state's name.
func (s *TriggerState) Name() string { return s.name }

// SumInt64 and MinInt64 are the usual merge functions of trigger states.
func SumInt64(a, b int64) int64 { return a + b }

// MinInt64 returns the smaller of a and b (see SumInt64).
func MinInt64(a, b int64) int64 { return min(a, b) }

// triggerHost is what a TriggerContext needs of the window operator, for
// the current key and the given window. The operator is generic in the key
// type; the context is not, so that Trigger is not either.
type triggerHost interface {
	watermark() int64
	processingTime() int64
	registerEventTimer(w Window, ts int64)
	deleteEventTimer(w Window, ts int64)
	registerProcTimer(w Window, ts int64)
	deleteProcTimer(w Window, ts int64)
	stateValue(i int, w Window) (int64, bool)
	setStateValue(i int, w Window, v int64)
	clearStateValue(i int, w Window)
	mergeStateValue(i int, target Window, sources []Window)
}

// TriggerContext is what a Trigger call may do for its key and window:
// read the time, register and delete timers, and read and write its
// declared state. The window operator owns it; a trigger must not keep it
// after the call.
type TriggerContext struct {
	host   triggerHost
	states []*TriggerState // the trigger's declared states, by index
	w      Window
	merged []Window // OnMerge only: the windows merged away
	elem   any      // a *T holding the record of the current OnElement
	inElem bool
}

// CurrentWatermark returns the operator's current watermark.
func (c *TriggerContext) CurrentWatermark() int64 { return c.host.watermark() }

// CurrentProcessingTime returns the clock's time in Unix ms.
func (c *TriggerContext) CurrentProcessingTime() int64 { return c.host.processingTime() }

// RegisterEventTimeTimer asks for OnEventTime(ts) for this key and window
// once the watermark reaches ts (at once, at the next watermark, if it has
// already). A timer that exists already is not added twice.
func (c *TriggerContext) RegisterEventTimeTimer(ts int64) { c.host.registerEventTimer(c.w, ts) }

// DeleteEventTimeTimer removes the event-time timer at ts, if any.
func (c *TriggerContext) DeleteEventTimeTimer(ts int64) { c.host.deleteEventTimer(c.w, ts) }

// RegisterProcessingTimeTimer asks for OnProcessingTime(ts) for this key
// and window once the clock reaches ts.
func (c *TriggerContext) RegisterProcessingTimeTimer(ts int64) { c.host.registerProcTimer(c.w, ts) }

// DeleteProcessingTimeTimer removes the processing-time timer at ts, if
// any.
func (c *TriggerContext) DeleteProcessingTimeTimer(ts int64) { c.host.deleteProcTimer(c.w, ts) }

// Value returns s's value for this key and window, and whether it is set.
func (c *TriggerContext) Value(s *TriggerState) (int64, bool) {
	return c.host.stateValue(c.index(s), c.w)
}

// SetValue sets s's value for this key and window.
func (c *TriggerContext) SetValue(s *TriggerState, v int64) { c.host.setStateValue(c.index(s), c.w, v) }

// ClearValue unsets s for this key and window.
func (c *TriggerContext) ClearValue(s *TriggerState) { c.host.clearStateValue(c.index(s), c.w) }

// MergedWindows returns, during OnMerge, the windows merged into the
// current one (valid during the call only); nil otherwise.
func (c *TriggerContext) MergedWindows() []Window { return c.merged }

// MergeValue folds s's values of the merged windows into the current
// window with s's merge function (Flink's mergePartitionedState); the
// merged windows' values are dropped. Only during OnMerge.
func (c *TriggerContext) MergeValue(s *TriggerState) {
	if c.merged == nil {
		panic(fmt.Sprintf("window: TriggerContext.MergeValue(%q) outside OnMerge", s.name))
	}
	c.host.mergeStateValue(c.index(s), c.w, c.merged)
}

func (c *TriggerContext) index(s *TriggerState) int {
	for i, d := range c.states {
		if d == s {
			return i
		}
	}
	panic(fmt.Sprintf("window: trigger state %q was not declared in the trigger's States", s.name))
}

// Element returns the record of the current OnElement call; T must be the
// windowed stream's record type. It panics outside OnElement or with
// another type.
func Element[T any](c *TriggerContext) T {
	p, ok := c.elem.(*T)
	if !ok || !c.inElem {
		var zero T
		panic(fmt.Sprintf("window: Element[%T] called outside OnElement or with a type other than the window's records", zero))
	}
	return *p
}
