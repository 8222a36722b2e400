package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/keygroup"
)

const maxP = 128

func kgOf(key string) int { return keygroup.Assign(keygroup.HashString(key), maxP) }

// full returns a backend owning every key group.
func full() *Backend[string] { return newB[string](keygroup.Range{Start: 0, End: maxP - 1}) }

func set(b *Backend[string], key string) { b.SetCurrentKey(key, kgOf(key)) }

func TestPerKeyIsolation(t *testing.T) {
	b := full()
	count := MustValue[string, int](b, "count")
	seen := MustList[string, string](b, "seen")
	attrs := MustMap[string, string, int](b, "attrs")

	set(b, "alice")
	count.Update(1)
	seen.Add("x")
	attrs.Put("a", 1)

	set(b, "bob")
	if v, ok := count.Value(); ok || v != 0 {
		t.Fatalf("bob sees alice's value: %v %v", v, ok)
	}
	if got := seen.Get(); got != nil {
		t.Fatalf("bob sees alice's list: %v", got)
	}
	if attrs.Contains("a") || attrs.Len() != 0 {
		t.Fatal("bob sees alice's map")
	}
	count.Update(7)
	seen.Add("y")
	seen.Add("z")
	attrs.Put("b", 2)

	set(b, "alice")
	if v, _ := count.Value(); v != 1 {
		t.Fatalf("alice value %d", v)
	}
	if got := seen.Get(); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("alice list %v", got)
	}
	if v, ok := attrs.Get("a"); !ok || v != 1 || attrs.Contains("b") {
		t.Fatalf("alice map %v %v", v, ok)
	}
	if b.CurrentKey() != "alice" || b.CurrentKeyGroup() != kgOf("alice") {
		t.Fatalf("current key %q kg %d", b.CurrentKey(), b.CurrentKeyGroup())
	}

	// Two states with different names do not share entries.
	other := MustValue[string, int](b, "other")
	if _, ok := other.Value(); ok {
		t.Fatal("state names share entries")
	}
	if count.tab().numKeys() != 2 || seen.tab().numKeys() != 2 || attrs.tab().numKeys() != 2 || other.tab().numKeys() != 0 {
		t.Fatalf("NumKeys %d %d %d %d", count.tab().numKeys(), seen.tab().numKeys(), attrs.tab().numKeys(), other.tab().numKeys())
	}
}

type win struct{ Start, End int64 }

func TestNamespaceIsolation(t *testing.T) {
	b := full()
	sum := MustNamespacedValue[string, win, int64](b, "sum")
	buf := MustNamespacedList[string, win, int](b, "buf")
	w1, w2 := win{0, 10}, win{10, 20}

	set(b, "k")
	sum.Update(w1, 5)
	buf.Add(w1, 1)
	buf.Add(w1, 2)
	if _, ok := sum.Value(w2); ok {
		t.Fatal("w2 sees w1's value")
	}
	if buf.Get(w2) != nil {
		t.Fatal("w2 sees w1's list")
	}
	sum.Update(w2, 9)
	buf.Add(w2, 3)

	set(b, "other")
	if _, ok := sum.Value(w1); ok || buf.Get(w1) != nil {
		t.Fatal("other key sees k's namespaced state")
	}
	set(b, "k")
	if v, _ := sum.Value(w1); v != 5 {
		t.Fatalf("w1 = %d", v)
	}
	if v, _ := sum.Value(w2); v != 9 {
		t.Fatalf("w2 = %d", v)
	}
	if got := buf.Get(w1); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("w1 list %v", got)
	}
	sum.Clear(w1)
	buf.Clear(w1)
	if sum.tab().numKeys() != 1 || buf.tab().numKeys() != 1 {
		t.Fatalf("after clear: %d %d", sum.tab().numKeys(), buf.tab().numKeys())
	}
	if v, _ := sum.Value(w2); v != 9 {
		t.Fatalf("clear of w1 touched w2: %d", v)
	}
	var got []win
	buf.forEach(kgOf("k"), func(k string, w win, _ []int) {
		if k != "k" {
			t.Errorf("key %q", k)
		}
		got = append(got, w)
	})
	if !slices.Equal(got, []win{w2}) {
		t.Fatalf("ForEachKey %v", got)
	}
}

