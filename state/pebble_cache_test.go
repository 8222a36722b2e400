package state

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// openCached opens a Pebble backend over every key group with a write-back
// cache of cacheBytes (NoCache: none), its states registered.
func openCached(t tester, cacheBytes int64) (*Backend[string], *fixture) {
	b, err := Open[string](Options{Kind: BackendPebble, MemTableSize: 1 << 20, CacheBytes: cacheBytes},
		keygroup.Range{Start: 0, End: maxP - 1})
	if err != nil {
		t.Fatalf("opening a Pebble backend with CacheBytes %d: %v", cacheBytes, err)
	}
	return b, registerAll(b)
}

// TestPebbleCacheMatchesMemory drives the memory backend (the model) and a
// Pebble backend with a write-back cache, whose bound is drawn from tiny
// (every write passes it, so the cache flushes and drops everything all
// the time) to the default and NoCache, with the same random operations:
// writes of every state kind, list appends onto values the cache knows
// and onto values only Pebble knows, reads, counts, iteration, clears of
// a key group, flushes forced at random points, Freeze views read later,
// older snapshots of a key group restored over it, and the Pebble backend replaced by a fresh one restored from its
// canonical snapshots or from a native checkpoint (with another cache
// bound). Every read of the current key is compared as it happens; the
// whole contents, the counts and the views at the end.
func TestPebbleCacheMatchesMemory(t *testing.T) {
	fewerChecks(t)
	bounds := []int64{1, 300, 3000, 0, NoCache}
	rapid.Check(t, func(rt *rapid.T) {
		mem := full()
		fm := registerAll(mem)
		peb, fp := openCached(rt, rapid.SampledFrom(bounds).Draw(rt, "cache bytes"))
		defer func() { peb.Close() }()
		type view struct {
			f    *Frozen[string]
			want map[string]string // the model's contents at Freeze time
		}
		var views []view
		defer func() {
			for _, v := range views {
				v.f.Close()
			}
		}()
		checkView := func(v view) {
			blobs := map[int][]byte{}
			for kg := 0; kg < maxP; kg++ {
				blob, err := v.f.SnapshotKeyGroup(kg)
				if err != nil {
					rt.Fatalf("snapshot of key group %d from a Frozen view: %v", kg, err)
				}
				blobs[kg] = blob
			}
			v.f.Close()
			dst := NewBackend[string](keygroup.Range{Start: 0, End: maxP - 1})
			for kg, blob := range blobs {
				if err := dst.RestoreKeyGroup(kg, blob); err != nil {
					rt.Fatalf("restoring a Frozen view's key group %d: %v", kg, err)
				}
			}
			registerAll(dst)
			diff(rt, "Frozen view against the model at Freeze time", dump(dst), v.want)
		}
		keys := []string{"a", "b", "c", "d", "e", "f"}
		key := "a"
		set(mem, key)
		set(peb, key)
		ckpt := int64(0)
		var saved struct {
			kg   int
			blob []byte
		}
		n := rapid.IntRange(1, 120).Draw(rt, "ops")
		for i := range n {
			op := rapid.IntRange(0, 23).Draw(rt, "op")
			v := rapid.IntRange(0, 3).Draw(rt, "v")
			ns := rapid.IntRange(0, 2).Draw(rt, "ns")
			w := win{int64(ns) * 10, int64(ns)*10 + 10}
			for _, f := range []*fixture{fm, fp} {
				switch op {
				case 0:
					f.val.Update(int64(v))
				case 1:
					f.val.Clear()
				case 2:
					f.lst.Add(fmt.Sprint(v))
				case 3:
					f.lst.AddAll(slices.Repeat([]string{fmt.Sprint(v)}, v))
				case 4:
					f.lst.Update(slices.Repeat([]string{fmt.Sprint(v)}, v))
				case 5:
					f.lst.Clear()
				case 6:
					f.mp.Put(int32(v), float64(v)/2)
				case 7:
					f.mp.Remove(int32(v))
				case 8:
					f.mp.Clear()
				case 9:
					f.nval.Update(w, slices.Repeat([]byte{byte(v)}, v))
				case 10:
					f.nval.Clear(w)
				case 11:
					f.nlst.Add(uint8(ns), v%2 == 0)
				case 12:
					f.nlst.Clear(uint8(ns))
				case 13:
					f.nlst.MergeNamespaces(uint8(ns), []uint8{2, 1})
				}
			}
			switch op {
			case 14, 15: // another current key
				key = rapid.SampledFrom(keys).Draw(rt, "key")
				set(mem, key)
				set(peb, key)
			case 16: // a forced flush, of the cache or of the memtable too
				if rapid.Bool().Draw(rt, "memtable") {
					if err := peb.Flush(); err != nil {
						rt.Fatal(err)
					}
				} else {
					peb.pebble().mustFlush()
				}
			case 17: // the key group of the current key leaves
				kg := kgOf(key)
				if rapid.Bool().Draw(rt, "whole backend") {
					mem.ClearKeyGroup(kg)
					peb.ClearKeyGroup(kg)
				} else {
					fm.lst.tab().clearKeyGroup(kg)
					fp.lst.tab().clearKeyGroup(kg)
				}
			case 18: // a Freeze view, read later
				views = append(views, view{peb.Freeze(), dump(mem)})
			case 19: // restart from canonical snapshots
				blobs := snapshotAll(rt, peb)
				nb, nf := openCached(rt, rapid.SampledFrom(bounds).Draw(rt, "cache bytes"))
				for kg, blob := range blobs {
					if err := nb.RestoreKeyGroup(kg, blob); err != nil {
						rt.Fatalf("restoring key group %d: %v", kg, err)
					}
				}
				peb.Close()
				peb, fp = nb, nf
				set(peb, key)
			case 20: // restart from a native checkpoint
				ckpt++
				stage, err := peb.CheckpointNative(ckpt)
				if err != nil {
					rt.Fatal(err)
				}
				nb, err := Open[string](Options{Kind: BackendPebble, MemTableSize: 1 << 20,
					CacheBytes: rapid.SampledFrom(bounds).Draw(rt, "cache bytes")}, keygroup.Range{Start: 0, End: maxP - 1})
				if err != nil {
					rt.Fatal(err)
				}
				if err := os.Rename(stage, nb.NativeRestoreDir(0)); err != nil {
					rt.Fatal(err)
				}
				if _, err := nb.RestoreNative([]NativePart{{Dir: nb.NativeRestoreDir(0), Start: 0, End: maxP - 1}}); err != nil {
					rt.Fatal(err)
				}
				peb.Close()
				peb, fp = nb, registerAll(nb)
				set(peb, key)
			case 22: // keep the model's key group of the current key
				saved.kg = kgOf(key)
				blob, err := mem.SnapshotKeyGroup(saved.kg)
				if err != nil {
					rt.Fatal(err)
				}
				saved.blob = blob
			case 23: // restore it over the live key group, on both
				if saved.blob != nil {
					if err := mem.RestoreKeyGroup(saved.kg, saved.blob); err != nil {
						rt.Fatal(err)
					}
					if err := peb.RestoreKeyGroup(saved.kg, saved.blob); err != nil {
						rt.Fatal(err)
					}
				}
			case 21: // read a view taken earlier
				if len(views) > 0 {
					checkView(views[0])
					views = views[1:]
				}
			}
			same := func(what string, a, b any) {
				if fmt.Sprint(a) != fmt.Sprint(b) {
					rt.Fatalf("op %d (%d on %q): %s: memory %v, pebble %v", i, op, key, what, a, b)
				}
			}
			a1, a2 := fm.val.Value()
			b1, b2 := fp.val.Value()
			same("value", []any{a1, a2}, []any{b1, b2})
			same("list", fm.lst.Get(), fp.lst.Get())
			for uk := range int32(4) {
				x1, x2 := fm.mp.Get(uk)
				y1, y2 := fp.mp.Get(uk)
				same("map get", []any{x1, x2}, []any{y1, y2})
			}
			x1, x2 := fm.nval.Value(w)
			y1, y2 := fp.nval.Value(w)
			same("nvalue", []any{x1, x2}, []any{y1, y2})
			same("nlist", fm.nlst.Get(uint8(ns)), fp.nlst.Get(uint8(ns)))
			// Point reads above never flush the cache; scans below do, so
			// not after every op.
			if rapid.IntRange(0, 9).Draw(rt, "count") == 0 {
				same("map len", fm.mp.Len(), fp.mp.Len())
				same("value keys", fm.val.tab().numKeys(), fp.val.tab().numKeys())
				same("list keys", fm.lst.tab().numKeys(), fp.lst.tab().numKeys())
				same("map keys", fm.mp.tab().numKeysInKeyGroup(kgOf(key)), fp.mp.tab().numKeysInKeyGroup(kgOf(key)))
			}
		}
		diff(rt, "pebble against memory", dump(peb), dump(mem))
		for _, name := range mem.StateNames() {
			tm, _ := mem.Table(name)
			tp, _ := peb.Table(name)
			if tm.NumKeys() != tp.NumKeys() {
				rt.Fatalf("state %q: NumKeys memory %d, pebble %d", name, tm.NumKeys(), tp.NumKeys())
			}
		}
		for _, v := range views {
			checkView(v)
		}
		views = nil
	})
}

