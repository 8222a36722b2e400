package state

import (
	"fmt"
	"github.com/weirproject/weir/internal/keyhash"
	"maps"
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// Tests of the layout of namespaced state (nstable.go): per key an inline
// first namespace, more behind a pointer, an index for many, a cache of the
// current key's entries, and empty entries kept for reuse and swept.

// nsk is a (key, namespace) pair of the models below.
type nsk struct {
	key string
	ns  int
}

// nsDump returns every (key, namespace) -> value of st, checking that each
// key is iterated in its own key group and that the counts agree.
func nsDump[V any](t fataler, b *Backend[string], forEach func(kg int, f func(string, int, V)), numInKG func(int) int) map[nsk]V {
	t.Helper()
	got := map[nsk]V{}
	r := b.Range()
	for kg := r.Start; kg <= r.End; kg++ {
		n := 0
		forEach(kg, func(k string, ns int, v V) {
			if kgOfIn(k, r) != kg {
				t.Fatalf("key %q iterated in key group %d", k, kg)
			}
			if _, dup := got[nsk{k, ns}]; dup {
				t.Fatalf("(%q, %d) iterated twice", k, ns)
			}
			got[nsk{k, ns}] = v
			n++
		})
		if numInKG(kg) != n {
			t.Fatalf("key group %d: NumKeysInKeyGroup %d, iterated %d", kg, numInKG(kg), n)
		}
	}
	return got
}

// kgOfIn is the key group of key in a backend of range r (as the property
// test of state_test.go computes it).
func kgOfIn(key string, r keygroup.Range) int {
	if r.Len() == maxP {
		return kgOf(key)
	}
	return r.Start + (int(keygroup.HashString(key))&0x7fffffff)%r.Len()
}

func setIn(b *Backend[string], key string) { b.SetCurrentKey(key, kgOfIn(key, b.Range())) }

func TestNamespacedManyNamespaces(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, int, int](b, "v")
	lst := MustNamespacedList[string, int, string](b, "l")
	set(b, "k")
	const n = 100 // beyond nsIndexAbove: the key gets an index
	for ns := range n {
		st.Update(ns, ns*10)
		lst.Add(ns, fmt.Sprint(ns))
	}
	set(b, "other")
	st.Update(5, -5)
	set(b, "k")
	if st.tab().numKeys() != n+1 || lst.tab().numKeys() != n {
		t.Fatalf("NumKeys %d %d", st.tab().numKeys(), lst.tab().numKeys())
	}
	check := func(live func(int) bool) {
		t.Helper()
		for ns := range n + 5 {
			v, ok := st.Value(ns)
			if want := live(ns) && ns < n; ok != want || (ok && v != ns*10) {
				t.Fatalf("Value(%d) = %d %v, live %v", ns, v, ok, want)
			}
			l := lst.Get(ns)
			if want := live(ns) && ns < n; (l != nil) != want || (want && !slices.Equal(l, []string{fmt.Sprint(ns)})) {
				t.Fatalf("Get(%d) = %v, live %v", ns, l, want)
			}
		}
	}
	check(func(int) bool { return true })
	if e := st.t.entries(); !e.indexed() || st.t.groups[b.slot].idx["k"] == nil {
		t.Fatal("no index for 100 namespaces")
	}
	// Clear the middle, then the odd ones, in an order that moves slots.
	for ns := 40; ns < 60; ns++ {
		st.Clear(ns)
		lst.Clear(ns)
	}
	check(func(ns int) bool { return ns < 40 || ns >= 60 })
	for ns := n - 1; ns >= 0; ns -= 2 {
		st.Clear(ns)
		lst.Clear(ns)
	}
	check(func(ns int) bool { return (ns < 40 || ns >= 60) && ns%2 == 0 })
	// Down to a few: back to scanning, same answers.
	for ns := range n {
		if ns > 6 {
			st.Clear(ns)
			lst.Clear(ns)
		}
	}
	live := func(ns int) bool { return ns <= 6 && ns%2 == 0 }
	check(live)
	if e := st.t.entries(); e.indexed() || st.t.groups[b.slot].idx["k"] != nil {
		t.Fatal("index kept for 4 namespaces")
	}
	// And up again.
	for ns := range n {
		if !live(ns) {
			st.Update(ns, ns*10)
			lst.Add(ns, fmt.Sprint(ns))
		}
	}
	check(func(int) bool { return true })
	if st.tab().numKeys() != n+1 || lst.tab().numKeys() != n {
		t.Fatalf("NumKeys %d %d", st.tab().numKeys(), lst.tab().numKeys())
	}
	set(b, "other")
	if v, _ := st.Value(5); v != -5 {
		t.Fatalf("other key: %d", v)
	}
}