func TestMergeNamespaces(t *testing.T) {
	b := full()
	sum := MustNamespacedValue[string, win, int](b, "sum")
	buf := MustNamespacedList[string, win, int](b, "buf")
	a, c, d, target := win{0, 5}, win{3, 8}, win{7, 9}, win{0, 9}
	set(b, "k")
	sum.Update(a, 1)
	sum.Update(c, 10)
	buf.Add(a, 1)
	buf.Add(c, 2)
	buf.Add(c, 3)
	sum.MergeNamespaces(target, []win{a, c, d}, func(x, y int) int { return x + y })
	buf.MergeNamespaces(target, []win{a, c, d})
	if v, ok := sum.Value(target); !ok || v != 11 {
		t.Fatalf("merged value %d %v", v, ok)
	}
	if got := buf.Get(target); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("merged list %v", got)
	}
	if sum.tab().numKeys() != 1 || buf.tab().numKeys() != 1 {
		t.Fatalf("sources not cleared: %d %d", sum.tab().numKeys(), buf.tab().numKeys())
	}
	// Merging into an existing target keeps it first; merging nothing is a no-op.
	sum.Update(a, 100)
	sum.MergeNamespaces(target, []win{target, a}, func(x, y int) int { return x*1000 + y })
	if v, _ := sum.Value(target); v != 11*1000+100 {
		t.Fatalf("merge order: %d", v)
	}
	sum.MergeNamespaces(win{50, 60}, []win{{70, 80}}, func(x, y int) int { return x + y })
	if _, ok := sum.Value(win{50, 60}); ok {
		t.Fatal("merge of absent namespaces created a value")
	}
}

func TestKeyGroupSlots(t *testing.T) {
	r := keygroup.RangeFor(maxP, 4, 1) // [32, 63]
	b := newB[string](r)
	if b.Range() != r {
		t.Fatalf("range %v", b.Range())
	}
	v := MustValue[string, int](b, "v")
	l := MustList[string, int](b, "l")
	m := MustMap[string, string, int](b, "m")
	nv := MustNamespacedValue[string, int, int](b, "nv")

	want := map[int][]string{}
	for i := 0; len(want) < 10 || i < 2000; i++ {
		key := fmt.Sprintf("key-%d", i)
		kg := kgOf(key)
		if !r.Contains(kg) {
			continue
		}
		b.SetCurrentKey(key, kg)
		v.Update(i)
		l.Add(i)
		m.Put("x", i)
		nv.Update(1, i)
		want[kg] = append(want[kg], key)
	}
	for kg := r.Start; kg <= r.End; kg++ {
		var got []string
		v.forEach(kg, func(k string, _ int) {
			if kgOf(k) != kg {
				t.Errorf("key %q (kg %d) found in slot of kg %d", k, kgOf(k), kg)
			}
			got = append(got, k)
		})
		slices.Sort(got)
		w := slices.Clone(want[kg])
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("kg %d: %v, want %v", kg, got, w)
		}
		// The slice slot is the one the layout promises.
		if len(v.groups[kg-r.Start]) != len(w) {
			t.Fatalf("kg %d: slot %d holds %d keys, want %d", kg, kg-r.Start, len(v.groups[kg-r.Start]), len(w))
		}
		for _, tb := range []table{v.tab(), l.tab(), m.tab(), nv.tab()} {
			if n := tb.numKeysInKeyGroup(kg); n != len(w) {
				t.Fatalf("%s kg %d: %d keys, want %d", tb.Name(), kg, n, len(w))
			}
		}
	}

	// Dropping one key group leaves the others alone.
	victim := kgOf(want[firstKey(want)][0])
	before := v.tab().numKeys()
	b.ClearKeyGroup(victim)
	for _, tb := range []table{v.tab(), l.tab(), m.tab(), nv.tab()} {
		if tb.numKeysInKeyGroup(victim) != 0 || tb.numKeys() != before-len(want[victim]) {
			t.Fatalf("%s after ClearKeyGroup: %d in kg, %d total", tb.Name(), tb.numKeysInKeyGroup(victim), tb.numKeys())
		}
	}
}

func firstKey(m map[int][]string) int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks[0]
}

func TestRoutingPanics(t *testing.T) {
	b := newB[string](keygroup.Range{Start: 10, End: 19})
	v := MustValue[string, int](b, "v")
	expectPanic(t, "state read with no key", "no current key", func() { v.Value() })
	expectPanic(t, "key group below range", "outside", func() { b.SetCurrentKey("k", 9) })
	expectPanic(t, "key group above range", "outside", func() { b.SetCurrentKey("k", 20) })
	expectPanic(t, "iterate foreign key group", "outside", func() { v.forEach(3, func(string, int) {}) })
	if b.CurrentKeyGroup() != -1 {
		t.Fatalf("failed SetCurrentKey changed the key group: %d", b.CurrentKeyGroup())
	}
}

func expectPanic(t *testing.T, what, substr string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("%s: no panic", what)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, substr) {
			t.Fatalf("%s: panic %q does not mention %q", what, msg, substr)
		}
	}()
	f()
}