// TestPebbleCacheListMerges: appends to a list the cache does not hold
// (flushed as Pebble merge operands) and to one it holds (appended in
// place) read back whole, across the one-byte count growing to two bytes
// (128 items), and the database holds the same list after a flush.
func TestPebbleCacheListMerges(t *testing.T) {
	b, f := openCached(t, DefaultCacheBytes)
	defer b.Close()
	set(b, "k")
	var want []string
	for i := range 300 {
		if i%50 == 0 {
			b.pebble().mustFlush()
			b.pebble().dropCache() // the next Add is an operand onto Pebble's list
		}
		f.lst.Add(fmt.Sprint(i))
		want = append(want, fmt.Sprint(i))
		if i%7 == 0 {
			if got := f.lst.Get(); !slices.Equal(got, want) {
				t.Fatalf("after %d adds: %q, want %q", i+1, got, want)
			}
		}
	}
	b.pebble().mustFlush()
	b.pebble().dropCache()
	if got := f.lst.Get(); !slices.Equal(got, want) {
		t.Fatalf("from Pebble: %d items %q, want %d", len(got), got, len(want))
	}
}

// TestPebbleCacheBounded: the cache stays within its bound (plus one entry)
// however many keys are written, and every value is read back.
func TestPebbleCacheBounded(t *testing.T) {
	const bound = 64 << 10
	b, f := openCached(t, bound)
	defer b.Close()
	for i := range 5000 {
		set(b, fmt.Sprint("key-", i))
		f.val.Update(int64(i))
		if c := b.pebble().cache; c.bytes > bound+cacheEntryBytes+64 || c.freeBytes > bound/4 {
			t.Fatalf("after %d keys the cache holds %d bytes (%d free), bound %d", i+1, c.bytes, c.freeBytes, bound)
		}
	}
	for i := range 5000 {
		set(b, fmt.Sprint("key-", i))
		if v, ok := f.val.Value(); !ok || v != int64(i) {
			t.Fatalf("key-%d: %d %v, want %d", i, v, ok, i)
		}
	}
}

func TestOpenRejectsBadCacheBytes(t *testing.T) {
	_, err := Open[string](Options{Kind: BackendPebble, CacheBytes: -2}, keygroup.Range{Start: 0, End: 3})
	if err == nil {
		t.Fatal("Open accepted CacheBytes -2")
	}
	t.Log(err)
}