func TestNamespacedClearInTheMiddle(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, string, int](b, "v")
	set(b, "k")
	names := []string{"a", "b", "c", "d", "e"}
	for i, ns := range names {
		st.Update(ns, i)
	}
	// Remove from the middle, the front, the back; the rest stays.
	for _, gone := range []string{"c", "e", "a"} {
		st.Clear(gone)
		if _, ok := st.Value(gone); ok {
			t.Fatalf("%s still there", gone)
		}
	}
	for i, ns := range names {
		v, ok := st.Value(ns)
		if want := ns == "b" || ns == "d"; ok != want || (ok && v != i) {
			t.Fatalf("Value(%s) = %d %v", ns, v, ok)
		}
	}
	st.Clear("zz") // absent: nothing happens
	if st.tab().numKeys() != 2 {
		t.Fatalf("NumKeys %d", st.tab().numKeys())
	}
	st.Clear("b")
	st.Clear("d")
	if st.tab().numKeys() != 0 || st.tab().numKeysInKeyGroup(kgOf("k")) != 0 {
		t.Fatalf("NumKeys %d", st.tab().numKeys())
	}
	st.forEach(kgOf("k"), func(k, ns string, v int) { t.Fatalf("iterated (%s, %s)", k, ns) })
	if blob, _ := b.SnapshotKeyGroup(kgOf("k")); blob != nil {
		t.Fatalf("snapshot of an emptied key group: %x", blob)
	}
}

// TestNamespacedCacheAcrossKeys checks that the entries remembered by Value
// are never used for another key, nor after they were dropped.
func TestNamespacedCacheAcrossKeys(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, int, int](b, "v")
	lst := MustNamespacedList[string, int, int](b, "l")
	// Two keys, possibly in the same key group: a read of one then a
	// write after switching must go to the other.
	set(b, "a")
	st.Update(1, 1)
	lst.Add(1, 1)
	if v, ok := st.Value(1); !ok || v != 1 {
		t.Fatal("a")
	}
	lst.Get(1)
	set(b, "b")
	st.Update(1, 2)
	lst.Add(1, 2)
	set(b, "a")
	if v, _ := st.Value(1); v != 1 {
		t.Fatalf("a after b: %d", v)
	}
	if got := lst.Get(1); !slices.Equal(got, []int{1}) {
		t.Fatalf("a's list after b: %v", got)
	}
	// Setting the same key again keeps working.
	set(b, "a")
	st.Update(1, 3)
	if v, _ := st.Value(1); v != 3 {
		t.Fatalf("a after re-set: %d", v)
	}
	// ClearKeyGroup of the current key's group drops the cached entries.
	st.Value(1)
	b.ClearKeyGroup(kgOf("a"))
	if _, ok := st.Value(1); ok {
		t.Fatal("value survived ClearKeyGroup")
	}
	st.Update(1, 4)
	if v, ok := st.Value(1); !ok || v != 4 || st.tab().numKeysInKeyGroup(kgOf("a")) != 1 {
		t.Fatalf("after ClearKeyGroup and Update: %d %v %d", v, ok, st.tab().numKeysInKeyGroup(kgOf("a")))
	}
	// A restore replaces the current key's entries: reads see the
	// restored value, writes land in the state.
	blob, err := b.SnapshotKeyGroup(kgOf("a"))
	if err != nil {
		t.Fatal(err)
	}
	st.Update(1, 5)
	st.Update(2, 6)
	if err := b.RestoreKeyGroup(kgOf("a"), blob); err != nil {
		t.Fatal(err)
	}
	if v, _ := st.Value(1); v != 4 {
		t.Fatalf("after restore: %d, want the restored 4", v)
	}
	if v, _ := st.Value(2); v != 6 {
		t.Fatalf("after restore: ns 2 = %d, want the kept 6", v)
	}
	st.Update(1, 7)
	got := nsDump(t, b, st.forEach, st.tab().numKeysInKeyGroup)
	if got[nsk{"a", 1}] != 7 || got[nsk{"a", 2}] != 6 {
		t.Fatalf("after restore and Update: %v", got)
	}
	// The same into a key group left with only empty entries (the
	// restore adopts the decoded entries wholesale).
	for _, ns := range []int{1, 2} {
		st.Clear(ns)
	}
	lst.Clear(1)
	st.Value(1) // remembers a's empty entries
	if err := b.RestoreKeyGroup(kgOf("a"), blob); err != nil {
		t.Fatal(err)
	}
	if v, ok := st.Value(1); !ok || v != 4 {
		t.Fatalf("after restore into an emptied key group: %d %v", v, ok)
	}
	st.Update(3, 8)
	got = nsDump(t, b, st.forEach, st.tab().numKeysInKeyGroup)
	if got[nsk{"a", 1}] != 4 || got[nsk{"a", 3}] != 8 {
		t.Fatalf("after restore into an emptied key group and Update: %v", got)
	}
}

