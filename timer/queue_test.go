package timer

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

type tmr = Timer[string, int]

// model is a sorted-slice model of Queue: sorted by timestamp, set semantics
// on (Timestamp, Key, Namespace).
type model struct{ ts []tmr }

func (m *model) find(t tmr) int {
	for i, x := range m.ts {
		if x.Timestamp == t.Timestamp && x.Key == t.Key && x.Namespace == t.Namespace {
			return i
		}
	}
	return -1
}

func (m *model) add(t tmr) bool {
	if m.find(t) >= 0 {
		return false
	}
	i, _ := slices.BinarySearchFunc(m.ts, t.Timestamp, func(x tmr, ts int64) int {
		if x.Timestamp <= ts {
			return -1
		}
		return 1
	})
	m.ts = slices.Insert(m.ts, i, t)
	return true
}

func (m *model) remove(t tmr) bool {
	i := m.find(t)
	if i < 0 {
		return false
	}
	m.ts = slices.Delete(m.ts, i, i+1)
	return true
}

// keyGroupOf is a stand-in key-group assignment: a function of the key.
func keyGroupOf(key string) int { return 2 + int(key[0]-'a')%4 }

func TestQueueMatchesModel(t *testing.T) {
	r := keygroup.Range{Start: 2, End: 5}
	rapid.Check(t, func(rt *rapid.T) {
		q := NewQueue[string, int](r)
		m := &model{}
		genTimer := rapid.Custom(func(rt *rapid.T) tmr {
			key := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f"}).Draw(rt, "key")
			return tmr{
				Timestamp: rapid.Int64Range(-3, 12).Draw(rt, "ts"),
				Key:       key,
				KeyGroup:  keyGroupOf(key),
				Namespace: rapid.IntRange(0, 2).Draw(rt, "ns"),
			}
		})
		// pick returns a queued timer most of the time, so removes hit.
		pick := func(rt *rapid.T) tmr {
			if len(m.ts) > 0 && rapid.Bool().Draw(rt, "existing") {
				return m.ts[rapid.IntRange(0, len(m.ts)-1).Draw(rt, "i")]
			}
			return genTimer.Draw(rt, "timer")
		}
		rt.Repeat(map[string]func(*rapid.T){
			"add": func(rt *rapid.T) {
				tm := pick(rt)
				if got, want := q.Add(tm), m.add(tm); got != want {
					rt.Fatalf("Add(%v) = %v, want %v", tm, got, want)
				}
			},
			"remove": func(rt *rapid.T) {
				tm := pick(rt)
				if got, want := q.Remove(tm), m.remove(tm); got != want {
					rt.Fatalf("Remove(%v) = %v, want %v", tm, got, want)
				}
			},
			"poll": func(rt *rapid.T) {
				got, ok := q.Poll()
				if ok != (len(m.ts) > 0) {
					rt.Fatalf("Poll ok = %v with %d timers in model", ok, len(m.ts))
				}
				if !ok {
					return
				}
				// Ties are unordered: the polled timer must be a queued one
				// with the minimum timestamp.
				if got.Timestamp != m.ts[0].Timestamp {
					rt.Fatalf("Poll = %v, want timestamp %d", got, m.ts[0].Timestamp)
				}
				if !m.remove(got) {
					rt.Fatalf("Poll returned %v, which is not queued", got)
				}
			},
			"": func(rt *rapid.T) { // invariants, checked after every step
				if q.Len() != len(m.ts) {
					rt.Fatalf("Len = %d, model %d", q.Len(), len(m.ts))
				}
				p, ok := q.Peek()
				if ok != (len(m.ts) > 0) || (ok && p.Timestamp != m.ts[0].Timestamp) {
					rt.Fatalf("Peek = %v %v, model head %v", p, ok, m.ts)
				}
				for kg := r.Start; kg <= r.End; kg++ {
					var got []string
					q.ForEachInKeyGroup(kg, func(x tmr) {
						if q.Contains(x) == false {
							rt.Fatalf("ForEachInKeyGroup yielded %v which Contains denies", x)
						}
						got = append(got, fmt.Sprint(x))
					})
					var want []string
					for _, x := range m.ts {
						if x.KeyGroup == kg {
							want = append(want, fmt.Sprint(x))
						}
					}
					slices.Sort(got)
					slices.Sort(want)
					if !slices.Equal(got, want) {
						rt.Fatalf("kg %d: %v, want %v", kg, got, want)
					}
					if q.LenKeyGroup(kg) != len(want) {
						rt.Fatalf("LenKeyGroup(%d) = %d, want %d", kg, q.LenKeyGroup(kg), len(want))
					}
				}
				checkHeap(rt, q)
			},
		})
		// Drain: ascending timestamps, and everything comes out.
		prev := int64(-1 << 62)
		for range len(m.ts) {
			x, ok := q.Poll()
			if !ok || x.Timestamp < prev || !m.remove(x) {
				rt.Fatalf("drain: %v %v (prev %d)", x, ok, prev)
			}
			prev = x.Timestamp
		}
		if q.Len() != 0 {
			rt.Fatalf("queue not empty after drain")
		}
	})
}

