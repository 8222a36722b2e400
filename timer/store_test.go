package timer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir/codec"
	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// memStore is a Store in Go maps with sorted keys, for the tests of this
// package (the Pebble one, state.TimerStore, is tested against the heap
// service in package state).
type memStore struct {
	kgs  map[int]map[string][]byte
	keys map[int][]string // sorted
	gets int
}

func newMemStore() *memStore {
	return &memStore{kgs: map[int]map[string][]byte{}, keys: map[int][]string{}}
}

func (m *memStore) Get(kg int, k []byte) ([]byte, bool) {
	m.gets++
	v, ok := m.kgs[kg][string(k)]
	return slices.Clone(v), ok
}

func (m *memStore) Set(kg int, k, v []byte) {
	if m.kgs[kg] == nil {
		m.kgs[kg] = map[string][]byte{}
	}
	if _, ok := m.kgs[kg][string(k)]; !ok {
		i, _ := slices.BinarySearch(m.keys[kg], string(k))
		m.keys[kg] = slices.Insert(m.keys[kg], i, string(k))
	}
	m.kgs[kg][string(k)] = slices.Clone(v)
}

func (m *memStore) Delete(kg int, k []byte) {
	if _, ok := m.kgs[kg][string(k)]; !ok {
		return
	}
	delete(m.kgs[kg], string(k))
	i, _ := slices.BinarySearch(m.keys[kg], string(k))
	m.keys[kg] = slices.Delete(m.keys[kg], i, i+1)
}

func (m *memStore) Scan(kg int, lo, hi []byte, f func(k, v []byte) bool) {
	keys := m.keys[kg]
	i, _ := slices.BinarySearch(keys, string(lo))
	for ; i < len(keys); i++ {
		k := keys[i]
		if hi != nil && k >= string(hi) {
			return
		}
		if !f([]byte(k), m.kgs[kg][k]) {
			return
		}
	}
}

// memStoreQueue makes a storeQueue over a memStore and its invariant
// check, for checkQueueModel.
func memStoreQueue(r keygroup.Range) (queue[string, int], func(*rapid.T)) {
	kc, nc := codec.Default[string](), codec.Default[int]()
	q := newStoreQueue[string, int](r, newMemStore(), tagEvent, &kc, &nc, new(uint64))
	return q, func(rt *rapid.T) { checkStoreQueue(rt, q) }
}

func TestStoreQueueMatchesModel(t *testing.T) {
	checkQueueModel(t, memStoreQueue, []string{"a", "b", "c", "d", "e", "f"}, -3, 12, 2, 0)
}

// TestStoreQueueMatchesModelCrowded overflows the key groups' caches.
func TestStoreQueueMatchesModelCrowded(t *testing.T) {
	var keys []string
	for c := 'a'; c <= 'h'; c++ {
		for i := range 6 {
			keys = append(keys, fmt.Sprintf("%c%d", c, i))
		}
	}
	checkQueueModel(t, memStoreQueue, keys, 0, 40, 1, cacheCap+8)
}