// TestNamespacedEmptyEntries checks that a key whose namespaces all went
// keeps its entries for the next one (no allocation) while the sweep bounds
// the empty entries of keys that do not come back.
func TestNamespacedEmptyEntries(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, int, int](b, "v")
	// One key group, many keys.
	const kg = 7
	keys := make([]string, 0, 2000)
	for i := 0; len(keys) < cap(keys); i++ {
		if k := fmt.Sprint("key-", i); kgOf(k) == kg {
			keys = append(keys, k)
		}
	}
	g := &st.t.groups[kg]

	// A key that opens and closes windows reuses its entries.
	set(b, keys[0])
	st.Update(0, 1)
	e := g.lookup(keys[0])
	allocs := testing.AllocsPerRun(100, func() {
		set(b, keys[0])
		v, _ := st.Value(1)
		st.Update(1, v+1) // the next window opens...
		st.Clear(0)       // ... the previous one fires
		set(b, keys[0])
		st.Update(0, 1)
		st.Clear(1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per window cycle", allocs)
	}
	if g.lookup(keys[0]) != e {
		t.Fatal("the key's entries were replaced")
	}
	st.Clear(0)

	// Keys that come once: the empty entries stay bounded.
	for i, k := range keys {
		set(b, k)
		st.Update(i, i)
		st.Clear(i)
		if g.keys > 3*sweepMin {
			t.Fatalf("after %d one-shot keys, %d entries in the key group", i+1, g.keys)
		}
	}
	if st.tab().numKeys() != 0 || g.n != 0 {
		t.Fatalf("NumKeys %d", st.tab().numKeys())
	}

	// With live keys around, empty entries stay within about twice them.
	live := keys[:500]
	for _, k := range live {
		set(b, k)
		st.Update(0, 0)
	}
	for i, k := range keys[500:] {
		set(b, k)
		st.Update(i, i)
		st.Clear(i)
		if empty := g.keys - len(live); empty > 2*max(sweepMin, len(live))+1 {
			t.Fatalf("%d empty entries for %d live", empty, len(live))
		}
	}
	// A sweep deletes the entries empty since the previous sweep and keeps
	// those refilled in between.
	set(b, live[0])
	st.Clear(0)
	set(b, live[1])
	st.Clear(0)
	g.sweep()
	set(b, live[0])
	st.Update(0, 1) // back
	st.Clear(0)     // and empty again
	g.sweep()
	if g.lookup(live[0]) == nil {
		t.Fatal("the entries of a key that came back were dropped")
	}
	if g.lookup(live[1]) != nil {
		t.Fatal("entries empty at two sweeps kept")
	}
	if want := len(live) - 2; st.tab().numKeys() != want {
		t.Fatalf("NumKeys %d, want %d", st.tab().numKeys(), want)
	}
	if got := nsDump(t, b, st.forEach, st.tab().numKeysInKeyGroup); len(got) != len(live)-2 {
		t.Fatalf("%d entries iterated, want %d", len(got), len(live)-2)
	}
}

// TestNamespacedSweepKeepsCurrentKey clears the current key's last
// namespace when that runs a sweep that deletes its entries, then writes
// again: the write must land in the state.
func TestNamespacedSweepKeepsCurrentKey(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, int, int](b, "v")
	const kg = 3
	var keys []string
	for i := 0; len(keys) < 4*sweepMin; i++ {
		if k := fmt.Sprint("s-", i); kgOf(k) == kg {
			keys = append(keys, k)
		}
	}
	for rounds := range 6 {
		for _, k := range keys {
			set(b, k)
			st.Update(rounds, 1)
			st.Clear(rounds) // runs the sweeps now and then
			st.Update(rounds, 2)
			if v, ok := st.Value(rounds); !ok || v != 2 {
				t.Fatalf("after clear and update: %d %v", v, ok)
			}
			st.Clear(rounds)
		}
	}
	set(b, keys[0])
	st.Update(9, 9)
	got := nsDump(t, b, st.forEach, st.tab().numKeysInKeyGroup)
	if !maps.Equal(got, map[nsk]int{{keys[0], 9}: 9}) {
		t.Fatalf("state %v", got)
	}
}

