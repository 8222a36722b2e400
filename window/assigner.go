package window

import (
	"fmt"
	"time"
)

// Assigner decides which windows a record belongs to. It is Flink's
// WindowAssigner with the time domain and the merging capability folded in.
//
// The window operator calls AssignWindows once per record on the subtask
// goroutine; an Assigner must be safe to share between subtasks (the
// built-in ones are immutable values).
//
// Custom assigners may implement the interface. A merging assigner's
// windows are merged when they intersect (Window.Intersects, touching
// included), as Flink's TimeWindow.mergeWindows does.
type Assigner interface {
	// AssignWindows appends to dst the windows of a record and returns the
	// extended slice. t is the record's timestamp for an event-time
	// assigner and the current processing time (Unix ms) for a
	// processing-time one. Every window appended must contain t. dst is
	// scratch space owned by the caller: appending to it must not allocate
	// once it has grown to the assigner's largest count.
	AssignWindows(t int64, dst []Window) []Window
	// IsEventTime reports whether windows follow event time (the
	// watermark) rather than the processing-time clock.
	IsEventTime() bool
	// IsMerging reports whether windows of one key that intersect are
	// merged (sessions).
	IsMerging() bool
}

// rangeAssigner is implemented by assigners whose windows are the same for
// every timestamp of an interval (tumbling and sliding windows), so that the
// window operator keeps the windows of one record for the next ones while
// their timestamps stay in it, which ascending timestamps mostly do,
// instead of assigning again per record.
type rangeAssigner interface {
	// assignRange is AssignWindows that also returns an interval [lo, hi)
	// containing t over which AssignWindows appends the same windows.
	assignRange(t int64, dst []Window) (_ []Window, lo, hi int64)
}

// millis converts d to whole milliseconds, panicking (at job-build time)
// with a message naming the function and argument when d is not positive
// (allowZero: negative) or not a whole number of milliseconds.
func millis(fn, arg string, d time.Duration, allowZero bool) int64 {
	if d < 0 || (d == 0 && !allowZero) {
		want := "positive"
		if allowZero {
			want = "zero or positive"
		}
		panic(fmt.Sprintf("window: %s: %s must be %s, got %v", fn, arg, want, d))
	}
	if d%time.Millisecond != 0 {
		panic(fmt.Sprintf("window: %s: %s must be a whole number of milliseconds, got %v", fn, arg, d))
	}
	return d.Milliseconds()
}

// offsetMillis converts an offset, which may be negative but must be
// smaller than bound in absolute value.
func offsetMillis(fn string, offset time.Duration, bound int64, boundName string) int64 {
	if offset%time.Millisecond != 0 {
		panic(fmt.Sprintf("window: %s: offset must be a whole number of milliseconds, got %v", fn, offset))
	}
	o := offset.Milliseconds()
	if o <= -bound || o >= bound {
		panic(fmt.Sprintf("window: %s: offset %v must be smaller than the %s (%v) in absolute value",
			fn, offset, boundName, time.Duration(bound)*time.Millisecond))
	}
	return o
}

// tumbling assigns each timestamp to exactly one window of a fixed size.
type tumbling struct {
	size, offset int64
	eventTime    bool
}

// Tumbling returns an event-time assigner of back-to-back windows of the
// given size, aligned to the Unix epoch: [k*size, (k+1)*size). It panics if
// size is not a positive whole number of milliseconds.
func Tumbling(size time.Duration) Assigner {
	return tumbling{size: millis("Tumbling", "size", size, false), eventTime: true}
}

// TumblingWithOffset is Tumbling with windows shifted by offset:
// [k*size + offset, (k+1)*size + offset). Use it for windows aligned to a
// time zone (an hour or a day shifted by the zone's offset). It panics if
// size is not a positive whole number of milliseconds or if |offset| >= size.
func TumblingWithOffset(size, offset time.Duration) Assigner {
	s := millis("TumblingWithOffset", "size", size, false)
	return tumbling{size: s, offset: offsetMillis("TumblingWithOffset", offset, s, "size"), eventTime: true}
}

// TumblingProcessing is Tumbling in processing time: a record belongs to
// the window that contains the clock's time when the operator sees it, and
// the window fires when the clock reaches its MaxTimestamp.
func TumblingProcessing(size time.Duration) Assigner {
	return tumbling{size: millis("TumblingProcessing", "size", size, false)}
}

// AssignWindows appends the single window containing t.
func (a tumbling) AssignWindows(t int64, dst []Window) []Window {
	dst, _, _ = a.assignRange(t, dst)
	return dst
}

