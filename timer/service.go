package timer

import (
	"fmt"
	"math"

	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/keygroup"
)

// Service is the timer service of one keyed operator subtask: one event-time
// queue driven by watermarks and one processing-time queue driven by the
// runtime's clock. It is not safe for concurrent use; it belongs to the
// subtask's mailbox goroutine.
type Service[K comparable, N comparable] struct {
	event     queue[K, N]
	proc      queue[K, N]
	store     Store   // NewServiceInStore; nil: the queues are Queues
	seq       *uint64 // registration counter of store queues
	watermark int64
	onHead    func(ts int64)

	firingEvent bool  // inside AdvanceWatermark
	firingProc  bool  // inside AdvanceProcessingTime
	procNow     int64 // the now of the running AdvanceProcessingTime pass

	kc codec.Codec[K] // key codec for snapshots (SetKeyCodec)
	nc codec.Codec[N] // namespace codec for snapshots (SetNamespaceCodec)
}

// NewService returns a timer service for the key groups of r, with the
// current watermark at math.MinInt64, no timers, and the default key and
// namespace codecs for snapshots (see NewServiceWithCodecs).
func NewService[K comparable, N comparable](r keygroup.Range) *Service[K, N] {
	return &Service[K, N]{
		event:     NewQueue[K, N](r),
		proc:      NewQueue[K, N](r),
		watermark: math.MinInt64,
		kc:        codec.Default[K](),
		nc:        codec.Default[N](),
	}
}

// queue is what a Service needs of its queues: Queue, or storeQueue for a
// service in a Store (store.go).
type queue[K comparable, N comparable] interface {
	Range() keygroup.Range
	Add(t Timer[K, N]) bool
	AddNew(t Timer[K, N])
	Remove(t Timer[K, N]) bool
	PeekTimestamp() (int64, bool)
	Poll() (Timer[K, N], bool)
	Len() int
	LenKeyGroup(kg int) int
	ForEachInKeyGroup(kg int, f func(Timer[K, N]))
}

// NewServiceInStore is NewServiceWithCodecs for a service whose timers live
// in st (the Pebble state backend's: state.Backend.TimerStore) rather than
// in memory, so that a job whose timers do not fit in memory runs. Memory
// holds a count and the first few timers of each key group (store.go). The
// codecs encode keys and namespaces in the store too, so they must be able
// to encode every registered key and namespace (a failure panics, naming
// the timer). The service assumes it is the only writer of st's timers;
// after their storage was replaced (a native restore), call Reload.
//
// I1 to I7 of the package hold as for NewService; the costs of
// I8 do not: Add and Remove read one store entry and write two,
// Poll deletes two (Peek and Contains of the first timers stay in memory),
// a refill of a key group's cache scans the store, and ForEachInKeyGroup
// and Reload scan it.
func NewServiceInStore[K comparable, N comparable](r keygroup.Range, st Store, kc codec.Codec[K], nc codec.Codec[N]) *Service[K, N] {
	if st == nil {
		panic("timer: NewServiceInStore needs a Store (use NewServiceWithCodecs for timers in memory)")
	}
	s := NewServiceWithCodecs[K, N](r, kc, nc)
	s.store, s.seq = st, new(uint64)
	s.event = newStoreQueue[K, N](r, st, tagEvent, &s.kc, &s.nc, s.seq)
	s.proc = newStoreQueue[K, N](r, st, tagProc, &s.kc, &s.nc, s.seq)
	return s
}

// InStore reports whether the service keeps its timers in a Store
// (NewServiceInStore).
func (s *Service[K, N]) InStore() bool { return s.store != nil }

// Reload rebuilds the in-memory part of a service in a Store from the
// store's timers, after the store was replaced under it (a native restore
// of the Pebble state backend, whose checkpoints carry the timers): the
// counts, the key groups' first timers and the registration counter. Then
// it calls the head-change callback with the earliest processing-time
// timer, if any, as RestoreKeyGroup would. The timers restored fire in
// (timestamp, registration order of the service that wrote them). It
// scans every timer once. A service in memory has nothing to reload.
func (s *Service[K, N]) Reload() error {
	if s.store == nil {
		return nil
	}
	var hi uint64
	for _, q := range []queue[K, N]{s.event, s.proc} {
		m, err := q.(*storeQueue[K, N]).reload()
		if err != nil {
			return err
		}
		hi = max(hi, m)
	}
	*s.seq = hi
	if ts, ok := s.proc.PeekTimestamp(); ok && s.onHead != nil {
		s.onHead(ts)
	}
	return nil
}