func TestNamespacedMergeMany(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, int, int](b, "v")
	lst := MustNamespacedList[string, int, int](b, "l")
	set(b, "k")
	for ns := range 50 {
		st.Update(ns, ns)
		lst.Add(ns, ns)
	}
	// Target absent, sources present, absent, repeated and equal to the
	// target.
	srcs := []int{3, 99, 10, 3, 45, 200, 7}
	st.MergeNamespaces(100, srcs, func(a, b int) int { return a*1000 + b })
	lst.MergeNamespaces(100, srcs)
	if v, _ := st.Value(100); v != (3*1000+10)*1000*1000+45*1000+7 {
		t.Fatalf("merged value %d", v)
	}
	if got := lst.Get(100); !slices.Equal(got, []int{3, 10, 45, 7}) {
		t.Fatalf("merged list %v", got)
	}
	// Target present.
	st.MergeNamespaces(0, []int{0, 1, 2}, func(a, b int) int { return a + b })
	lst.MergeNamespaces(0, []int{0, 1, 2})
	if v, _ := st.Value(0); v != 3 {
		t.Fatalf("merged value %d", v)
	}
	if got := lst.Get(0); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("merged list %v", got)
	}
	// All gone but the targets.
	want := 50 - 6 + 1
	if st.tab().numKeys() != want || lst.tab().numKeys() != want {
		t.Fatalf("NumKeys %d %d, want %d", st.tab().numKeys(), lst.tab().numKeys(), want)
	}
	for _, ns := range []int{1, 2, 3, 10, 45, 7} {
		if _, ok := st.Value(ns); ok || lst.Get(ns) != nil {
			t.Fatalf("source %d still there", ns)
		}
	}
	// Nothing present: nothing changes.
	set(b, "empty")
	st.MergeNamespaces(1, []int{2, 3}, func(a, b int) int { return a + b })
	lst.MergeNamespaces(1, []int{2, 3})
	if _, ok := st.Value(1); ok || lst.Get(1) != nil || st.tab().numKeys() != want {
		t.Fatal("merge of nothing created something")
	}
}

func TestNamespacedSnapshotManyNamespaces(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, int, int](b, "v")
	lst := MustNamespacedList[string, int, int](b, "l")
	want := map[nsk]int{}
	for i := range 300 {
		k := fmt.Sprint("k", i%7)
		set(b, k)
		st.Update(i, i)
		lst.Add(i%40, i)
		want[nsk{k, i}] = i
	}
	// Clear some so that entries have moved.
	for i := 0; i < 300; i += 3 {
		k := fmt.Sprint("k", i%7)
		set(b, k)
		st.Clear(i)
		delete(want, nsk{k, i})
	}
	wantL := nsDump(t, b, lst.forEach, lst.tab().numKeysInKeyGroup)
	c := full()
	st2 := MustNamespacedValue[string, int, int](c, "v")
	lst2 := MustNamespacedList[string, int, int](c, "l")
	for kg := range maxP {
		blob, err := b.SnapshotKeyGroup(kg)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RestoreKeyGroup(kg, blob); err != nil {
			t.Fatal(err)
		}
	}
	if got := nsDump(t, c, st2.forEach, st2.tab().numKeysInKeyGroup); !maps.Equal(got, want) {
		t.Fatalf("restored values differ: %d entries, want %d", len(got), len(want))
	}
	if got := nsDump(t, c, lst2.forEach, lst2.tab().numKeysInKeyGroup); !maps.EqualFunc(got, wantL, slices.Equal) {
		t.Fatal("restored lists differ")
	}
	// Restored state works as usual.
	set(c, "k1")
	st2.Update(1, -1)
	if v, _ := st2.Value(1); v != -1 {
		t.Fatal("update after restore")
	}
}

// TestNamespacedPerRecordAllocs checks that the window cycle of existing
// keys (read and write the current window, fire and clear the previous one)
// does not allocate for value state, and allocates only item storage for
// list state.
func TestNamespacedPerRecordAllocs(t *testing.T) {
	type win struct{ start, end int64 }
	b := NewBackend[int64](keygroup.Range{Start: 0, End: maxP - 1})
	st := MustNamespacedValue[int64, win, int64](b, "acc")
	lst := MustNamespacedList[int64, win, int64](b, "buf")
	const keys = 1000
	kgs := make([]int, keys)
	for k := range kgs {
		kgs[k] = keygroup.Assign(keygroup.HashInt64(int64(k)), maxP)
	}
	w := int64(0)
	cycle := func(withList bool) {
		cur, prev := win{w, w + 1}, win{w - 1, w}
		w++
		for k := range int64(keys) {
			b.SetCurrentKey(k, kgs[k])
			v, _ := st.Value(cur)
			st.Update(cur, v+1)
			if withList {
				lst.Add(cur, k)
			}
		}
		for k := range int64(keys) {
			b.SetCurrentKey(k, kgs[k])
			st.Value(prev)
			st.Clear(prev)
			if withList {
				lst.Get(prev)
				lst.Clear(prev)
			}
		}
	}
	for range 3 {
		cycle(false)
	}
	if allocs := testing.AllocsPerRun(20, func() { cycle(false) }); allocs != 0 {
		t.Fatalf("%v allocations per window cycle of %d keys", allocs, keys)
	}
	for range 3 {
		cycle(true)
	}
	// One list of one item per key and window.
	if allocs := testing.AllocsPerRun(20, func() { cycle(true) }); allocs > keys {
		t.Fatalf("%v allocations per window cycle of %d keys with lists", allocs, keys)
	}
}

