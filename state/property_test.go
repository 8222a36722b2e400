package state

import (
	"maps"
	"slices"
	"testing"

	"github.com/weirproject/weir/keygroup"
	"pgregory.net/rapid"
)

// TestStateMatchesModel drives value, list and map state (and their
// namespaced forms) with random keys and operations and compares every read
// with plain Go maps.
func TestStateMatchesModel(t *testing.T) {
	r := keygroup.Range{Start: 8, End: 23}
	rapid.Check(t, func(rt *rapid.T) {
		b := newB[string](r)
		val := MustValue[string, int](b, "val")
		lst := MustList[string, int](b, "lst")
		mp := MustMap[string, int, int](b, "mp")
		nval := MustNamespacedValue[string, int, int](b, "nval")
		nlst := MustNamespacedList[string, int, int](b, "nlst")

		type nk struct {
			key string
			ns  int
		}
		mVal := map[string]int{}
		mLst := map[string][]int{}
		mMap := map[string]map[int]int{}
		mNVal := map[nk]int{}
		mNLst := map[nk][]int{}
		kgs := map[string]int{}

		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		var key string
		genInt := rapid.IntRange(0, 5)
		ns := func(rt *rapid.T) int { return rapid.IntRange(0, 2).Draw(rt, "ns") }

		setKey := func(rt *rapid.T) {
			key = rapid.SampledFrom(keys).Draw(rt, "key")
			kg, ok := kgs[key]
			if !ok {
				kg = r.Start + (int(keygroup.HashString(key))&0x7fffffff)%r.Len()
				kgs[key] = kg
			}
			b.SetCurrentKey(key, kg)
		}
		setKey(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"setKey": setKey,
			"valueUpdate": func(rt *rapid.T) {
				v := genInt.Draw(rt, "v")
				val.Update(v)
				mVal[key] = v
			},
			"valueClear": func(rt *rapid.T) {
				val.Clear()
				delete(mVal, key)
			},
			"listAdd": func(rt *rapid.T) {
				v := genInt.Draw(rt, "v")
				lst.Add(v)
				mLst[key] = append(slices.Clone(mLst[key]), v)
			},
			"listUpdate": func(rt *rapid.T) {
				vs := rapid.SliceOfN(genInt, 0, 4).Draw(rt, "vs")
				if rapid.Bool().Draw(rt, "aliased") && len(lst.Get()) > 0 {
					cur := lst.Get()
					vs = cur[rapid.IntRange(0, len(cur)-1).Draw(rt, "from"):]
				}
				want := slices.Clone(vs)
				lst.Update(vs)
				if len(want) == 0 {
					delete(mLst, key)
				} else {
					mLst[key] = want
				}
			},
			"listClear": func(rt *rapid.T) {
				lst.Clear()
				delete(mLst, key)
			},
			"mapPut": func(rt *rapid.T) {
				uk, uv := genInt.Draw(rt, "uk"), genInt.Draw(rt, "uv")
				mp.Put(uk, uv)
				if mMap[key] == nil {
					mMap[key] = map[int]int{}
				}
				mMap[key][uk] = uv
			},
			"mapRemove": func(rt *rapid.T) {
				uk := genInt.Draw(rt, "uk")
				mp.Remove(uk)
				delete(mMap[key], uk)
				if len(mMap[key]) == 0 {
					delete(mMap, key)
				}
			},
			"mapClear": func(rt *rapid.T) {
				mp.Clear()
				delete(mMap, key)
			},
			"mapGetPut": func(rt *rapid.T) {
				// Read, then write the same key: the write goes through
				// the map remembered by the read.
				uk := genInt.Draw(rt, "uk")
				v, _ := mp.Get(uk)
				mp.Put(uk, v+1)
				if mMap[key] == nil {
					mMap[key] = map[int]int{}
				}
				mMap[key][uk] = v + 1
			},
			"valueIncrement": func(rt *rapid.T) {
				// Read, then write: an absent key is inserted without a
				// second lookup, a present one through the cached entry.
				v, _ := val.Value()
				val.Update(v + 1)
				mVal[key] = v + 1
			},
			"clearKeyGroup": func(rt *rapid.T) {
				// Drops the current key's entries too; later reads and
				// writes of the current key must not use remembered ones.
				kg := kgs[key]
				b.ClearKeyGroup(kg)
				for k, g := range kgs {
					if g != kg {
						continue
					}
					delete(mVal, k)
					delete(mLst, k)
					delete(mMap, k)
					for n := range 3 {
						delete(mNVal, nk{k, n})
						delete(mNLst, nk{k, n})
					}
				}
			},
			"nsUpdate": func(rt *rapid.T) {
				n, v := ns(rt), genInt.Draw(rt, "v")
				nval.Update(n, v)
				mNVal[nk{key, n}] = v
			},
			"nsModify": func(rt *rapid.T) {
				n, v := ns(rt), genInt.Draw(rt, "v")
				old, had := mNVal[nk{key, n}]
				var seen int
				var seenOK bool
				if got := nval.Modify(n, func(cur int, ok bool) int { seen, seenOK = cur, ok; return cur + v + 1 }); got != had || seenOK != had || seen != old {
					rt.Fatalf("Modify(%d): reported %v, saw (%d, %v); want %v, (%d, %v)", n, got, seen, seenOK, had, old, had)
				}
				mNVal[nk{key, n}] = old + v + 1
			},
			"nsClear": func(rt *rapid.T) {
				n := ns(rt)
				nval.Clear(n)
				delete(mNVal, nk{key, n})
			},
			"nsListAdd": func(rt *rapid.T) {
				n, v := ns(rt), genInt.Draw(rt, "v")
				nlst.Add(n, v)
				mNLst[nk{key, n}] = append(slices.Clone(mNLst[nk{key, n}]), v)
			},
			"nsListClear": func(rt *rapid.T) {
				n := ns(rt)
				nlst.Clear(n)
				delete(mNLst, nk{key, n})
			},
			"": func(rt *rapid.T) {
				// Reads of the current key.
				v, ok := val.Value()
				if mv, mok := mVal[key]; ok != mok || v != mv {
					rt.Fatalf("Value() = %d %v, model %d %v", v, ok, mv, mok)
				}
				if got := lst.Get(); !slices.Equal(got, mLst[key]) {
					rt.Fatalf("Get() = %v, model %v", got, mLst[key])
				}
				if mp.Len() != len(mMap[key]) {
					rt.Fatalf("map Len %d, model %d", mp.Len(), len(mMap[key]))
				}
				for uk := range 6 {
					v, ok := mp.Get(uk)
					mv, mok := mMap[key][uk]
					if ok != mok || v != mv || mp.Contains(uk) != mok {
						rt.Fatalf("map Get(%d) = %d %v, model %d %v", uk, v, ok, mv, mok)
					}
				}
				got := map[int]int{}
				mp.Range(func(uk, uv int) bool { got[uk] = uv; return true })
				if !maps.Equal(got, mMap[key]) {
					rt.Fatalf("map Range %v, model %v", got, mMap[key])
				}
				for n := range 3 {
					v, ok := nval.Value(n)
					mv, mok := mNVal[nk{key, n}]
					if ok != mok || v != mv {
						rt.Fatalf("ns Value(%d) = %d %v, model %d %v", n, v, ok, mv, mok)
					}
					if got := nlst.Get(n); !slices.Equal(got, mNLst[nk{key, n}]) {
						rt.Fatalf("ns Get(%d) = %v, model %v", n, got, mNLst[nk{key, n}])
					}
				}
				// Entry counts: no garbage entries for cleared keys.
				if val.tab().numKeys() != len(mVal) || lst.tab().numKeys() != len(mLst) || mp.tab().numKeys() != len(mMap) ||
					nval.tab().numKeys() != len(mNVal) || nlst.tab().numKeys() != len(mNLst) {
					rt.Fatalf("NumKeys %d %d %d %d %d, model %d %d %d %d %d",
						val.tab().numKeys(), lst.tab().numKeys(), mp.tab().numKeys(), nval.tab().numKeys(), nlst.tab().numKeys(),
						len(mVal), len(mLst), len(mMap), len(mNVal), len(mNLst))
				}
			},
		})

		// Per-key-group iteration sees exactly the model's entries, each in
		// its own key group.
		gotVal := map[string]int{}
		gotLst := map[string][]int{}
		gotMap := map[string]map[int]int{}
		for kg := r.Start; kg <= r.End; kg++ {
			val.forEach(kg, func(k string, v int) {
				if kgs[k] != kg {
					rt.Fatalf("key %q of kg %d iterated in kg %d", k, kgs[k], kg)
				}
				gotVal[k] = v
			})
			lst.forEach(kg, func(k string, v []int) { gotLst[k] = slices.Clone(v) })
			mp.forEach(kg, func(k string, uk, uv int) {
				if gotMap[k] == nil {
					gotMap[k] = map[int]int{}
				}
				gotMap[k][uk] = uv
			})
		}
		if !maps.Equal(gotVal, mVal) {
			rt.Fatalf("value ForEach %v, model %v", gotVal, mVal)
		}
		if !maps.EqualFunc(gotLst, mLst, slices.Equal) {
			rt.Fatalf("list ForEach %v, model %v", gotLst, mLst)
		}
		if !maps.EqualFunc(gotMap, mMap, maps.Equal) {
			rt.Fatalf("map ForEach %v, model %v", gotMap, mMap)
		}
	})
}
