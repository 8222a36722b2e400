package timer

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir/keygroup"
)

// window is a namespace like a time window.
type window struct{ Start, End int64 }

func ms(hh, mm, ss int) int64 {
	return time.Date(2024, 1, 1, hh, mm, ss, 0, time.UTC).UnixMilli()
}

func TestSetSemantics(t *testing.T) {
	s := NewService[string, int](keygroup.Range{Start: 0, End: 9})
	s.RegisterEventTimeTimer("a", 3, 0, 100)
	s.RegisterEventTimeTimer("a", 3, 0, 100)
	if n := s.NumEventTimeTimers(); n != 1 {
		t.Fatalf("registered twice: %d timers, want 1", n)
	}
	s.RegisterEventTimeTimer("a", 3, 1, 100) // other namespace
	s.RegisterEventTimeTimer("b", 4, 0, 100) // other key
	s.RegisterEventTimeTimer("a", 3, 0, 101) // other timestamp
	if n := s.NumEventTimeTimers(); n != 4 {
		t.Fatalf("%d timers, want 4", n)
	}
	s.DeleteEventTimeTimer("zzz", 5, 0, 100) // missing: no-op
	s.DeleteEventTimeTimer("a", 3, 0, 999)   // missing: no-op
	if n := s.NumEventTimeTimers(); n != 4 {
		t.Fatalf("after deleting missing timers: %d timers, want 4", n)
	}
	s.DeleteEventTimeTimer("a", 3, 0, 100)
	s.DeleteEventTimeTimer("a", 3, 0, 100)
	if n := s.NumEventTimeTimers(); n != 3 {
		t.Fatalf("after delete: %d timers, want 3", n)
	}

	// The same for processing time, which is a separate queue.
	s.RegisterProcessingTimeTimer("a", 3, 0, 100)
	s.RegisterProcessingTimeTimer("a", 3, 0, 100)
	s.DeleteProcessingTimeTimer("a", 3, 7, 100)
	if n := s.NumProcessingTimeTimers(); n != 1 {
		t.Fatalf("processing: %d timers, want 1", n)
	}
	if n := s.NumEventTimeTimers(); n != 3 {
		t.Fatalf("event queue changed by processing-time ops: %d", n)
	}

	var fired int
	s.AdvanceWatermark(1000, func(Timer[string, int]) { fired++ })
	if fired != 3 {
		t.Fatalf("fired %d, want 3 (duplicates must collapse)", fired)
	}
}

// The seed's example: timers for user_A at 12:10:00, user_B at 12:10:05 and
// user_C at 12:10:00 in a window namespace; a watermark jump to 12:11 fires
// all three in timestamp order.
func TestWatermarkJumpFiresAscending(t *testing.T) {
	s := NewService[string, window](keygroup.Range{Start: 0, End: 127})
	w := window{Start: ms(12, 9, 0), End: ms(12, 10, 0)}
	s.RegisterEventTimeTimer("user_B", 20, w, ms(12, 10, 5))
	s.RegisterEventTimeTimer("user_A", 10, w, ms(12, 10, 0))
	s.RegisterEventTimeTimer("user_C", 30, w, ms(12, 10, 0))
	s.RegisterEventTimeTimer("user_D", 40, w, ms(12, 11, 1)) // not due

	if wm := s.CurrentWatermark(); wm != math.MinInt64 {
		t.Fatalf("initial watermark %d, want MinInt64", wm)
	}
	var got []Timer[string, window]
	s.AdvanceWatermark(ms(12, 11, 0), func(tm Timer[string, window]) {
		// The watermark is set before any timer fires.
		if s.CurrentWatermark() != ms(12, 11, 0) {
			t.Errorf("watermark during firing = %d", s.CurrentWatermark())
		}
		got = append(got, tm)
	})
	if len(got) != 3 {
		t.Fatalf("fired %d timers, want 3: %v", len(got), got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Timestamp < got[i-1].Timestamp {
			t.Fatalf("not ascending: %v", got)
		}
	}
	keys := []string{got[0].Key, got[1].Key}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"user_A", "user_C"}) || got[2].Key != "user_B" {
		t.Fatalf("fired %v", got)
	}
	for _, tm := range got {
		if tm.Namespace != w {
			t.Fatalf("namespace lost: %v", tm)
		}
	}
	if s.NumEventTimeTimers() != 1 {
		t.Fatalf("%d timers left, want 1", s.NumEventTimeTimers())
	}

	// A watermark that does not advance is ignored and fires nothing twice.
	s.AdvanceWatermark(ms(12, 10, 30), func(tm Timer[string, window]) { t.Fatalf("fired %v", tm) })
	s.AdvanceWatermark(ms(12, 11, 0), func(tm Timer[string, window]) { t.Fatalf("fired %v", tm) })
	if s.CurrentWatermark() != ms(12, 11, 0) {
		t.Fatalf("watermark went backwards: %d", s.CurrentWatermark())
	}
}