// RestoreKeyGroupFromStore adds the timers of key group kg that st holds in
// the layout of NewServiceInStore (a native snapshot of the Pebble state
// backend read back, when the timers are restored into memory), as
// RestoreKeyGroup adds those of a blob: in their firing order, all or
// nothing, an error on an entry the codecs cannot decode. st is not
// changed.
func (s *Service[K, N]) RestoreKeyGroupFromStore(kg int, st Store) error {
	if !s.Range().Contains(kg) {
		return fmt.Errorf("timer: cannot restore key group %d: outside this service's key-group range %v", kg, s.Range())
	}
	var lists [2][]Timer[K, N]
	for i, tag := range []byte{tagEvent, tagProc} {
		var err error
		st.Scan(kg, []byte{tag}, []byte{tag + 1}, func(k, v []byte) bool {
			var c cached[K, N]
			if c, err = decodeEntry(kg, k, v, s.kc, s.nc); err != nil {
				return false
			}
			lists[i] = append(lists[i], c.t)
			return true
		})
		if err != nil {
			return fmt.Errorf("timer: restoring key group %d from a store: %w", kg, err)
		}
	}
	for _, t := range lists[0] {
		s.RestoreEventTimeTimer(t)
	}
	for _, t := range lists[1] {
		s.RestoreProcessingTimeTimer(t)
	}
	return nil
}

// Range reports the key groups this service accepts.
func (s *Service[K, N]) Range() keygroup.Range { return s.event.Range() }

// CurrentWatermark reports the highest watermark passed to AdvanceWatermark,
// or math.MinInt64 before the first.
func (s *Service[K, N]) CurrentWatermark() int64 { return s.watermark }

// RegisterEventTimeTimer registers an event-time timer. Registering a timer
// that is already registered is a no-op. A timer at or below the current
// watermark is kept and fires on the next watermark advance.
func (s *Service[K, N]) RegisterEventTimeTimer(key K, kg int, ns N, ts int64) {
	s.event.Add(Timer[K, N]{Timestamp: ts, Key: key, KeyGroup: kg, Namespace: ns})
}

// RegisterNewEventTimeTimer registers an event-time timer the caller knows
// is not registered (Queue.AddNew): cheaper than RegisterEventTimeTimer,
// whose duplicate check touches the timestamp's index. The window operator
// uses it for the timers of a window's first record. Registering a timer
// that is registered already makes it fire twice.
func (s *Service[K, N]) RegisterNewEventTimeTimer(key K, kg int, ns N, ts int64) {
	s.event.AddNew(Timer[K, N]{Timestamp: ts, Key: key, KeyGroup: kg, Namespace: ns})
}

// DeleteEventTimeTimer deletes an event-time timer; deleting a missing timer
// is a no-op.
func (s *Service[K, N]) DeleteEventTimeTimer(key K, kg int, ns N, ts int64) {
	s.event.Remove(Timer[K, N]{Timestamp: ts, Key: key, KeyGroup: kg, Namespace: ns})
}

// RegisterProcessingTimeTimer registers a processing-time timer. Registering
// a timer that is already registered is a no-op. If the new timer becomes the
// earliest one, the head-change callback (see OnProcessingHeadChange) is
// called with its timestamp, except while an AdvanceProcessingTime pass that
// will fire it anyway is running.
func (s *Service[K, N]) RegisterProcessingTimeTimer(key K, kg int, ns N, ts int64) {
	s.addProc(Timer[K, N]{Timestamp: ts, Key: key, KeyGroup: kg, Namespace: ns})
}

// DeleteProcessingTimeTimer deletes a processing-time timer; deleting a
// missing timer is a no-op. Deleting the earliest timer does not call the
// head-change callback: the runtime's wake-up then finds nothing due, which
// is harmless.
func (s *Service[K, N]) DeleteProcessingTimeTimer(key K, kg int, ns N, ts int64) {
	s.proc.Remove(Timer[K, N]{Timestamp: ts, Key: key, KeyGroup: kg, Namespace: ns})
}

// RestoreEventTimeTimer adds a timer read from a snapshot. It is
// RegisterEventTimeTimer with the timer given whole.
func (s *Service[K, N]) RestoreEventTimeTimer(t Timer[K, N]) { s.event.Add(t) }

// RestoreProcessingTimeTimer adds a timer read from a snapshot. It is
// RegisterProcessingTimeTimer with the timer given whole, head-change callback
// included. Overdue timers fire on the next AdvanceProcessingTime; the runtime
// should schedule a wake-up for NextProcessingTime after a restore.
func (s *Service[K, N]) RestoreProcessingTimeTimer(t Timer[K, N]) { s.addProc(t) }