// TestNamespacedMatchesModel drives namespaced value and list state with few
// keys and many namespaces (crossing the index thresholds) and compares
// them with plain maps after every step, including snapshots and restores.
func TestNamespacedMatchesModel(t *testing.T) {
	r := keygroup.Range{Start: 4, End: 7}
	rapid.Check(t, func(rt *rapid.T) {
		b := NewBackend[string](r)
		val := MustNamespacedValue[string, int, int](b, "nval")
		lst := MustNamespacedList[string, int, int](b, "nlst")
		if rapid.Bool().Draw(rt, "ordered") {
			// The order that lets a lookup skip the scan for a greatest
			// namespace (nsFirstMax); results must not change.
			less := func(a, b int) bool { return a < b }
			val.OrderNamespaces(less)
			lst.OrderNamespaces(less)
		}
		mVal := map[nsk]int{}
		mLst := map[nsk][]int{}
		keys := []string{"a", "b", "c", "d", "e"}
		var key string
		maxNs := rapid.SampledFrom([]int{3, 12, 50}).Draw(rt, "maxNs")
		ns := func(rt *rapid.T) int { return rapid.IntRange(0, maxNs).Draw(rt, "ns") }
		nss := func(rt *rapid.T) []int { return rapid.SliceOfN(rapid.IntRange(0, maxNs), 0, 6).Draw(rt, "sources") }
		genInt := rapid.IntRange(0, 9)
		setKey := func(rt *rapid.T) {
			key = rapid.SampledFrom(keys).Draw(rt, "key")
			setIn(b, key)
		}
		setKey(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"setKey": setKey,
			"update": func(rt *rapid.T) {
				n, v := ns(rt), genInt.Draw(rt, "v")
				val.Update(n, v)
				mVal[nsk{key, n}] = v
			},
			"updateMany": func(rt *rapid.T) {
				for n := range rapid.IntRange(0, maxNs).Draw(rt, "upTo") {
					val.Update(n, n)
					mVal[nsk{key, n}] = n
				}
			},
			"readThenUpdate": func(rt *rapid.T) {
				n := ns(rt)
				v, _ := val.Value(n)
				val.Update(n, v+1)
				mVal[nsk{key, n}]++
			},
			"modify": func(rt *rapid.T) {
				n, v := ns(rt), genInt.Draw(rt, "v")
				old, had := mVal[nsk{key, n}]
				got := val.Modify(n, func(cur int, ok bool) int {
					if ok != had || cur != old {
						rt.Fatalf("Modify(%d) saw (%d, %v), want (%d, %v)", n, cur, ok, old, had)
					}
					return cur*10 + v
				})
				if got != had {
					rt.Fatalf("Modify(%d) reported %v, want %v", n, got, had)
				}
				mVal[nsk{key, n}] = old*10 + v
			},
			"clear": func(rt *rapid.T) {
				n := ns(rt)
				val.Clear(n)
				delete(mVal, nsk{key, n})
			},
			"clearGreatest": func(rt *rapid.T) {
				// The key's greatest namespace: its first when they came in
				// order, the one OrderNamespaces's shortcut depends on.
				g, found := -1, false
				for k := range mVal {
					if k.key == key && k.ns > g {
						g, found = k.ns, true
					}
				}
				if found {
					val.Clear(g)
					delete(mVal, nsk{key, g})
				}
			},
			"clearMany": func(rt *rapid.T) {
				step := rapid.IntRange(1, 3).Draw(rt, "step")
				for n := rapid.IntRange(0, 2).Draw(rt, "from"); n <= maxNs; n += step {
					val.Clear(n)
					delete(mVal, nsk{key, n})
				}
			},
			"merge": func(rt *rapid.T) {
				target, srcs := ns(rt), nss(rt)
				val.MergeNamespaces(target, srcs, func(a, b int) int { return a*10 + b })
				acc, have := mVal[nsk{key, target}]
				for _, s := range srcs {
					v, ok := mVal[nsk{key, s}]
					if s == target || !ok {
						continue
					}
					delete(mVal, nsk{key, s})
					if have {
						acc = acc*10 + v
					} else {
						acc, have = v, true
					}
				}
				if have {
					mVal[nsk{key, target}] = acc
				}
			},
			"listAdd": func(rt *rapid.T) {
				n, v := ns(rt), genInt.Draw(rt, "v")
				lst.Add(n, v)
				mLst[nsk{key, n}] = append(slices.Clone(mLst[nsk{key, n}]), v)
			},
			"listUpdate": func(rt *rapid.T) {
				n, vs := ns(rt), rapid.SliceOfN(genInt, 0, 3).Draw(rt, "vs")
				lst.Update(n, vs)
				if len(vs) == 0 {
					delete(mLst, nsk{key, n})
				} else {
					mLst[nsk{key, n}] = slices.Clone(vs)
				}
			},
			"listClear": func(rt *rapid.T) {
				n := ns(rt)
				lst.Clear(n)
				delete(mLst, nsk{key, n})
			},
			"listMerge": func(rt *rapid.T) {
				target, srcs := ns(rt), nss(rt)
				lst.MergeNamespaces(target, srcs)
				acc := slices.Clone(mLst[nsk{key, target}])
				for _, s := range srcs {
					if v, ok := mLst[nsk{key, s}]; ok && s != target {
						acc = append(acc, v...)
						delete(mLst, nsk{key, s})
					}
				}
				if len(acc) > 0 {
					mLst[nsk{key, target}] = acc
				}
			},
			"clearKeyGroup": func(rt *rapid.T) {
				kg := rapid.IntRange(r.Start, r.End).Draw(rt, "kg")
				b.ClearKeyGroup(kg)
				for k := range mVal {
					if kgOfIn(k.key, r) == kg {
						delete(mVal, k)
					}
				}
				for k := range mLst {
					if kgOfIn(k.key, r) == kg {
						delete(mLst, k)
					}
				}
			},
			"snapshotRestore": func(rt *rapid.T) {
				// Into a fresh backend, which then replaces b (the current
				// key carries over).
				c := NewBackend[string](r)
				for kg := r.Start; kg <= r.End; kg++ {
					blob, err := b.SnapshotKeyGroup(kg)
					if err != nil {
						rt.Fatal(err)
					}
					if err := c.RestoreKeyGroup(kg, blob); err != nil {
						rt.Fatal(err)
					}
				}
				b = c
				val = MustNamespacedValue[string, int, int](b, "nval")
				lst = MustNamespacedList[string, int, int](b, "nlst")
				setIn(b, key)
			},
			"restoreOver": func(rt *rapid.T) {
				// A key group's own snapshot restored over itself after
				// changes: restored entries replace, others stay.
				kg := kgOfIn(key, r)
				blob, err := b.SnapshotKeyGroup(kg)
				if err != nil {
					rt.Fatal(err)
				}
				saved := map[nsk]int{}
				for k, v := range mVal {
					if kgOfIn(k.key, r) == kg {
						saved[k] = v
					}
				}
				n := ns(rt)
				val.Update(n, 42)
				mVal[nsk{key, n}] = 42
				if err := b.RestoreKeyGroup(kg, blob); err != nil {
					rt.Fatal(err)
				}
				maps.Copy(mVal, saved)
			},
			"": func(rt *rapid.T) {
				for n := range maxNs + 1 {
					v, ok := val.Value(n)
					if mv, mok := mVal[nsk{key, n}]; ok != mok || v != mv {
						rt.Fatalf("Value(%d) = %d %v, model %d %v", n, v, ok, mv, mok)
					}
					if got := lst.Get(n); !slices.Equal(got, mLst[nsk{key, n}]) {
						rt.Fatalf("Get(%d) = %v, model %v", n, got, mLst[nsk{key, n}])
					}
				}
				if val.tab().numKeys() != len(mVal) || lst.tab().numKeys() != len(mLst) {
					rt.Fatalf("NumKeys %d %d, model %d %d", val.tab().numKeys(), lst.tab().numKeys(), len(mVal), len(mLst))
				}
				for i := range val.t.groups {
					checkNsGroup(rt, &val.t.groups[i])
					checkNsGroup(rt, &lst.t.groups[i])
				}
			},
		})
		if got := nsDump(rt, b, val.forEach, val.tab().numKeysInKeyGroup); !maps.Equal(got, mVal) {
			rt.Fatalf("ForEach %v, model %v", got, mVal)
		}
		if got := nsDump(rt, b, lst.forEach, lst.tab().numKeysInKeyGroup); !maps.EqualFunc(got, mLst, slices.Equal) {
			rt.Fatalf("list ForEach %v, model %v", got, mLst)
		}
	})
}