// assignRange implements rangeAssigner: the window itself.
func (a tumbling) assignRange(t int64, dst []Window) ([]Window, int64, int64) {
	s := startOf(t, a.offset, a.size)
	w := Window{Start: s, End: addSat(s, a.size)}
	return append(dst, w), s, w.End
}

// IsEventTime implements Assigner.
func (a tumbling) IsEventTime() bool { return a.eventTime }

// IsMerging implements Assigner.
func (a tumbling) IsMerging() bool { return false }

func (a tumbling) String() string {
	return fmt.Sprintf("Tumbling(size=%dms, offset=%dms, %s)", a.size, a.offset, domain(a.eventTime))
}

// sliding assigns each timestamp to every window of a fixed size that
// starts at a multiple of slide (plus offset) and contains it.
type sliding struct {
	size, slide, offset int64
	eventTime           bool
}

// Sliding returns an event-time assigner of windows of the given size that
// start every slide: a record belongs to every window
// [k*slide, k*slide + size) that contains it, ceil(size/slide) windows when
// slide divides size. A slide larger than size leaves gaps whose records
// belong to no window (and are dropped without being counted as late, as
// in Flink). It panics if size or slide is not a positive whole number of
// milliseconds.
func Sliding(size, slide time.Duration) Assigner {
	return sliding{size: millis("Sliding", "size", size, false), slide: millis("Sliding", "slide", slide, false), eventTime: true}
}

// SlidingWithOffset is Sliding with window starts shifted by offset. It
// panics if |offset| >= slide.
func SlidingWithOffset(size, slide, offset time.Duration) Assigner {
	s := millis("SlidingWithOffset", "slide", slide, false)
	return sliding{size: millis("SlidingWithOffset", "size", size, false), slide: s,
		offset: offsetMillis("SlidingWithOffset", offset, s, "slide"), eventTime: true}
}

// SlidingProcessing is Sliding in processing time.
func SlidingProcessing(size, slide time.Duration) Assigner {
	return sliding{size: millis("SlidingProcessing", "size", size, false), slide: millis("SlidingProcessing", "slide", slide, false)}
}

// AssignWindows appends the windows containing t, latest first.
func (a sliding) AssignWindows(t int64, dst []Window) []Window {
	dst, _, _ = a.assignRange(t, dst)
	return dst
}

// assignRange implements rangeAssigner. From t on, the windows stay the same
// until the next window starts (at the next multiple of slide) or the
// earliest one appended ends.
func (a sliding) assignRange(t int64, dst []Window) ([]Window, int64, int64) {
	s0 := startOf(t, a.offset, a.slide)
	hi := addSat(s0, a.slide)
	for s := s0; s > t-a.size; s -= a.slide {
		w := Window{Start: s, End: addSat(s, a.size)}
		dst = append(dst, w)
		hi = min(hi, w.End)
	}
	return dst, t, hi
}

// IsEventTime implements Assigner.
func (a sliding) IsEventTime() bool { return a.eventTime }

// IsMerging implements Assigner.
func (a sliding) IsMerging() bool { return false }

func (a sliding) String() string {
	return fmt.Sprintf("Sliding(size=%dms, slide=%dms, offset=%dms, %s)", a.size, a.slide, a.offset, domain(a.eventTime))
}

// session assigns [t, t+gap) and merges windows that intersect.
type session struct {
	gap       int64
	eventTime bool
}

// Session returns an event-time assigner of session windows: each record
// starts a window [t, t+gap), and the windows of one key that overlap or
// touch are merged, so a session ends once gap has passed without records
// of its key. Records exactly gap apart are in the same session. It panics
// if gap is not a positive whole number of milliseconds.
func Session(gap time.Duration) Assigner {
	return session{gap: millis("Session", "gap", gap, false), eventTime: true}
}

// SessionProcessing is Session in processing time.
func SessionProcessing(gap time.Duration) Assigner {
	return session{gap: millis("SessionProcessing", "gap", gap, false)}
}

// AssignWindows appends [t, t+gap).
func (a session) AssignWindows(t int64, dst []Window) []Window {
	return append(dst, Window{Start: t, End: addSat(t, a.gap)})
}

// IsEventTime implements Assigner.
func (a session) IsEventTime() bool { return a.eventTime }

// IsMerging implements Assigner.
func (a session) IsMerging() bool { return true }

func (a session) String() string {
	return fmt.Sprintf("Session(gap=%dms, %s)", a.gap, domain(a.eventTime))
}

func domain(eventTime bool) string {
	if eventTime {
		return "event time"
	}
	return "processing time"
}
