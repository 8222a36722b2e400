package vector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// model is the specification of a Store: a map, and a search that scores
// every item with the textbook cosine and sorts them all.
type model struct {
	items map[string]Item
}

func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return d / math.Sqrt(na*nb)
}

func (m *model) search(q Query) []Hit {
	var hs []Hit
	for _, it := range m.items {
		if q.Filter.Match(it.Metadata) {
			hs = append(hs, Hit{ID: it.ID, Content: it.Content, Metadata: it.Metadata, Score: float32(cosine(q.Vector, it.Vector))})
		}
	}
	slices.SortFunc(hs, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return hs[:min(q.K, len(hs))]
}

// sameHits compares hit lists: scores position by position within
// float32 error, and IDs, except that where the model's scores are within
// that error of each other (a tie in exact arithmetic) either item may
// come first, or be the one inside the top K: the hit's own score, as the
// model computes it, must then be within the error of the wanted one.
func (m *model) sameHits(q Query, got, want []Hit) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d hits, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i].Score-want[i].Score)) > 1e-4 {
			return fmt.Errorf("hit %d: score %v, want %v (got %v, want %v)", i, got[i].Score, want[i].Score, got, want)
		}
		if got[i].ID != want[i].ID {
			it, ok := m.items[got[i].ID]
			if !ok || !q.Filter.Match(it.Metadata) || math.Abs(cosine(q.Vector, it.Vector)-float64(want[i].Score)) > 1e-4 {
				return fmt.Errorf("hit %d: %s, want %s (got %v, want %v)", i, got[i].ID, want[i].ID, got, want)
			}
		}
	}
	return nil
}

// TestFlatMatchesModel: random upserts, deletes and searches on a Flat and
// on the model agree; so do a Flat encoded and decoded half-way and one
// that was not.
func TestFlatMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dim := rapid.IntRange(1, 12).Draw(t, "dim")
		ctx := context.Background()
		f := NewFlat(0)
		m := &model{items: map[string]Item{}}
		// Small integer components make exact ties likely.
		vecGen := rapid.SliceOfN(rapid.Int32Range(-2, 2), dim, dim)
		toVec := func(xs []int32) []float32 {
			v := make([]float32, len(xs))
			for i, x := range xs {
				v[i] = float32(x)
			}
			return v
		}
		idGen := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h"})
		tagGen := rapid.SampledFrom([]string{"red", "blue"})
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2, 3:
				it := Item{ID: idGen.Draw(t, "id"), Vector: toVec(vecGen.Draw(t, "vec")), Content: fmt.Sprint("c", step),
					Metadata: map[string]string{"tag": tagGen.Draw(t, "tag")}}
				if err := f.Upsert(ctx, it); err != nil {
					t.Fatal(err)
				}
				m.items[it.ID] = it
			case 4:
				id := idGen.Draw(t, "del")
				f.Delete(ctx, id)
				delete(m.items, id)
			case 5:
				b, err := f.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				g := &Flat{}
				if err := g.UnmarshalBinary(b); err != nil {
					t.Fatal(err)
				}
				f = g
			default:
				q := Query{Vector: toVec(vecGen.Draw(t, "q")), K: rapid.IntRange(1, 5).Draw(t, "k")}
				if rapid.Bool().Draw(t, "filter") {
					q.Filter = Filter{"tag": tagGen.Draw(t, "ftag")}
				}
				got, err := f.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.sameHits(q, got, m.search(q)); err != nil {
					t.Fatalf("step %d, query %+v: %v", step, q, err)
				}
			}
			if f.Len() != len(m.items) {
				t.Fatalf("Len %d, model %d", f.Len(), len(m.items))
			}
		}
	})
}

func TestFlatRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	f := NewFlat(0)
	if err := f.Upsert(ctx, Item{ID: "a", Vector: []float32{1, 0}}); err != nil {
		t.Fatal(err)
	}
	for _, it := range []Item{{ID: "", Vector: []float32{1, 0}}, {ID: "b"}, {ID: "c", Vector: []float32{1, 2, 3}}} {
		if err := f.Upsert(ctx, Item{ID: "ok", Vector: []float32{0, 1}}, it); err == nil {
			t.Fatalf("item %+v accepted", it)
		}
	}
	if f.Len() != 1 {
		t.Fatalf("a refused call stored items: %d", f.Len())
	}
	if _, err := f.Search(ctx, Query{Vector: []float32{1}, K: 1}); err == nil {
		t.Fatal("query of another dimension accepted")
	}
	if _, err := f.Search(ctx, Query{Vector: []float32{1, 0}}); err == nil {
		t.Fatal("K 0 accepted")
	}
	b, _ := f.MarshalBinary()
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0), []byte("nope"), nil} {
		g := NewFlat(0)
		if err := g.UnmarshalBinary(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decoding %q: %v, want ErrCorrupt", bad, err)
		}
	}
	// The hits' metadata is the caller's.
	f.Upsert(ctx, Item{ID: "m", Vector: []float32{1, 1}, Metadata: map[string]string{"k": "v"}})
	hs, _ := f.Search(ctx, Query{Vector: []float32{1, 1}, K: 1})
	hs[0].Metadata["k"] = "changed"
	if it, _ := f.Get("m"); it.Metadata["k"] != "v" {
		t.Fatal("a hit's metadata aliases the store's")
	}
}