// TestNamespacedManyKeysInOneGroup drives one key group with many keys
// against a model, with sweeps, snapshots and restores over live state.
func TestNamespacedManyKeysInOneGroup(t *testing.T) {
	b := full()
	st := MustNamespacedValue[string, int, int](b, "v")
	lst := MustNamespacedList[string, int, int](b, "l")
	const kg = 11
	keys := keysInGroup("m-", kg, 700)
	model := map[nsk]int{}
	lmodel := map[nsk][]int{}
	rnd := uint64(1)
	next := func(n int) int { // xorshift: deterministic
		rnd ^= rnd << 13
		rnd ^= rnd >> 7
		rnd ^= rnd << 17
		return int(rnd % uint64(n))
	}
	var blob []byte
	var blobModel map[nsk]int
	for step := range 60_000 {
		// Keys come in a widening range, so new keys keep arriving.
		k := keys[next(min(len(keys), 10+step/50))]
		set(b, k)
		ns := next(6)
		switch op := next(10); {
		case op < 4:
			v, _ := st.Value(ns)
			st.Update(ns, v+1)
			model[nsk{k, ns}]++
		case op < 7:
			st.Clear(ns)
			delete(model, nsk{k, ns})
		case op < 8:
			lst.Add(ns, step)
			lmodel[nsk{k, ns}] = append(lmodel[nsk{k, ns}], step)
		case op < 9:
			lst.Clear(ns)
			delete(lmodel, nsk{k, ns})
		default:
			v, ok := st.Value(ns)
			if mv, mok := model[nsk{k, ns}]; ok != mok || v != mv {
				t.Fatalf("step %d: Value(%s, %d) = %d %v, model %d %v", step, k, ns, v, ok, mv, mok)
			}
			if got := lst.Get(ns); !slices.Equal(got, lmodel[nsk{k, ns}]) {
				t.Fatalf("step %d: Get(%s, %d) = %v, model %v", step, k, ns, got, lmodel[nsk{k, ns}])
			}
		}
		switch step % 10_000 {
		case 3_000: // snapshot
			var err error
			if blob, err = b.SnapshotKeyGroup(kg); err != nil {
				t.Fatal(err)
			}
			blobModel = maps.Clone(model)
		case 6_000: // restore over live state: the blob's entries win
			lsnap := nsDump(t, b, lst.forEach, lst.tab().numKeysInKeyGroup)
			if err := b.RestoreKeyGroup(kg, blob); err != nil {
				t.Fatal(err)
			}
			maps.Copy(model, blobModel)
			// Lists: the blob's lists replace the current ones.
			c := full()
			lst2 := MustNamespacedList[string, int, int](c, "l")
			if err := c.RestoreKeyGroup(kg, blob); err != nil {
				t.Fatal(err)
			}
			restored := nsDump(t, c, lst2.forEach, lst2.tab().numKeysInKeyGroup)
			clear(lmodel)
			for k, v := range lsnap { // the state's own slices: copy
				lmodel[k] = slices.Clone(v)
			}
			for k, v := range restored {
				lmodel[k] = slices.Clone(v)
			}
		}
		if step%97 == 0 {
			checkNsGroup(t, &st.t.groups[kg])
			checkNsGroup(t, &lst.t.groups[kg])
		}
		if step%997 == 0 {
			if got := nsDump(t, b, st.forEach, st.tab().numKeysInKeyGroup); !maps.Equal(got, model) {
				t.Fatalf("step %d: state has %d pairs, model %d", step, len(got), len(model))
			}
			if got := nsDump(t, b, lst.forEach, lst.tab().numKeysInKeyGroup); !maps.EqualFunc(got, lmodel, slices.Equal) {
				t.Fatalf("step %d: lists differ", step)
			}
		}
	}
}