// checkStoreQueue verifies the invariants stated at the top of store.go.
func checkStoreQueue(rt *rapid.T, q *storeQueue[string, int]) {
	n := 0
	for i := range q.groups {
		g := &q.groups[i]
		kg := q.rng.Start + i
		var ordered [][]byte
		q.st.Scan(kg, []byte{q.tag}, []byte{q.tag + 1}, func(k, v []byte) bool {
			ordered = append(ordered, slices.Clone(k))
			c, err := q.decode(kg, k, v)
			if err != nil {
				rt.Fatalf("kg %d: %v", kg, err)
			}
			if c.ts > g.maxTs {
				rt.Fatalf("kg %d: timer at %d after maxTs %d", kg, c.ts, g.maxTs)
			}
			ik := identityKey(nil, q.tag, c.ts, v)
			sv, ok := q.st.Get(kg, ik)
			if !ok || binary.BigEndian.Uint64(sv) != c.seq {
				rt.Fatalf("kg %d: timer %v has no identity entry with its seq %d", kg, c.t, c.seq)
			}
			if c.seq > *q.seq {
				rt.Fatalf("kg %d: seq %d above the counter %d", kg, c.seq, *q.seq)
			}
			return true
		})
		ids := 0
		q.st.Scan(kg, []byte{q.tag + 1}, []byte{q.tag + 2}, func(k, v []byte) bool { ids++; return true })
		if len(ordered) != g.n || ids != g.n {
			rt.Fatalf("kg %d: n = %d, %d ordered and %d identity entries", kg, g.n, len(ordered), ids)
		}
		live := g.live()
		if len(live) > cacheCap || (len(live) == 0) != (g.n == 0) {
			rt.Fatalf("kg %d: %d cached of %d", kg, len(live), g.n)
		}
		for j, c := range live {
			if k := orderedKey(nil, q.tag, c.ts, c.seq); !bytes.Equal(k, ordered[j]) {
				rt.Fatalf("kg %d: cached timer %d is %x, the store's %x", kg, j, k, ordered[j])
			}
		}
		for _, k := range ordered[len(live):] {
			if bytes.Compare(k, g.lo) < 0 {
				rt.Fatalf("kg %d: uncached %x below lo %x", kg, k, g.lo)
			}
		}
		if (g.hpos >= 0) != (g.n > 0) || g.hpos >= 0 && q.heap[g.hpos] != i {
			rt.Fatalf("kg %d: heap position %d with %d timers", kg, g.hpos, g.n)
		}
		n += g.n
	}
	if n != q.n || n != q.Len() {
		rt.Fatalf("n = %d, groups hold %d", q.n, n)
	}
	for p := 1; p < len(q.heap); p++ {
		if q.less(q.heap[p], q.heap[(p-1)/2]) {
			rt.Fatalf("heap order broken at %d", p)
		}
	}
}

// TestStoreQueueAnswersFromMemory: registering timers later than every
// queued one, and deleting cached ones, reads nothing from the store.
func TestStoreQueueAnswersFromMemory(t *testing.T) {
	st := newMemStore()
	r := keygroup.Range{Start: 0, End: 3}
	s := NewServiceInStore[string, int](r, st, nil, nil)
	for i := range 1000 {
		s.RegisterEventTimeTimer("k", 1, 0, int64(i))
	}
	s.DeleteEventTimeTimer("k", 1, 0, 3)
	if st.gets != 0 {
		t.Fatalf("%d store reads for ascending registrations and a cached delete", st.gets)
	}
	s.RegisterEventTimeTimer("k", 1, 0, 500) // registered: only the store knows
	if st.gets != 1 || s.NumEventTimeTimers() != 999 {
		t.Fatalf("%d store reads, %d timers after a duplicate registration", st.gets, s.NumEventTimeTimers())
	}
}

// TestServiceInStoreReload: a service over a store another service filled
// (a native restore) fires the same timers in the same order after Reload,
// and reports its processing-time head.
func TestServiceInStoreReload(t *testing.T) {
	st := newMemStore()
	r := keygroup.Range{Start: 0, End: 3}
	a := NewServiceInStore[string, int](r, st, nil, nil)
	for i := range 200 {
		k := fmt.Sprintf("k%d", i%7)
		a.RegisterEventTimeTimer(k, i%4, i, int64(i%13))
		a.RegisterProcessingTimeTimer(k, i%4, i, int64(1000+i%5))
	}
	b := NewServiceInStore[string, int](r, st, nil, nil)
	var head []int64
	b.OnProcessingHeadChange(func(ts int64) { head = append(head, ts) })
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(head, []int64{1000}) || b.NumEventTimeTimers() != 200 || b.NumProcessingTimeTimers() != 200 {
		t.Fatalf("after Reload: head changes %v, %d and %d timers", head, b.NumEventTimeTimers(), b.NumProcessingTimeTimers())
	}
	// A timer registered after the reload comes after the reloaded ones of
	// its timestamp.
	b.RegisterEventTimeTimer("new", 2, 0, 5)
	want := NewService[string, int](r)
	for i := range 200 {
		want.RegisterEventTimeTimer(fmt.Sprintf("k%d", i%7), i%4, i, int64(i%13))
	}
	want.RegisterEventTimeTimer("new", 2, 0, 5)
	var got, exp []string
	b.AdvanceWatermark(100, func(t tmr) { got = append(got, fmt.Sprint(t)) })
	want.AdvanceWatermark(100, func(t tmr) { exp = append(exp, fmt.Sprint(t)) })
	if !slices.Equal(got, exp) {
		t.Fatalf("after Reload fired\n %v\nwant\n %v", got, exp)
	}
}
