package state

import (
	"fmt"
	"maps"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// The value index's table against a Go map: random puts, lookups, deletes
// and resets over few keys (so that tombstones pile up, scans wrap around
// the table's end and the table grows and rehashes), every lookup compared,
// the table's counts and load bound (V2) checked after every operation.
func TestVindexMatchesMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var x vindex[string, int]
		model := map[string]int{}
		nKeys := rapid.IntRange(1, 300).Draw(rt, "keys")
		key := func(rt *rapid.T) string { return fmt.Sprintf("k%d", rapid.IntRange(0, nKeys-1).Draw(rt, "k")) }
		check := func(rt *rapid.T, k string) {
			sl := x.find(k)
			w, ok := model[k]
			switch {
			case !ok && sl != nil:
				rt.Fatalf("find(%s) = %d, want absent", k, sl.val)
			case ok && sl == nil:
				rt.Fatalf("find(%s) absent, want %d", k, w)
			case ok && (sl.val != w || *sl.p != w || sl.key != k):
				rt.Fatalf("find(%s) = key %s, val %d, *p %d; want %d", k, sl.key, sl.val, *sl.p, w)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"put": func(rt *rapid.T) {
				k, v := key(rt), rapid.Int().Draw(rt, "v")
				p := new(int)
				*p = v
				if sl := x.put(k, p); sl.val != v || sl.p != p || sl.key != k {
					rt.Fatalf("put(%s, %d) returned key %s, val %d", k, v, sl.key, sl.val)
				}
				model[k] = v
				check(rt, k)
			},
			"find": func(rt *rapid.T) { check(rt, key(rt)) },
			"del": func(rt *rapid.T) {
				k := key(rt)
				x.del(k)
				delete(model, k)
				check(rt, k)
			},
			"reset": func(rt *rapid.T) {
				if rapid.IntRange(0, 20).Draw(rt, "rarely") == 0 {
					x.reset()
					clear(model)
				}
			},
			"": func(rt *rapid.T) {
				if x.len() != len(model) {
					rt.Fatalf("len %d, want %d", x.len(), len(model))
				}
				if 4*(x.n+x.dead) > 3*len(x.ctrl) {
					rt.Fatalf("%d used and %d deleted of %d slots (V2)", x.n, x.dead, len(x.ctrl))
				}
				if x.ctrl != nil && (len(x.wide) != len(x.ctrl)+ctrlPad || &x.wide[0] != &x.ctrl[0]) {
					rt.Fatalf("%d control bytes, %d with their copies", len(x.ctrl), len(x.wide))
				}
				for j := len(x.ctrl); j < len(x.wide); j++ {
					if x.wide[j] != x.ctrl[j-len(x.ctrl)] {
						rt.Fatalf("control byte %d is %#x, its copy %#x", j-len(x.ctrl), x.ctrl[j-len(x.ctrl)], x.wide[j])
					}
				}
			},
		})
		for i := range nKeys {
			check(rt, fmt.Sprintf("k%d", i))
		}
	})
}

// The value state (its index in vindex, X1-X4) against a Go map, for keys
// of every shape vindex hashes (a string, an integer, and types holding
// other pointers: a pointer, an interface, a struct of a pointer and a
// string): reads, writes with and without a read before, clears,
// copy-on-write views frozen and closed in the middle (each view restores
// to its Freeze time), a key group's snapshot restored into the live
// backend later (emptied first, as on rescale: its keys go back to the
// snapshot's values), key groups cleared.
func TestValueIndexMatchesModel(t *testing.T) {
	t.Run("string", func(t *testing.T) {
		valueIndexModel(t, func(i int) string { return fmt.Sprintf("key-%d", i) })
	})
	t.Run("int64", func(t *testing.T) {
		valueIndexModel(t, func(i int) int64 { return int64(i)*7919 - 500 })
	})
	ptrs := make([]*int, 256)
	for i := range ptrs {
		ptrs[i] = new(int)
		*ptrs[i] = i
	}
	t.Run("pointer", func(t *testing.T) {
		valueIndexModel(t, func(i int) *int { return ptrs[i] })
	})
	t.Run("interface", func(t *testing.T) {
		valueIndexModel(t, func(i int) any {
			if i%2 == 0 {
				return i // an int and a string of the same digits are two keys
			}
			return fmt.Sprint(i - 1)
		})
	})
	type ps struct {
		P *int
		S string
	}
	t.Run("struct", func(t *testing.T) {
		valueIndexModel(t, func(i int) ps { return ps{ptrs[i/2], fmt.Sprint(i % 2)} })
	})
}