func TestTimersRegisteredWhileFiring(t *testing.T) {
	s := NewService[string, int](keygroup.Range{Start: 0, End: 3})
	s.RegisterEventTimeTimer("k", 1, 0, 10)
	s.RegisterEventTimeTimer("k", 1, 0, 20)
	s.RegisterEventTimeTimer("k", 2, 9, 30) // deleted by a callback
	var got []int64
	s.AdvanceWatermark(50, func(tm Timer[string, int]) {
		got = append(got, tm.Timestamp)
		switch tm.Timestamp {
		case 10:
			s.RegisterEventTimeTimer("k", 1, 1, 15) // due, fires in this pass
			s.RegisterEventTimeTimer("k", 1, 1, 60) // not due
			s.DeleteEventTimeTimer("k", 2, 9, 30)
		case 15:
			s.RegisterEventTimeTimer("k", 1, 2, 50) // due (== wm)
			s.RegisterEventTimeTimer("k", 1, 2, 5)  // due, in the past
		}
	})
	want := []int64{10, 15, 5, 20, 50}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if ts, ok := s.NextEventTime(); !ok || ts != 60 || s.NumEventTimeTimers() != 1 {
		t.Fatalf("left: next %d %v, n %d", ts, ok, s.NumEventTimeTimers())
	}

	// Processing time behaves the same way.
	s.RegisterProcessingTimeTimer("k", 0, 0, 100)
	got = got[:0]
	s.AdvanceProcessingTime(150, func(tm Timer[string, int]) {
		got = append(got, tm.Timestamp)
		if tm.Timestamp == 100 {
			s.RegisterProcessingTimeTimer("k", 0, 0, 140) // due
			s.RegisterProcessingTimeTimer("k", 0, 0, 200) // not due
		}
	})
	if !slices.Equal(got, []int64{100, 140}) {
		t.Fatalf("processing fired %v", got)
	}
	if ts, ok := s.NextProcessingTime(); !ok || ts != 200 {
		t.Fatalf("next processing time %d %v", ts, ok)
	}
}

func TestReentrantAdvancePanics(t *testing.T) {
	s := NewService[string, int](keygroup.Range{Start: 0, End: 0})
	s.RegisterEventTimeTimer("k", 0, 0, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	s.AdvanceWatermark(5, func(Timer[string, int]) { s.AdvanceWatermark(6, func(Timer[string, int]) {}) })
}

func TestKeyGroupOutOfRangePanics(t *testing.T) {
	s := NewService[string, int](keygroup.Range{Start: 10, End: 19})
	for _, kg := range []int{9, 20, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("kg %d: no panic", kg)
				}
			}()
			s.RegisterEventTimeTimer("k", kg, 0, 1)
		}()
	}
}

