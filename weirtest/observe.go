package weirtest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// EventKind says what an observed Event is.
type EventKind int

const (
	// RecordEvent is a record (Value, TS).
	RecordEvent EventKind = iota
	// WatermarkEvent is a watermark (TS).
	WatermarkEvent
	// IdleEvent is the idle status.
	IdleEvent
	// ActiveEvent is the active status.
	ActiveEvent
)

func (k EventKind) String() string {
	switch k {
	case RecordEvent:
		return "record"
	case WatermarkEvent:
		return "watermark"
	case IdleEvent:
		return "idle"
	case ActiveEvent:
		return "active"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one element an observer subtask received.
type Event[T any] struct {
	Kind  EventKind
	Value T     // of a record
	TS    int64 // timestamp of a record, or the watermark
}

func (e Event[T]) String() string {
	switch e.Kind {
	case RecordEvent:
		return fmt.Sprintf("%v@%s", e.Value, fmtTS(e.TS))
	case WatermarkEvent:
		return "W(" + fmtTS(e.TS) + ")"
	}
	return e.Kind.String()
}

func fmtTS(ts int64) string {
	switch ts {
	case watermark.Min:
		return "Min"
	case watermark.Max:
		return "Max"
	}
	return fmt.Sprint(ts)
}

// TB is the part of testing.TB (and of *rapid.T) that Check uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Options configure an observer.
type Options struct {
	// Name of the observer operator; "observe" if empty.
	Name string
	// Parallelism of the observer operator; 0 leaves the job default.
	// Setting it makes sense only where the observer is not fed by a
	// forward edge (see the package documentation).
	Parallelism int
}

// Observation is what an observer recorded, per subtask. It is safe to read
// while the job runs.
type Observation[T any] struct {
	name    string
	mu      sync.Mutex
	subs    [][]Event[T] // per subtask
	opened  int
	records int
	changed chan struct{} // closed and replaced on every change
}

// Observe ends s in an observer sink named "observe" and returns what it
// will record.
func Observe[T any](s weir.Stream[T]) *Observation[T] {
	return ObserveWith(s, Options{})
}

// ObserveWith is Observe with options.
func ObserveWith[T any](s weir.Stream[T], opts Options) *Observation[T] {
	if opts.Name == "" {
		opts.Name = "observe"
	}
	o := &Observation[T]{name: opts.Name, changed: make(chan struct{})}
	out := weir.Transform(s, opts.Name, func() runtime.OneInputOperator[T, struct{}] {
		return &observer[T]{o: o}
	})
	if opts.Parallelism > 0 {
		out.Parallelism(opts.Parallelism)
	}
	return o
}

// Name returns the observer operator's name.
func (o *Observation[T]) Name() string { return o.name }

func (o *Observation[T]) open(subtask, parallelism int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.subs) < parallelism {
		o.subs = append(o.subs, nil)
	}
	o.opened++
	o.notify()
}

func (o *Observation[T]) add(subtask int, e Event[T]) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.subs) <= subtask {
		o.subs = append(o.subs, nil)
	}
	o.subs[subtask] = append(o.subs[subtask], e)
	if e.Kind == RecordEvent {
		o.records++
	}
	o.notify()
}

// notify wakes WaitUntil; o.mu is held.
func (o *Observation[T]) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Subtasks returns the number of observer subtasks (known once the first
// one has opened).
func (o *Observation[T]) Subtasks() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.subs)
}

// Events returns a copy of what subtask received, in order.
func (o *Observation[T]) Events(subtask int) []Event[T] {
	o.mu.Lock()
	defer o.mu.Unlock()
	if subtask >= len(o.subs) {
		return nil
	}
	return append([]Event[T](nil), o.subs[subtask]...)
}

// Records returns every record received, subtask by subtask, each in
// arrival order.
func (o *Observation[T]) Records() []weir.Record[T] {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []weir.Record[T]
	for _, evs := range o.subs {
		for _, e := range evs {
			if e.Kind == RecordEvent {
				out = append(out, weir.Record[T]{Value: e.Value, Timestamp: e.TS})
			}
		}
	}
	return out
}

// Values returns the values of Records.
func (o *Observation[T]) Values() []T {
	recs := o.Records()
	out := make([]T, len(recs))
	for i, r := range recs {
		out[i] = r.Value
	}
	return out
}

// Len returns the number of records received by all subtasks.
func (o *Observation[T]) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.records
}

// Watermarks returns the watermarks subtask received, in order.
func (o *Observation[T]) Watermarks(subtask int) []int64 {
	var out []int64
	for _, e := range o.Events(subtask) {
		if e.Kind == WatermarkEvent {
			out = append(out, e.TS)
		}
	}
	return out
}

// Watermark returns the last watermark subtask received (watermark.Min if
// none).
func (o *Observation[T]) Watermark(subtask int) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if subtask >= len(o.subs) {
		return watermark.Min
	}
	evs := o.subs[subtask]
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == WatermarkEvent {
			return evs[i].TS
		}
	}
	return watermark.Min
}

// MinWatermark returns the lowest of the subtasks' last watermarks
// (watermark.Min before every subtask has opened and received one).
func (o *Observation[T]) MinWatermark() int64 {
	n := o.Subtasks()
	if n == 0 {
		return watermark.Min
	}
	m := watermark.Max
	for i := range n {
		m = min(m, o.Watermark(i))
	}
	return m
}

