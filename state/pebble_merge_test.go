package state

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// List appends are merge operands (pebble_merge.go): whatever Pebble does
// with them meanwhile (memtable flushes, compactions that merge some
// operands into others, a canonical snapshot and restore), a list reads as
// the items appended since its last Update or Clear, in order, as the
// memory backend's does.
func TestPebbleListMergesMatchMemory(t *testing.T) {
	fewerChecks(t)
	rng := keygroup.Range{Start: 0, End: 3}
	rapid.Check(t, func(rt *rapid.T) {
		pb, err := Open[string](Options{Kind: BackendPebble, Dir: t.TempDir(), MemTableSize: 1 << 20}, rng)
		if err != nil {
			rt.Fatal(err)
		}
		defer pb.Close()
		mb := NewBackend[string](rng)
		type pair struct {
			l  *ListState[string, string]
			nl *NamespacedListState[string, int, string]
		}
		states := map[*Backend[string]]pair{}
		for _, b := range []*Backend[string]{pb, mb} {
			states[b] = pair{MustList[string, string](b, "l"), MustNamespacedList[string, int, string](b, "nl")}
		}
		db := pb.pebble().db
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			key := fmt.Sprintf("k%d", rapid.IntRange(0, 3).Draw(rt, "key"))
			ns := rapid.IntRange(0, 2).Draw(rt, "ns")
			op := rapid.IntRange(0, 6).Draw(rt, "op")
			item := fmt.Sprint(i)
			switch op {
			case 4:
				if err := db.Flush(); err != nil {
					rt.Fatal(err)
				}
				continue
			case 5:
				if err := db.Compact(t.Context(), []byte{0}, []byte{0xff, 0xff}, true); err != nil {
					rt.Fatal(err)
				}
				continue
			}
			for _, b := range []*Backend[string]{pb, mb} {
				b.SetCurrentKey(key, kgOfIn(key, rng))
				s := states[b]
				switch op {
				case 0, 1:
					s.l.Add(item)
					s.nl.Add(ns, item)
				case 2:
					s.l.AddAll([]string{item, item + "b"})
				case 3:
					s.l.Update([]string{"u" + item})
					s.nl.Clear(ns)
				case 6:
					s.l.Clear()
				}
			}
		}
		for k := range 4 {
			key := fmt.Sprintf("k%d", k)
			for _, b := range []*Backend[string]{pb, mb} {
				b.SetCurrentKey(key, kgOfIn(key, rng))
			}
			got, want := states[pb].l.Get(), states[mb].l.Get()
			if !slices.Equal(got, want) {
				rt.Fatalf("list of %s: pebble %q, memory %q", key, got, want)
			}
			for ns := range 3 {
				if got, want := states[pb].nl.Get(ns), states[mb].nl.Get(ns); !slices.Equal(got, want) {
					rt.Fatalf("list of %s/%d: pebble %q, memory %q", key, ns, got, want)
				}
			}
		}
		// A canonical snapshot of the merged lists restores (into the
		// memory backend) to the same lists.
		rb := NewBackend[string](rng)
		rl, rnl := MustList[string, string](rb, "l"), MustNamespacedList[string, int, string](rb, "nl")
		for kg := rng.Start; kg <= rng.End; kg++ {
			blob, err := pb.SnapshotKeyGroup(kg)
			if err != nil {
				rt.Fatal(err)
			}
			if err := rb.RestoreKeyGroup(kg, blob); err != nil {
				rt.Fatal(err)
			}
		}
		for k := range 4 {
			key := fmt.Sprintf("k%d", k)
			rb.SetCurrentKey(key, kgOfIn(key, rng))
			mb.SetCurrentKey(key, kgOfIn(key, rng))
			if got, want := rl.Get(), states[mb].l.Get(); !slices.Equal(got, want) {
				rt.Fatalf("restored list of %s: %q, want %q", key, got, want)
			}
			for ns := range 3 {
				if got, want := rnl.Get(ns), states[mb].nl.Get(ns); !slices.Equal(got, want) {
					rt.Fatalf("restored list of %s/%d: %q, want %q", key, ns, got, want)
				}
			}
		}
	})
}

// BenchmarkPebbleListAdd appends to the lists of 100 keys, so that each
// list grows to b.N/100 items: "merge" is ListState.Add (a merge operand),
// "read-modify-write" the way Add worked before (read the list, write it
// back one item longer), on the same backend kind in the same run.
func BenchmarkPebbleListAdd(b *testing.B) {
	rng := keygroup.Range{Start: 0, End: 3}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	for _, mode := range []string{"merge", "read-modify-write"} {
		b.Run(mode, func(b *testing.B) {
			pb, err := Open[string](Options{Kind: BackendPebble, Dir: b.TempDir()}, rng)
			if err != nil {
				b.Fatal(err)
			}
			defer pb.Close()
			l := MustList[string, string](pb, "l")
			ps, pk := pb.pebble(), statePrefix(l.name, l.kind)
			for i := 0; b.Loop(); i++ {
				k := keys[i%len(keys)]
				pb.SetCurrentKey(k, kgOfIn(k, rng))
				if mode == "merge" {
					l.Add("an item of the list")
					continue
				}
				key := pb.pkey(ps, pk)
				old, _ := ps.get(key)
				ps.set(key, appendToList(nil, old, l.vc, []string{"an item of the list"}, l.name))
			}
		})
	}
}
