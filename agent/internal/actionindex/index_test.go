package actionindex

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// maxID is the highest run identity the model test uses.
const maxID = 24

// model is the plain map the index must agree with: key -> run id ->
// position and value.
type model map[string]map[int]modelRun

type modelRun struct {
	pos Position
	v   int
}

func (m model) latest(key string) (Position, bool) {
	var best Position
	ok := false
	for _, r := range m[key] {
		if !ok || best.Less(r.pos) {
			best, ok = r.pos, true
		}
	}
	return best, ok
}

func (m model) removeIf(key string, drop func(Position) bool) map[int]modelRun {
	gone := map[int]modelRun{}
	for id, r := range m[key] {
		if drop(r.pos) {
			gone[id] = r
			delete(m[key], id)
		}
	}
	if len(m[key]) == 0 {
		delete(m, key)
	}
	return gone
}

// TestIndexMatchesModel runs random sequences of Put, Remove, DiscardFrom
// and Prune over a few keys against the model and checks I1-I4 after each
// step. Keys get up to maxID+1 runs, so that removals move runs within
// their key's slice.
func TestIndexMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := New[int, int]()
		m := model{}
		keyGen := rapid.SampledFrom([]string{"a", "b", "c", ""})
		idGen := rapid.IntRange(0, maxID)
		posGen := rapid.Custom(func(t *rapid.T) Position {
			return Position{Seq: rapid.Int64Range(0, 6).Draw(t, "seq"),
				EventID: rapid.Int64Range(-1, 2).Draw(t, "event"), Action: rapid.IntRange(0, 2).Draw(t, "action")}
		})
		for step := range rapid.IntRange(1, 200).Draw(t, "steps") {
			key := keyGen.Draw(t, "key")
			removed := map[int]modelRun{}
			collect := func(r Run[int, int]) {
				if _, dup := removed[r.ID]; dup {
					t.Fatalf("step %d: run %d removed twice", step, r.ID)
				}
				removed[r.ID] = modelRun{r.Pos, r.V}
			}
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 6:
				id, pos, v := idGen.Draw(t, "id"), posGen.Draw(t, "pos"), step
				old, replaced := x.Put([]byte(key), id, pos, v)
				want, had := m[key][id]
				if replaced != had || (had && (old.Pos != want.pos || old.V != want.v || old.ID != id)) {
					t.Fatalf("step %d: Put(%q, %d) replaced %v %+v, model %v %+v", step, key, id, replaced, old, had, want)
				}
				if m[key] == nil {
					m[key] = map[int]modelRun{}
				}
				m[key][id] = modelRun{pos, v}
			case op < 7:
				id := idGen.Draw(t, "id")
				r, ok := x.Remove([]byte(key), id)
				want, had := m[key][id]
				if ok != had || (had && (r.Pos != want.pos || r.V != want.v)) {
					t.Fatalf("step %d: Remove(%q, %d) = %+v %v, model %+v %v", step, key, id, r, ok, want, had)
				}
				if had {
					delete(m[key], id)
					if len(m[key]) == 0 {
						delete(m, key)
					}
				}
			case op < 8:
				from := posGen.Draw(t, "from")
				x.DiscardFrom([]byte(key), from, collect)
				want := m.removeIf(key, func(p Position) bool { return !p.Less(from) })
				if !maps.Equal(removed, want) {
					t.Fatalf("step %d: DiscardFrom(%q, %+v) removed %v, model %v", step, key, from, removed, want)
				}
			default:
				seq := rapid.Int64Range(-1, 6).Draw(t, "seq")
				x.Prune([]byte(key), seq, collect)
				want := m.removeIf(key, func(p Position) bool { return p.Seq <= seq })
				if !maps.Equal(removed, want) {
					t.Fatalf("step %d: Prune(%q, %d) removed %v, model %v", step, key, seq, removed, want)
				}
			}
			check(t, x, m)
		}
	})
}

// check compares every observable of x with m.
func check(t *rapid.T, x *Index[int, int], m model) {
	n := 0
	for _, runs := range m {
		n += len(runs)
	}
	if x.Len() != n || x.Keys() != len(m) {
		t.Fatalf("Len %d, Keys %d; model %d runs of %d keys", x.Len(), x.Keys(), n, len(m))
	}
	for _, key := range []string{"a", "b", "c", ""} {
		got, ok := x.Latest([]byte(key))
		want, wok := m.latest(key)
		if ok != wok || got != want {
			t.Fatalf("Latest(%q) = %+v %v, model %+v %v", key, got, ok, want, wok)
		}
		for id := range maxID + 1 {
			v, ok := x.Get([]byte(key), id)
			r, had := m[key][id]
			if ok != had || v != r.v {
				t.Fatalf("Get(%q, %d) = %d %v, model %+v %v", key, id, v, ok, r, had)
			}
		}
	}
	all := model{}
	for k, r := range x.All() {
		if all[k] == nil {
			all[k] = map[int]modelRun{}
		}
		if _, dup := all[k][r.ID]; dup {
			t.Fatalf("All yields run %d of %q twice", r.ID, k)
		}
		all[k][r.ID] = modelRun{r.Pos, r.V}
	}
	if !maps.EqualFunc(all, m, maps.Equal) {
		t.Fatalf("All = %v, model %v", all, m)
	}
}

// TestLatestFollowsRemovals pins I2 on the cases a cached maximum gets
// wrong: the latest run removed, and moved back by a Put.
func TestLatestFollowsRemovals(t *testing.T) {
	x := New[string, int]()
	k := []byte("k")
	for i, id := range []string{"a", "b", "c"} {
		x.Put(k, id, Position{Seq: int64(i)}, i)
	}
	if p, _ := x.Latest(k); p.Seq != 2 {
		t.Fatalf("Latest = %+v, want seq 2", p)
	}
	x.Remove(k, "c")
	if p, _ := x.Latest(k); p.Seq != 1 {
		t.Fatalf("after removing the latest: %+v, want seq 1", p)
	}
	x.Put(k, "b", Position{Seq: 0, EventID: 1}, 0)
	if p, _ := x.Latest(k); p != (Position{Seq: 0, EventID: 1}) {
		t.Fatalf("after moving the latest back: %+v, want seq 0 event 1", p)
	}
	var gone []string
	x.Prune(k, 0, func(r Run[string, int]) { gone = append(gone, r.ID) })
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"a", "b"}) || x.Len() != 0 || x.Keys() != 0 {
		t.Fatalf("Prune removed %v, left %d runs of %d keys", gone, x.Len(), x.Keys())
	}
	if _, ok := x.Latest(k); ok {
		t.Fatal("Latest of a key without runs is ok")
	}
}