func TestRegistration(t *testing.T) {
	b := full()
	v1, err := Value[string, int](b, "x")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := Value[string, int](b, "x")
	if err != nil || v1 != v2 {
		t.Fatalf("second registration: %v %v", v2 == v1, err)
	}
	if _, err := Value[string, string](b, "x"); err == nil || !strings.Contains(err.Error(), `"x"`) ||
		!strings.Contains(err.Error(), "int") || !strings.Contains(err.Error(), "string") {
		t.Fatalf("different V: err %v", err)
	}
	if _, err := List[string, int](b, "x"); err == nil || !strings.Contains(err.Error(), "list") {
		t.Fatalf("different kind: err %v", err)
	}
	if _, err := Map[string, string, int](b, "x"); err == nil {
		t.Fatal("map over value: no error")
	}
	expectPanic(t, "MustList over value", "already registered", func() { MustList[string, int](b, "x") })
	MustNamespacedList[string, int, int](b, "w")
	if _, err := NamespacedList[string, int64, int](b, "w"); err == nil {
		t.Fatal("different namespace type: no error")
	}
	if got := b.StateNames(); !slices.Equal(got, []string{"w", "x"}) {
		t.Fatalf("StateNames %v", got)
	}
	tb, ok := b.Table("w")
	if !ok || tb.Kind() != KindNamespacedList || tb.Name() != "w" || tb.Type() != "(int) []int" {
		t.Fatalf("Table: %v %v %v %q", ok, tb.Kind(), tb.Name(), tb.Type())
	}
}

func TestClearRemovesEntries(t *testing.T) {
	b := full()
	v := MustValue[string, int](b, "v")
	l := MustList[string, int](b, "l")
	m := MustMap[string, string, int](b, "m")
	set(b, "k")
	v.Update(1)
	l.Add(1)
	m.Put("a", 1)
	m.Put("b", 2)
	v.Clear()
	l.Update(nil)
	m.Remove("a")
	if m.tab().numKeys() != 1 {
		t.Fatal("map key removed while entries remain")
	}
	m.Remove("b")
	m.Remove("missing")
	if v.tab().numKeys()+l.tab().numKeys()+m.tab().numKeys() != 0 {
		t.Fatalf("entries left: %d %d %d", v.tab().numKeys(), l.tab().numKeys(), m.tab().numKeys())
	}
	l.Add(5)
	l.Clear()
	m.Put("c", 3)
	m.Clear()
	if l.tab().numKeys()+m.tab().numKeys() != 0 {
		t.Fatal("Clear left entries")
	}
}

func TestListUpdateCopiesAndReuses(t *testing.T) {
	b := full()
	l := MustList[string, *int](b, "l")
	set(b, "k")
	one, two, three := new(int), new(int), new(int)
	in := []*int{one, two, three}
	l.Update(in)
	in[0] = nil
	if got := l.Get(); len(got) != 3 || got[0] != one {
		t.Fatal("Update did not copy its argument")
	}
	// Updating with a suffix of the state's own list (aliasing) works and
	// zeroes the tail so it holds no garbage.
	cur := l.Get()
	backing := cur[:3]
	l.Update(cur[1:])
	if got := l.Get(); len(got) != 2 || got[0] != two || got[1] != three {
		t.Fatalf("aliased update: %v", got)
	}
	if backing[2] != nil {
		t.Fatal("tail not zeroed")
	}
	l.AddAll([]*int{one})
	if got := l.Get(); len(got) != 3 || got[2] != one {
		t.Fatalf("AddAll: %v", got)
	}
}

func TestMapRange(t *testing.T) {
	b := full()
	m := MustMap[string, string, int](b, "m")
	set(b, "k")
	for i := range 10 {
		m.Put(fmt.Sprint(i), i)
	}
	sum, n := 0, 0
	m.Range(func(_ string, v int) bool { sum += v; n++; return true })
	if sum != 45 || n != 10 {
		t.Fatalf("sum %d n %d", sum, n)
	}
	n = 0
	m.Range(func(string, int) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("early stop after %d", n)
	}
	// Removing the entry being visited is allowed.
	m.Range(func(k string, v int) bool {
		if v%2 == 0 {
			m.Remove(k)
		}
		return true
	})
	if m.Len() != 5 {
		t.Fatalf("after removing evens: %d", m.Len())
	}
	var entries int
	m.forEach(kgOf("k"), func(k, uk string, uv int) {
		if k != "k" || uv%2 != 1 {
			t.Errorf("entry %s %s %d", k, uk, uv)
		}
		entries++
	})
	if entries != 5 {
		t.Fatalf("ForEach %d entries", entries)
	}
}

func TestTableForEachAny(t *testing.T) {
	b := full()
	v := MustValue[string, int](b, "v")
	nl := MustNamespacedList[string, int, string](b, "nl")
	set(b, "k")
	v.Update(3)
	nl.Add(7, "a")
	kg := kgOf("k")
	var got []string
	for _, name := range b.StateNames() {
		tb, _ := b.Table(name)
		tb.ForEachAny(kg, func(key, ns, val any) {
			got = append(got, fmt.Sprintf("%s:%v/%v=%v", name, key, ns, val))
		})
	}
	if !slices.Equal(got, []string{"nl:k/7=[a]", "v:k/<nil>=3"}) {
		t.Fatalf("%v", got)
	}
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}