func valueIndexModel[K comparable](t *testing.T, keyOf func(int) K) {
	r := keygroup.Range{Start: 4, End: 11}
	kgOf := func(k K) int {
		return r.Start + int(hashK(k)%uint64(r.Len()))
	}
	// Keys go through snapshots as their number i (keyOf(i)), so that
	// a pointer or an interface's dynamic type comes back the same.
	kc := keyIndexCodec[K]{keyOf}
	rapid.Check(t, func(rt *rapid.T) {
		b := NewBackend[K](r)
		b.SetKeyGroupFunc(kgOf)
		b.SetKeyCodec(kc)
		v := MustValue[K, int64](b, "v")
		model := map[K]int64{}
		type view struct {
			fz   *Frozen[K]
			want map[K]int64
		}
		var views []view
		snaps := map[int][]byte{}         // key group -> a snapshot of it
		snapWant := map[int]map[K]int64{} // its content
		// Few keys, so that a key is often written again across a
		// Freeze and read after its view is closed.
		nKeys := rapid.IntRange(1, 24).Draw(rt, "keys")
		var key K
		setKey := func(rt *rapid.T) {
			key = keyOf(rapid.IntRange(0, nKeys-1).Draw(rt, "k"))
			if rapid.Bool().Draw(rt, "lazy") {
				b.SetCurrentKeyLazy(key)
			} else {
				b.SetCurrentKey(key, kgOf(key))
			}
		}
		checkKey := func(rt *rapid.T) {
			got, ok := v.Value()
			if w, wok := model[key]; ok != wok || got != w {
				rt.Fatalf("%v: %d, %v; want %d, %v", key, got, ok, w, wok)
			}
		}
		inGroup := func(kg int) map[K]int64 {
			m := map[K]int64{}
			for k, x := range model {
				if kgOf(k) == kg {
					m[k] = x
				}
			}
			return m
		}
		setKey(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"setKey": setKey,
			"read":   checkKey,
			"readUpdate": func(rt *rapid.T) {
				n := rapid.Int64Range(-3, 3).Draw(rt, "n")
				checkKey(rt)
				x, _ := v.Value()
				v.Update(x + n)
				model[key] += n
				checkKey(rt)
			},
			"update": func(rt *rapid.T) {
				n := rapid.Int64().Draw(rt, "n")
				v.Update(n)
				model[key] = n
			},
			"updateNewKey": func(rt *rapid.T) {
				setKey(rt)
				n := rapid.Int64().Draw(rt, "n")
				v.Update(n)
				model[key] = n
				checkKey(rt)
			},
			"clear": func(rt *rapid.T) {
				v.Clear()
				delete(model, key)
				checkKey(rt)
			},
			"freeze": func(rt *rapid.T) {
				views = append(views, view{b.Freeze(), maps.Clone(model)})
			},
			"writeAcrossView": func(rt *rapid.T) {
				// A key written while a view is live (its key group
				// serialized by the write, not copied: cow.take), then
				// read once the view is closed, from the index again.
				fz := b.Freeze()
				b.SetCurrentKeyLazy(key)
				x, _ := v.Value()
				v.Update(x + 1)
				model[key]++
				fz.Close()
				b.SetCurrentKeyLazy(key)
				checkKey(rt)
			},
			"closeView": func(rt *rapid.T) {
				if len(views) == 0 {
					return
				}
				i := rapid.IntRange(0, len(views)-1).Draw(rt, "view")
				vw := views[i]
				got := map[K]int64{}
				for kg := r.Start; kg <= r.End; kg++ {
					blob, err := vw.fz.SnapshotKeyGroup(kg)
					if err != nil {
						rt.Fatal(err)
					}
					rb := NewBackend[K](r)
					rb.SetKeyCodec(kc)
					rv := MustValue[K, int64](rb, "v")
					if err := rb.RestoreKeyGroup(kg, blob); err != nil {
						rt.Fatal(err)
					}
					ForEachValue(rv, kg, func(k K, x int64) { got[k] = x })
				}
				vw.fz.Close()
				views = append(views[:i], views[i+1:]...)
				if !maps.Equal(got, vw.want) {
					rt.Fatalf("view restores to %v, want its Freeze time's %v", got, vw.want)
				}
			},
			"snapshotGroup": func(rt *rapid.T) {
				kg := rapid.IntRange(r.Start, r.End).Draw(rt, "kg")
				blob, err := b.SnapshotKeyGroup(kg)
				if err != nil {
					rt.Fatal(err)
				}
				snaps[kg], snapWant[kg] = blob, inGroup(kg)
			},
			"restoreGroup": func(rt *rapid.T) {
				kg := rapid.IntRange(r.Start, r.End).Draw(rt, "kg")
				blob, ok := snaps[kg]
				if !ok {
					return
				}
				// As a rescale does: the key group emptied, then restored.
				b.ClearKeyGroup(kg)
				if err := b.RestoreKeyGroup(kg, blob); err != nil {
					rt.Fatal(err)
				}
				maps.DeleteFunc(model, func(k K, _ int64) bool { return kgOf(k) == kg })
				maps.Copy(model, snapWant[kg])
				checkKey(rt)
			},
			"clearGroup": func(rt *rapid.T) {
				kg := rapid.IntRange(r.Start, r.End).Draw(rt, "kg")
				b.ClearKeyGroup(kg)
				maps.DeleteFunc(model, func(k K, _ int64) bool { return kgOf(k) == kg })
				checkKey(rt)
			},
		})
		for i := range nKeys {
			key = keyOf(i)
			b.SetCurrentKeyLazy(key)
			checkKey(rt)
		}
		all := map[K]int64{}
		for kg := r.Start; kg <= r.End; kg++ {
			ForEachValue(v, kg, func(k K, x int64) { all[k] = x })
		}
		if !maps.Equal(all, model) {
			rt.Fatalf("key groups hold %v, want %v", all, model)
		}
		for _, vw := range views {
			vw.fz.Close()
		}
	})
}

