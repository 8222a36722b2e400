package state

import (
	"strconv"
	"testing"

	"github.com/weirproject/weir/keygroup"
)

// lazyBackend returns a memory backend over r whose key groups are
// computed by kgOf, counting the calls into *calls.
func lazyBackend(r keygroup.Range, calls *int) *Backend[string] {
	b := NewBackend[string](r)
	b.SetKeyGroupFunc(func(k string) int { *calls++; return kgOf(k) })
	return b
}

// A key made current with SetCurrentKeyLazy has its key group computed only
// when something needs it; a value state's read of an existing key does not
// (I6, X1).
func TestValueIndexSkipsKeyGroup(t *testing.T) {
	var calls int
	b := lazyBackend(keygroup.Range{Start: 0, End: maxP - 1}, &calls)
	v := MustValue[string, int](b, "v")
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
		b.SetCurrentKeyLazy(keys[i])
		n, _ := v.Value()
		v.Update(n + i)
	}
	if calls != len(keys) {
		t.Fatalf("first writes computed %d key groups, want %d (one per new key)", calls, len(keys))
	}
	calls = 0
	for round := range 3 {
		for i, k := range keys {
			b.SetCurrentKeyLazy(k)
			n, ok := v.Value()
			if !ok || n != i+round {
				t.Fatalf("round %d: %s = %d, %v; want %d", round, k, n, ok, i+round)
			}
			v.Update(n + 1)
		}
	}
	if calls != 0 {
		t.Fatalf("reads and writes of existing keys computed %d key groups, want 0", calls)
	}
	// The entries are in their key groups all the same (I2), and
	// CurrentKeyGroup computes the key group once per key made current.
	for i, k := range keys {
		kg := kgOf(k)
		var got int
		var found bool
		ForEachValue(v, kg, func(key string, n int) {
			if key == k {
				got, found = n, true
			}
		})
		if !found || got != i+3 {
			t.Fatalf("%s in key group %d: %d, %v; want %d", k, kg, got, found, i+3)
		}
		b.SetCurrentKeyLazy(k)
		if b.CurrentKeyGroup() != kg || b.CurrentKeyGroup() != kg {
			t.Fatalf("%s: CurrentKeyGroup %d, want %d", k, b.CurrentKeyGroup(), kg)
		}
	}
	if calls != len(keys) {
		t.Fatalf("CurrentKeyGroup computed %d key groups for %d keys, want one each", calls, len(keys))
	}
}

// The routing check of SetCurrentKey runs when a lazily set key's key group
// is first computed (I3).
func TestLazyKeyRoutingPanics(t *testing.T) {
	var calls int
	b := lazyBackend(keygroup.Range{Start: 0, End: 63}, &calls)
	v := MustValue[string, int](b, "v")
	foreign := ""
	for i := 0; foreign == ""; i++ {
		if k := "k" + strconv.Itoa(i); kgOf(k) > 63 {
			foreign = k
		}
	}
	b.SetCurrentKeyLazy(foreign)
	expectPanic(t, "write of a foreign key", "outside", func() { v.Update(1) })
	b.SetCurrentKeyLazy(foreign)
	expectPanic(t, "read of a foreign key", "outside", func() { v.Value() })
	b.SetCurrentKeyLazy(foreign)
	expectPanic(t, "key group of a foreign key", "outside", func() { b.CurrentKeyGroup() })
	nb := NewBackend[string](keygroup.Range{Start: 0, End: maxP - 1})
	nv := MustValue[string, int](nb, "v")
	nb.SetCurrentKeyLazy("a")
	expectPanic(t, "lazy key without a key-group function", "SetKeyGroupFunc", func() { nv.Update(1) })
}

// What replaces or drops entries outside Update and Clear empties the index
// (X2): a cleared key group, a restore and Clear never leave a stale entry
// to be read through it.
func TestValueIndexFollowsGroups(t *testing.T) {
	var calls int
	b := lazyBackend(keygroup.Range{Start: 0, End: maxP - 1}, &calls)
	v := MustValue[string, int](b, "v")
	put := func(k string, n int) {
		b.SetCurrentKeyLazy(k)
		v.Update(n)
	}
	get := func(k string) (int, bool) {
		b.SetCurrentKeyLazy(k)
		return v.Value()
	}
	put("a", 1)
	put("b", 2)
	b.SetCurrentKeyLazy("a")
	v.Clear()
	if n, ok := get("a"); ok {
		t.Fatalf("a after Clear: %d", n)
	}
	b.ClearKeyGroup(kgOf("b"))
	if n, ok := get("b"); ok {
		t.Fatalf("b after ClearKeyGroup: %d", n)
	}
	// A restore replaces the entry the index points to.
	put("c", 3)
	other := NewBackend[string](keygroup.Range{Start: 0, End: maxP - 1})
	ov := MustValue[string, int](other, "v")
	set(other, "c")
	ov.Update(30)
	blob, err := other.SnapshotKeyGroup(kgOf("c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreKeyGroup(kgOf("c"), blob); err != nil {
		t.Fatal(err)
	}
	if n, ok := get("c"); !ok || n != 30 {
		t.Fatalf("c after restore: %d, %v; want 30", n, ok)
	}
	put("c", 31)
	set(other, "c")
	blob, err = b.SnapshotKeyGroup(kgOf("c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.RestoreKeyGroup(kgOf("c"), blob); err != nil {
		t.Fatal(err)
	}
	if n, _ := ov.Value(); n != 31 {
		t.Fatalf("the write after the restore reached %d in the snapshot, want 31", n)
	}
}

// A write during a snapshot goes to the live state, not to the frozen view
// (C1), and once the view is closed reads use the index again (X3).
func TestValueIndexAcrossFreeze(t *testing.T) {
	var calls int
	b := lazyBackend(keygroup.Range{Start: 0, End: maxP - 1}, &calls)
	v := MustValue[string, int](b, "v")
	b.SetCurrentKeyLazy("a")
	v.Update(1)
	fz := b.Freeze()
	b.SetCurrentKeyLazy("a")
	n, _ := v.Value()
	v.Update(n + 1)
	blob, err := fz.SnapshotKeyGroup(kgOf("a"))
	if err != nil {
		t.Fatal(err)
	}
	fz.Close()
	r := NewBackend[string](keygroup.Range{Start: 0, End: maxP - 1})
	rv := MustValue[string, int](r, "v")
	if err := r.RestoreKeyGroup(kgOf("a"), blob); err != nil {
		t.Fatal(err)
	}
	set(r, "a")
	if got, _ := rv.Value(); got != 1 {
		t.Fatalf("frozen view saw %d, want 1 (the value at Freeze)", got)
	}
	calls = 0
	for want := 2; want < 5; want++ {
		b.SetCurrentKeyLazy("a")
		got, ok := v.Value()
		if !ok || got != want {
			t.Fatalf("live a = %d, %v; want %d", got, ok, want)
		}
		v.Update(got + 1)
	}
	if calls > 1 {
		t.Fatalf("after the view closed, reads computed %d key groups, want at most 1 (the index refilled once)", calls)
	}
}
