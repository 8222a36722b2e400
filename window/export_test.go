package window

// Stats is what a window operator subtask holds after a watermark.
type Stats = stats

// Contents, SessionKeys, EventTimers and ProcTimers expose the counts.
func (s Stats) Contents() int    { return s.contents }
func (s Stats) SessionKeys() int { return s.sessionKeys }
func (s Stats) EventTimers() int { return s.eventTimers }
func (s Stats) ProcTimers() int  { return s.procTimers }

// TriggerState counts the (key, window) values of trigger states.
func (s Stats) TriggerState() int { return s.triggerState }

// SetWatermarkHook installs f (nil removes it); call it before the job
// starts and remove it after the job ended.
func SetWatermarkHook(f func(op string, subtask int, wm int64, s Stats)) { testHookWatermark = f }
