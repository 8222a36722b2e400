package timer

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"testing"

	"github.com/weirproject/weir/internal/keyhash"
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
	checkQueueModel(t, heapQueue, []string{"a", "b", "c", "d", "e", "f"}, -3, 12, 2, 0)
}

// heapQueue makes a Queue and its invariant check, for checkQueueModel.
func heapQueue(r keygroup.Range) (queue[string, int], func(*rapid.T)) {
	q := NewQueue[string, int](r)
	return q, func(rt *rapid.T) { checkQueue(rt, q) }
}

// TestQueueMatchesModelCrowded crowds many identities into few timestamps, so
// that buckets outgrow the scan (index) and lose many timers (compaction).
func TestQueueMatchesModelCrowded(t *testing.T) {
	var keys []string
	for c := 'a'; c <= 'h'; c++ {
		for i := range 6 {
			keys = append(keys, fmt.Sprintf("%c%d", c, i))
		}
	}
	checkQueueModel(t, heapQueue, keys, 0, 2, 1, 3*scanMax)
}

// checkQueueModel runs random operations on a Queue and the model, with
// timers of the given keys, timestamps in [tsMin, tsMax] and namespaces in
// [0, nsMax], and bursts of up to burst adds.
func checkQueueModel(t *testing.T, mk func(keygroup.Range) (queue[string, int], func(*rapid.T)), keys []string, tsMin, tsMax int64, nsMax, burst int) {
	r := keygroup.Range{Start: 2, End: 5}
	rapid.Check(t, func(rt *rapid.T) {
		q, check := mk(r)
		type peeker interface {
			Peek() (tmr, bool)
			Contains(tmr) bool
		}
		qp := q.(peeker)
		m := &model{}
		genTimer := rapid.Custom(func(rt *rapid.T) tmr {
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			return tmr{
				Timestamp: rapid.Int64Range(tsMin, tsMax).Draw(rt, "ts"),
				Key:       key,
				KeyGroup:  keyGroupOf(key),
				Namespace: rapid.IntRange(0, nsMax).Draw(rt, "ns"),
			}
		})
		// pick returns a queued timer most of the time, so removes hit.
		pick := func(rt *rapid.T) tmr {
			if len(m.ts) > 0 && rapid.Bool().Draw(rt, "existing") {
				return m.ts[rapid.IntRange(0, len(m.ts)-1).Draw(rt, "i")]
			}
			return genTimer.Draw(rt, "timer")
		}
		actions := map[string]func(*rapid.T){
			"add": func(rt *rapid.T) {
				tm := pick(rt)
				if got, want := q.Add(tm), m.add(tm); got != want {
					rt.Fatalf("Add(%v) = %v, want %v", tm, got, want)
				}
			},
			"addNew": func(rt *rapid.T) {
				// AddNew's precondition: the timer is not queued.
				if tm := genTimer.Draw(rt, "timer"); m.add(tm) {
					q.AddNew(tm)
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
				// Ties come out in the order they were added (the model
				// inserts after equal timestamps).
				if got != m.ts[0] {
					rt.Fatalf("Poll = %v, want %v", got, m.ts[0])
				}
				if !m.remove(got) {
					rt.Fatalf("Poll returned %v, which is not queued", got)
				}
			},
			"": func(rt *rapid.T) { // invariants, checked after every step
				check(rt) // first: Contains below settles the buckets
				if q.Len() != len(m.ts) {
					rt.Fatalf("Len = %d, model %d", q.Len(), len(m.ts))
				}
				p, ok := qp.Peek()
				if ok != (len(m.ts) > 0) || (ok && p.Timestamp != m.ts[0].Timestamp) {
					rt.Fatalf("Peek = %v %v, model head %v", p, ok, m.ts)
				}
				for kg := r.Start; kg <= r.End; kg++ {
					var got []string
					q.ForEachInKeyGroup(kg, func(x tmr) {
						if qp.Contains(x) == false {
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
					// In firing order.
					if !slices.Equal(got, want) {
						rt.Fatalf("kg %d: %v, want %v", kg, got, want)
					}
					if q.LenKeyGroup(kg) != len(want) {
						rt.Fatalf("LenKeyGroup(%d) = %d, want %d", kg, q.LenKeyGroup(kg), len(want))
					}
				}
				check(rt)
			},
		}
		if burst > 0 {
			actions["addBurst"] = func(rt *rapid.T) {
				for range rapid.IntRange(0, burst).Draw(rt, "burst") {
					tm := genTimer.Draw(rt, "timer")
					if got, want := q.Add(tm), m.add(tm); got != want {
						rt.Fatalf("Add(%v) = %v, want %v", tm, got, want)
					}
				}
			}
			actions["addNewBurst"] = func(rt *rapid.T) {
				for range rapid.IntRange(0, burst).Draw(rt, "burst") {
					if tm := genTimer.Draw(rt, "timer"); m.add(tm) {
						q.AddNew(tm)
					}
				}
			}
		}
		rt.Repeat(actions)
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

// checkQueue verifies the invariants stated at the top of queue.go.
func checkQueue(rt *rapid.T, q *Queue[string, int]) {
	n := 0
	perKG := make([]int32, len(q.perKG))
	if len(q.byTs) != len(q.heap) {
		rt.Fatalf("%d timestamps mapped, %d buckets queued", len(q.byTs), len(q.heap))
	}
	for i, h := range q.heap {
		b := h.b
		if h.ts != b.ts || i > 0 && q.heap[(i-1)/2].ts > b.ts {
			rt.Fatalf("heap property violated at %d", i)
		}
		if b.hpos != i || q.byTs[b.ts] != b {
			rt.Fatalf("bucket %d: hpos %d, mapped %v", b.ts, b.hpos, q.byTs[b.ts] == b)
		}
		if b.live == 0 || b.head >= len(b.timers) || b.timers[b.head].KeyGroup == deadKeyGroup {
			rt.Fatalf("bucket %d: live %d, head %d of %d not live", b.ts, b.live, b.head, len(b.timers))
		}
		if b.lazyFrom > len(b.timers) {
			rt.Fatalf("bucket %d: lazyFrom %d beyond %d timers", b.ts, b.lazyFrom, len(b.timers))
		}
		if settled := min(b.lazyFrom, len(b.timers)); !b.indexed && settled-b.head > scanMax {
			rt.Fatalf("bucket %d: %d settled slots and no index", b.ts, settled-b.head)
		}
		live, dead := 0, 0
		for p := b.head; p < len(b.timers); p++ {
			t := b.timers[p]
			if t.KeyGroup == deadKeyGroup {
				dead++
				continue
			}
			live++
			perKG[t.KeyGroup-q.rng.Start]++
			if p >= b.lazyFrom {
				continue // not indexed yet (AddNew): settle brings it in
			}
			if got := b.find(b.hashFor(t.Key), t.Key, t.Namespace); got != p {
				rt.Fatalf("bucket %d: find(%v) = %d, want %d", b.ts, t, got, p)
			}
		}
		if live != b.live || dead != b.dead {
			rt.Fatalf("bucket %d: live %d dead %d, counted %d %d", b.ts, b.live, b.dead, live, dead)
		}
		if b.indexed {
			used := 0
			for i, sl := range b.idx {
				if sl.pos == 0 {
					continue
				}
				used++
				p := int(sl.pos - 1)
				if p >= len(b.timers) || p >= b.head && (b.timers[p].KeyGroup == deadKeyGroup || keyhash.Of(b.timers[p].Key) != sl.tag) {
					rt.Fatalf("bucket %d: index slot %d -> %d is wrong", b.ts, i, p)
				}
			}
			if size := len(b.idx); used != b.idxUsed || size&(size-1) != 0 || 2*used > size {
				rt.Fatalf("bucket %d: index of %d slots, %d used, idxUsed %d", b.ts, size, used, b.idxUsed)
			}
		}
		n += live
	}
	if n != q.n || !slices.Equal(perKG, q.perKG) {
		rt.Fatalf("counts: n %d (counted %d), per key group %v (counted %v)", q.n, n, q.perKG, perKG)
	}
	if q.last != nil && q.byTs[q.last.ts] != q.last {
		rt.Fatalf("last bucket %d is not queued", q.last.ts)
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

// BenchmarkSharedTimestamp is the window pattern: 10k keys each register a
// timer at the same timestamp (their window's end), then the watermark fires
// them all; per op, one registration and one firing.
func BenchmarkSharedTimestamp(b *testing.B) {
	const n = 10_000
	s := NewService[int64, int64](keygroup.Range{Start: 0, End: 127})
	fire := func(Timer[int64, int64]) {}
	b.ReportAllocs()
	ts := int64(0)
	for i := 0; b.Loop(); i++ {
		k := int64(i % n)
		s.RegisterEventTimeTimer(k, int(k%128), ts, ts+999)
		if k == n-1 {
			s.AdvanceWatermark(ts+999, fire)
			ts += 1000
		}
	}
}

// BenchmarkQueueHeap reports the heap a queue takes per timer, for timers
// shaped like a window operator's (an int64 key, a window of two int64s as
// namespace): 10k keys' timers at each of 10 timestamps, as a window
// operator holds them while a periodic watermark trails its windows.
//
//	go test -run XXX -bench QueueHeap ./timer/
func BenchmarkQueueHeap(b *testing.B) {
	type window struct{ Start, End int64 }
	const keys, stamps = 10_000, 10
	var before, after goruntime.MemStats
	var perTimer float64
	for b.Loop() {
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		q := NewQueue[int64, window](keygroup.Range{Start: 0, End: 127})
		for s := range int64(stamps) {
			for k := range int64(keys) {
				q.AddNew(Timer[int64, window]{Timestamp: s*1000 + 999, Key: k, KeyGroup: int(k % 128), Namespace: window{s * 1000, s*1000 + 1000}})
			}
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		if q.Len() != keys*stamps {
			b.Fatalf("%d timers queued", q.Len())
		}
		perTimer = float64(after.HeapAlloc-before.HeapAlloc) / (keys * stamps)
		goruntime.KeepAlive(q)
	}
	b.ReportMetric(perTimer, "B/timer")
}