func (s *Service[K, N]) addProc(t Timer[K, N]) {
	oldHead, had := s.proc.PeekTimestamp()
	if !s.proc.Add(t) {
		return
	}
	if had && t.Timestamp >= oldHead {
		return
	}
	if s.firingProc && t.Timestamp <= s.procNow {
		return // the running pass fires it
	}
	if s.onHead != nil {
		s.onHead(t.Timestamp)
	}
}

// OnProcessingHeadChange sets f to be called with the new earliest
// processing-time timestamp whenever a registration makes the earliest
// processing-time timer earlier (or the queue goes from empty to non-empty),
// so the runtime reschedules its single wake-up only then. Removals and
// AdvanceProcessingTime never call f; after AdvanceProcessingTime returns the
// runtime schedules its next wake-up from NextProcessingTime. f may be nil.
func (s *Service[K, N]) OnProcessingHeadChange(f func(ts int64)) { s.onHead = f }

// AdvanceWatermark sets the current watermark to wm if wm is higher, then
// removes and fires, in ascending timestamp order, every event-time timer
// with Timestamp <= wm. Timers registered by fire that are due fire in the
// same pass; timers deleted by fire do not fire. A wm not above the current
// watermark is ignored (nothing fires). Every timer fires at most once. fire
// must not call AdvanceWatermark (it panics).
func (s *Service[K, N]) AdvanceWatermark(wm int64, fire func(Timer[K, N])) {
	if s.firingEvent {
		panic("timer: AdvanceWatermark called from inside an event-time timer callback")
	}
	if wm <= s.watermark {
		return
	}
	s.watermark = wm
	s.firingEvent = true
	defer func() { s.firingEvent = false }()
	for {
		ts, ok := s.event.PeekTimestamp()
		if !ok || ts > wm {
			if !ok || !mutant.On(mutant.TimerFiresEarly) || ts-1 > wm {
				return
			}
		}
		if mutant.On(mutant.TimerFiresLate) && ts == wm && wm < math.MaxInt64 {
			return
		}
		t, _ := s.event.Poll()
		fire(t)
	}
}

// AdvanceProcessingTime removes and fires, in ascending timestamp order,
// every processing-time timer with Timestamp <= now. Timers registered by
// fire with Timestamp <= now fire in the same pass. fire must not call
// AdvanceProcessingTime (it panics).
func (s *Service[K, N]) AdvanceProcessingTime(now int64, fire func(Timer[K, N])) {
	if s.firingProc {
		panic("timer: AdvanceProcessingTime called from inside a processing-time timer callback")
	}
	s.firingProc = true
	s.procNow = now
	defer func() { s.firingProc = false }()
	for {
		ts, ok := s.proc.PeekTimestamp()
		if !ok || ts > now {
			return
		}
		t, _ := s.proc.Poll()
		fire(t)
	}
}

// NextProcessingTime reports the timestamp of the earliest processing-time
// timer, so the runtime can schedule one wake-up.
func (s *Service[K, N]) NextProcessingTime() (int64, bool) { return s.proc.PeekTimestamp() }

// NextEventTime reports the timestamp of the earliest event-time timer.
func (s *Service[K, N]) NextEventTime() (int64, bool) { return s.event.PeekTimestamp() }

// NumEventTimeTimers reports the number of registered event-time timers.
func (s *Service[K, N]) NumEventTimeTimers() int { return s.event.Len() }

// NumProcessingTimeTimers reports the number of registered processing-time
// timers.
func (s *Service[K, N]) NumProcessingTimeTimers() int { return s.proc.Len() }

// NumTimersInKeyGroup reports the number of event-time and processing-time
// timers of key group kg. It panics if kg is outside the range.
func (s *Service[K, N]) NumTimersInKeyGroup(kg int) int {
	return s.event.LenKeyGroup(kg) + s.proc.LenKeyGroup(kg)
}

// ForEachEventTimeTimer calls f for every event-time timer of key group kg,
// in unspecified order (for snapshots). f must not register or delete timers.
func (s *Service[K, N]) ForEachEventTimeTimer(kg int, f func(Timer[K, N])) {
	s.event.ForEachInKeyGroup(kg, f)
}

// ForEachProcessingTimeTimer calls f for every processing-time timer of key
// group kg, in unspecified order (for snapshots). f must not register or
// delete timers.
func (s *Service[K, N]) ForEachProcessingTimeTimer(kg int, f func(Timer[K, N])) {
	s.proc.ForEachInKeyGroup(kg, f)
}