func TestPerKeyGroupIteration(t *testing.T) {
	r := keygroup.Range{Start: 4, End: 7}
	s := NewService[string, int](r)
	type key struct {
		k  string
		kg int
	}
	keys := []key{{"a", 4}, {"b", 5}, {"c", 5}, {"d", 7}}
	for i, k := range keys {
		s.RegisterEventTimeTimer(k.k, k.kg, 0, int64(i))
		s.RegisterEventTimeTimer(k.k, k.kg, 1, int64(i))
		s.RegisterProcessingTimeTimer(k.k, k.kg, 0, int64(100+i))
	}
	count := func(kg int, each func(int, func(Timer[string, int]))) map[string]int {
		m := map[string]int{}
		each(kg, func(tm Timer[string, int]) {
			if tm.KeyGroup != kg {
				t.Errorf("kg %d yielded timer of kg %d", kg, tm.KeyGroup)
			}
			m[tm.Key]++
		})
		return m
	}
	ev := map[int]map[string]int{4: {"a": 2}, 5: {"b": 2, "c": 2}, 6: {}, 7: {"d": 2}}
	pt := map[int]map[string]int{4: {"a": 1}, 5: {"b": 1, "c": 1}, 6: {}, 7: {"d": 1}}
	for kg := r.Start; kg <= r.End; kg++ {
		if got := count(kg, s.ForEachEventTimeTimer); !mapsEqual(got, ev[kg]) {
			t.Errorf("event kg %d: %v, want %v", kg, got, ev[kg])
		}
		if got := count(kg, s.ForEachProcessingTimeTimer); !mapsEqual(got, pt[kg]) {
			t.Errorf("processing kg %d: %v, want %v", kg, got, pt[kg])
		}
	}
	// Fired timers leave their key group's index.
	s.AdvanceWatermark(1, func(Timer[string, int]) {})
	if got := count(5, s.ForEachEventTimeTimer); !mapsEqual(got, map[string]int{"c": 2}) {
		t.Errorf("after firing: kg 5 %v", got)
	}

	// Restoring the iterated timers into a fresh service reproduces them.
	s2 := NewService[string, int](r)
	for kg := r.Start; kg <= r.End; kg++ {
		s.ForEachEventTimeTimer(kg, s2.RestoreEventTimeTimer)
		s.ForEachProcessingTimeTimer(kg, s2.RestoreProcessingTimeTimer)
	}
	if s2.NumEventTimeTimers() != s.NumEventTimeTimers() || s2.NumProcessingTimeTimers() != s.NumProcessingTimeTimers() {
		t.Fatalf("restore: %d/%d vs %d/%d", s2.NumEventTimeTimers(), s2.NumProcessingTimeTimers(),
			s.NumEventTimeTimers(), s.NumProcessingTimeTimers())
	}
	if ts, _ := s2.NextProcessingTime(); ts != 100 {
		t.Fatalf("restored head %d", ts)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestProcessingHeadChange(t *testing.T) {
	s := NewService[string, int](keygroup.Range{Start: 0, End: 0})
	var heads []int64
	s.OnProcessingHeadChange(func(ts int64) { heads = append(heads, ts) })

	s.RegisterProcessingTimeTimer("a", 0, 0, 100) // empty -> 100
	s.RegisterProcessingTimeTimer("a", 0, 0, 200) // later: no call
	s.RegisterProcessingTimeTimer("a", 0, 0, 100) // duplicate: no call
	s.RegisterProcessingTimeTimer("b", 0, 0, 100) // equal to head: no call
	s.RegisterProcessingTimeTimer("a", 0, 0, 50)  // earlier: call
	s.DeleteProcessingTimeTimer("a", 0, 0, 50)    // removal: no call
	s.RegisterEventTimeTimer("a", 0, 0, 1)        // event time: no call
	if !slices.Equal(heads, []int64{100, 50}) {
		t.Fatalf("head changes %v, want [100 50]", heads)
	}
	if ts, ok := s.NextProcessingTime(); !ok || ts != 100 {
		t.Fatalf("next %d %v", ts, ok)
	}

	heads = nil
	s.DeleteProcessingTimeTimer("b", 0, 0, 100) // queue: a@100, a@200
	s.AdvanceProcessingTime(150, func(tm Timer[string, int]) {
		if tm.Timestamp == 100 {
			s.RegisterProcessingTimeTimer("c", 0, 0, 170) // earlier than 200 and not due: call
			s.RegisterProcessingTimeTimer("c", 0, 0, 120) // fires in this pass: no call
		}
	})
	if !slices.Equal(heads, []int64{170}) {
		t.Fatalf("head changes during pass %v, want [170]", heads)
	}
	if ts, ok := s.NextProcessingTime(); !ok || ts != 170 {
		t.Fatalf("next %d %v", ts, ok)
	}
	heads = nil
	s.AdvanceProcessingTime(1000, func(Timer[string, int]) {})
	if _, ok := s.NextProcessingTime(); ok || len(heads) != 0 {
		t.Fatalf("queue should be empty, heads %v", heads)
	}
	s.RegisterProcessingTimeTimer("a", 0, 0, 5) // overdue, but still a new head
	if !slices.Equal(heads, []int64{5}) {
		t.Fatalf("heads %v", heads)
	}
}

func TestFiringIsDeterministic(t *testing.T) {
	run := func() []string {
		s := NewService[string, int](keygroup.Range{Start: 0, End: 15})
		for i := range 200 {
			k := string(rune('a' + i%26))
			s.RegisterEventTimeTimer(k, i%16, i%3, int64(i%7))
			if i%5 == 0 {
				s.DeleteEventTimeTimer(k, i%16, (i+1)%3, int64((i+3)%7))
			}
		}
		var out []string
		s.AdvanceWatermark(100, func(tm Timer[string, int]) {
			out = append(out, tm.Key+string(rune('0'+tm.Namespace))+string(rune('0'+tm.Timestamp)))
		})
		return out
	}
	a := run()
	for range 5 {
		if b := run(); !slices.Equal(a, b) {
			t.Fatalf("firing order differs between identical runs")
		}
	}
}