// WaitUntil blocks until cond returns true or ctx ends. cond is evaluated
// at once and after every change to the observation; it may call the
// Observation's methods.
func (o *Observation[T]) WaitUntil(ctx context.Context, cond func() bool) error {
	for {
		o.mu.Lock()
		ch := o.changed
		o.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("weirtest: observer %q: condition not reached: %w\n%s", o.name, ctx.Err(), o.Dump())
		}
	}
}

// WaitRecords blocks until at least n records have been received (by all
// subtasks together).
func (o *Observation[T]) WaitRecords(ctx context.Context, n int) error {
	return o.WaitUntil(ctx, func() bool { return o.Len() >= n })
}

// WaitWatermark blocks until subtask has received a watermark >= ts.
func (o *Observation[T]) WaitWatermark(ctx context.Context, subtask int, ts int64) error {
	return o.WaitUntil(ctx, func() bool { return o.Watermark(subtask) >= ts })
}

// WaitRecord blocks until some subtask has received a record for which
// match returns true.
func (o *Observation[T]) WaitRecord(ctx context.Context, match func(weir.Record[T]) bool) error {
	return o.WaitUntil(ctx, func() bool {
		for _, r := range o.Records() {
			if match(r) {
				return true
			}
		}
		return false
	})
}

// Violations returns a description of every violation of the event-time
// rules in what was observed so far, per subtask:
//
//   - a watermark not strictly above the watermark before it;
//   - a record whose timestamp is not above a watermark the subtask had
//     already received (a late record).
func (o *Observation[T]) Violations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for sub, evs := range o.subs {
		last, have := watermark.Min, false
		for i, e := range evs {
			switch e.Kind {
			case WatermarkEvent:
				if have && e.TS <= last {
					out = append(out, fmt.Sprintf("observer %q subtask %d event %d: watermark %s does not increase (previous %s)",
						o.name, sub, i, fmtTS(e.TS), fmtTS(last)))
				}
				if !have || e.TS > last {
					last, have = e.TS, true
				}
			case RecordEvent:
				if have && e.TS <= last {
					out = append(out, fmt.Sprintf("observer %q subtask %d event %d: late record %v with timestamp %s <= watermark %s",
						o.name, sub, i, e.Value, fmtTS(e.TS), fmtTS(last)))
				}
			}
		}
	}
	return out
}

// StatusViolations returns a description of every violation of the status
// rules, per subtask: statuses alternate, starting with idle (a subtask
// starts active), and no watermark arrives while the subtask is idle (a
// watermark that ends idleness comes after the active status).
func (o *Observation[T]) StatusViolations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for sub, evs := range o.subs {
		idle := false
		for i, e := range evs {
			switch e.Kind {
			case IdleEvent:
				if idle {
					out = append(out, fmt.Sprintf("observer %q subtask %d event %d: idle while idle", o.name, sub, i))
				}
				idle = true
			case ActiveEvent:
				if !idle {
					out = append(out, fmt.Sprintf("observer %q subtask %d event %d: active while active", o.name, sub, i))
				}
				idle = false
			case WatermarkEvent:
				if idle {
					out = append(out, fmt.Sprintf("observer %q subtask %d event %d: watermark %s while idle", o.name, sub, i, fmtTS(e.TS)))
				}
			}
		}
	}
	return out
}

// Check fails t (with Errorf) for every violation Violations reports.
func (o *Observation[T]) Check(t TB) {
	t.Helper()
	for _, v := range o.Violations() {
		t.Errorf("%s", v)
	}
}

// CheckFinal is Check plus: every subtask's last watermark is
// watermark.Max (the job's bounded inputs have all ended).
func (o *Observation[T]) CheckFinal(t TB) {
	t.Helper()
	o.Check(t)
	n := o.Subtasks()
	if n == 0 {
		t.Errorf("observer %q: no subtask opened", o.name)
	}
	for i := range n {
		if w := o.Watermark(i); w != watermark.Max {
			t.Errorf("observer %q subtask %d: final watermark %s, want Max", o.name, i, fmtTS(w))
		}
	}
}

// Dump returns what every subtask received, for failure messages.
func (o *Observation[T]) Dump() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	for sub, evs := range o.subs {
		fmt.Fprintf(&b, "%s[%d]:", o.name, sub)
		for _, e := range evs {
			b.WriteString(" ")
			b.WriteString(e.String())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// observer is the sink operator behind an Observation.
type observer[T any] struct {
	runtime.Base[struct{}]
	o *Observation[T]
}

func (x *observer[T]) Open(ctx *runtime.Context, out runtime.Output[struct{}]) error {
	x.Base.Open(ctx, out)
	x.o.open(ctx.Subtask, ctx.Parallelism)
	return nil
}

func (x *observer[T]) ProcessRecord(r runtime.Record[T]) error {
	x.o.add(x.Ctx.Subtask, Event[T]{Kind: RecordEvent, Value: r.Value, TS: r.Timestamp})
	return nil
}

func (x *observer[T]) ProcessWatermark(ts int64) error {
	x.o.add(x.Ctx.Subtask, Event[T]{Kind: WatermarkEvent, TS: ts})
	return nil
}

func (x *observer[T]) ProcessIdle(idle bool) error {
	k := ActiveEvent
	if idle {
		k = IdleEvent
	}
	x.o.add(x.Ctx.Subtask, Event[T]{Kind: k})
	return nil
}