// checkHeap verifies the heap property and the node back-pointers.
func checkHeap(rt *rapid.T, q *Queue[string, int]) {
	for i, e := range q.heap {
		if i > 0 && q.heap[(i-1)/2].ts > e.ts {
			rt.Fatalf("heap property violated at %d", i)
		}
		if int(q.pos[e.node]) != i || q.timers[e.node].Timestamp != e.ts {
			rt.Fatalf("node %d: pos %d ts %d, slot %d ts %d", e.node, q.pos[e.node], q.timers[e.node].Timestamp, i, e.ts)
		}
	}
	if len(q.timers) != len(q.heap)+len(q.free) || len(q.pos) != len(q.timers) {
		rt.Fatalf("node leak: %d nodes, %d queued, %d free", len(q.timers), len(q.heap), len(q.free))
	}
}

func TestQueueRemoveAndContainsOutOfRange(t *testing.T) {
	q := NewQueue[string, int](keygroup.Range{Start: 0, End: 1})
	if q.Remove(tmr{Timestamp: 1, Key: "x", KeyGroup: 1}) {
		t.Fatal("removed a missing timer")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for key group outside the range")
		}
	}()
	q.Remove(tmr{Timestamp: 1, Key: "x", KeyGroup: 2})
}

// BenchmarkQueueAddPoll measures a steady state of one add and one poll on a
// queue holding 10k timers (0 allocs/op expected).
func BenchmarkQueueAddPoll(b *testing.B) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	q := NewQueue[string, int64](keygroup.Range{Start: 0, End: 127})
	for i := range n {
		q.Add(Timer[string, int64]{Timestamp: int64(i), Key: keys[i], KeyGroup: i % 128})
	}
	b.ReportAllocs()
	b.ResetTimer()
	ts := int64(n)
	for i := 0; b.Loop(); i++ {
		t, _ := q.Poll()
		t.Timestamp = ts + int64(i%1000)
		ts++
		q.Add(t)
	}
}

// BenchmarkServiceRegisterDelete registers and deletes a timer for an
// existing key against 10k queued timers (window triggers do this per record).
func BenchmarkServiceRegisterDelete(b *testing.B) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	s := NewService[string, int64](keygroup.Range{Start: 0, End: 127})
	for i := range n {
		s.RegisterEventTimeTimer(keys[i], i%128, 0, int64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := i % n
		s.RegisterEventTimeTimer(keys[k], k%128, 1, int64(k+5000))
		s.DeleteEventTimeTimer(keys[k], k%128, 1, int64(k+5000))
	}
}

// BenchmarkAdvanceWatermark fires 1 timer and registers its successor per op.
func BenchmarkAdvanceWatermark(b *testing.B) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	s := NewService[string, int64](keygroup.Range{Start: 0, End: 127})
	for i := range n {
		s.RegisterEventTimeTimer(keys[i], i%128, 0, int64(i))
	}
	fire := func(t Timer[string, int64]) {
		s.RegisterEventTimeTimer(t.Key, t.KeyGroup, t.Namespace, t.Timestamp+n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for wm := int64(0); b.Loop(); wm++ {
		s.AdvanceWatermark(wm, fire)
	}
}