// keyIndexCodec encodes a test key keyOf(i) as the byte i.
type keyIndexCodec[K comparable] struct{ keyOf func(int) K }

func (c keyIndexCodec[K]) Append(dst []byte, k K) ([]byte, error) {
	for i := range 256 {
		if c.keyOf(i) == k {
			return append(dst, byte(i)), nil
		}
	}
	return nil, fmt.Errorf("key %v is no keyOf(i)", k)
}

func (c keyIndexCodec[K]) Decode(src []byte) (K, error) {
	if len(src) != 1 {
		var zero K
		return zero, fmt.Errorf("%d bytes, want 1", len(src))
	}
	return c.keyOf(int(src[0])), nil
}

// hashK is a stable hash of a test key for its key group.
func hashK[K comparable](k K) uint64 {
	return uint64(keygroup.HashString(fmt.Sprint(k)))
}

// A read of a present key and its write touch no allocation, for every
// shape of key vindex hashes: a string, a struct of a string and an
// integer, a pointer, an interface, a struct holding a pointer.
func TestValueIndexNoAllocs(t *testing.T) {
	type sk struct {
		A string
		B int32
	}
	type pk struct {
		P *int
		S string
	}
	i1, i2 := new(int), new(int)
	valueNoAllocs(t, "string", []string{"a", "b", "c"}, func(k string) int { return kgOf(k) })
	valueNoAllocs(t, "struct", []sk{{"x", 3}, {"x", 4}}, func(k sk) int { return kgOf(k.A) })
	valueNoAllocs(t, "pointer", []*int{i1, i2}, func(k *int) int { return kgOf(fmt.Sprint(k)) })
	valueNoAllocs(t, "interface", []any{1, "1", 2.5, sk{"y", 1}}, func(k any) int { return kgOf(fmt.Sprint(k)) })
	valueNoAllocs(t, "struct with a pointer", []pk{{i1, "a"}, {i2, "a"}}, func(k pk) int { return kgOf(k.S) })
}

func valueNoAllocs[K comparable](t *testing.T, name string, keys []K, kg func(K) int) {
	t.Helper()
	b := NewBackend[K](keygroup.Range{Start: 0, End: maxP - 1})
	b.SetKeyGroupFunc(kg)
	v := MustValue[K, int64](b, "v")
	for _, k := range keys {
		b.SetCurrentKeyLazy(k)
		v.Update(1)
	}
	if v.vi.len() != len(keys) {
		t.Fatalf("%s: %d keys in the index, want %d", name, v.vi.len(), len(keys))
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			b.SetCurrentKeyLazy(k)
			n, _ := v.Value()
			v.Update(n + 1)
		}
	}); n != 0 {
		t.Errorf("%s: %.1f allocations per reads and writes", name, n)
	}
	for _, k := range keys {
		b.SetCurrentKeyLazy(k)
		if n, _ := v.Value(); n != 102 {
			t.Errorf("%s: %v counts %d, want 102", name, k, n)
		}
	}
}