// checkNsGroup verifies the invariants of a key group's table: sizes, load,
// counts, and every used slot reachable from its home slot by lookup.
func checkNsGroup[N comparable, X any](t fataler, g *nsGroup[string, N, X]) {
	t.Helper()
	if g.slots == nil {
		if g.keys != 0 || g.n != 0 {
			t.Fatalf("no table but %d keys, %d pairs", g.keys, g.n)
		}
		return
	}
	if size := len(g.slots); size < nsMinSlots || size&(size-1) != 0 || 4*g.keys > 3*size {
		t.Fatalf("table of %d slots for %d keys", size, g.keys)
	}
	used, pairs := 0, 0
	for i := range g.slots {
		s := &g.slots[i]
		if !s.used {
			continue
		}
		used++
		pairs += s.e.count()
		if e := &s.e; int(e.n) > e.moreCap() || (e.n == 0 && e.head != 0) || (e.more != nil && int(e.head) >= e.moreCap()) {
			t.Fatalf("slot %d: key %q: %d namespaces in more, capacity %d, ring head %d", i, s.key, e.n, e.moreCap(), e.head)
		}
		if s.hash != keyhash.Of(s.key) {
			t.Fatalf("slot %d: hash %x, key %q hashes to %x", i, s.hash, s.key, keyhash.Of(s.key))
		}
		if g.lookup(s.key) != &s.e {
			t.Fatalf("slot %d: key %q not found from its home slot", i, s.key)
		}
	}
	if len(g.ctrl) != len(g.slots)+ctrlPad {
		t.Fatalf("%d control bytes for %d slots", len(g.ctrl), len(g.slots))
	}
	for i, c := range g.ctrl {
		s := &g.slots[i%len(g.slots)]
		if want := uint8(0); s.used && c != nsTag(s.hash) || !s.used && c != want {
			t.Fatalf("control byte %d is %#x for slot %d (used %v, hash %x)", i, c, i%len(g.slots), s.used, s.hash)
		}
	}
	if used != g.keys || pairs != g.n {
		t.Fatalf("counted %d keys, %d pairs; group says %d, %d", used, pairs, g.keys, g.n)
	}
}

// TestNamespacedOrderedFirstRemoved removes some of a key's namespaces and
// then its greatest, its first, with an index (removals move the last slot
// into the hole, so the one that takes first's place is not the greatest)
// and without one, and checks that every other namespace is still found:
// the state must stop assuming first is the greatest (nsFirstMax) once
// first has gone.
func TestNamespacedOrderedFirstRemoved(t *testing.T) {
	for _, many := range []int{5, 2 * nsIndexAbove} {
		b := NewBackend[string](keygroup.Range{Start: 0, End: 0})
		st := MustNamespacedValue[string, int, int](b, "v")
		st.OrderNamespaces(func(a, b int) bool { return a < b })
		setIn(b, "k")
		for ns := range many {
			st.Update(ns, ns)
		}
		for ns := 1; ns < many/2; ns += 2 {
			st.Clear(ns) // reordering an indexed key's slots: the last moves in
		}
		st.Clear(many - 1) // the greatest, first
		for ns := range many - 1 {
			v, ok := st.Value(ns)
			if want := ns >= many/2 || ns%2 == 0; ok != want || (ok && v != ns) {
				t.Fatalf("%d namespaces: Value(%d) = %d, %v; want %d, %v", many, ns, v, ok, ns, want)
			}
		}
	}
}

// TestNamespacedKeyWithMoreThan64KNamespaces gives one key more namespaces
// than the ring's 16-bit start could index, which an indexed key may have
// (only a key without an index moves the start), then removes and reads
// some of them.
func TestNamespacedKeyWithMoreThan64KNamespaces(t *testing.T) {
	const many = 1<<16 + 100
	b := NewBackend[string](keygroup.Range{Start: 0, End: 0})
	st := MustNamespacedValue[string, int, int](b, "v")
	setIn(b, "k")
	for ns := range many {
		st.Update(ns, -ns)
	}
	for ns := 0; ns < many; ns += 3 {
		st.Clear(ns)
	}
	if n := st.tab().numKeys(); n != many-(many+2)/3 {
		t.Fatalf("%d pairs, want %d", n, many-(many+2)/3)
	}
	for _, ns := range []int{0, 1, 2, 1 << 15, 1<<16 + 1, many - 1} {
		v, ok := st.Value(ns)
		if want := ns%3 != 0; ok != want || (ok && v != -ns) {
			t.Fatalf("Value(%d) = %d, %v; want %d, %v", ns, v, ok, -ns, want)
		}
	}
	checkNsGroup(t, &st.t.groups[0])
}

// TestNamespacedSweepDeletesDisplacedKeys: keys go empty and stay so over
// two sweeps, which delete them from a table where many keys sit away from
// their home slots, so that deletions move later keys back (backward
// shift); in between and after, every key still present is found and the
// table's invariants (control bytes included) hold.
func TestNamespacedSweepDeletesDisplacedKeys(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b := full()
		st := MustNamespacedValue[string, int, int](b, "v")
		const kg = 5
		keys := keysInGroup("d-", kg, 400)
		model := map[nsk]int{}
		steps := rapid.IntRange(500, 3000).Draw(rt, "steps")
		live := rapid.IntRange(20, 400).Draw(rt, "live") // keys in use at a time
		for step := range steps {
			// The keys in use move along the list, so keys behind go
			// empty and are swept.
			lo := step * (len(keys) - live) / steps
			k := keys[lo+rapid.IntRange(0, live-1).Draw(rt, "k")]
			ns := rapid.IntRange(0, 2).Draw(rt, "ns")
			set(b, k)
			if rapid.Bool().Draw(rt, "clear") {
				st.Clear(ns)
				delete(model, nsk{k, ns})
			} else {
				v, _ := st.Value(ns)
				st.Update(ns, v+1)
				model[nsk{k, ns}]++
			}
			if step%50 == 0 {
				checkNsGroup(rt, &st.t.groups[kg])
			}
		}
		// Everything behind the window, cleared: at least two sweeps.
		for _, k := range keys {
			set(b, k)
			for ns := range 3 {
				st.Clear(ns)
				delete(model, nsk{k, ns})
			}
		}
		checkNsGroup(rt, &st.t.groups[kg])
		for _, k := range keys[:len(keys)/2] {
			set(b, k)
			st.Update(1, 7)
			model[nsk{k, 1}] = 7
		}
		checkNsGroup(rt, &st.t.groups[kg])
		if got := nsDump(rt, b, st.forEach, st.tab().numKeysInKeyGroup); !maps.Equal(got, model) {
			rt.Fatalf("state has %d pairs, model %d", len(got), len(model))
		}
	})
}

// keysInGroup returns n distinct keys, prefix followed by a number, of key
// group kg.
func keysInGroup(prefix string, kg, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprint(prefix, i); kgOf(k) == kg {
			keys = append(keys, k)
		}
	}
	return keys
}
