// Package vectortest is the conformance suite of vector.Store
// implementations: the embedded vector.Flat and the Postgres store
// (agent/vector/pgvector) both run it, so what the package documentation
// promises (S1-S3) is checked the same way for each.
//
// # What Run checks
//
//	V1. Refusals (S1): an item without ID, with an empty vector or of
//	    another dimension makes the whole call store nothing and the error
//	    name the item; a query of another dimension or with K < 1 is an
//	    error.
//	V2. A call that upserts an ID twice keeps its last version; Delete of
//	    unknown IDs is not an error.
//	V3. The model (S1, S2): random upserts, deletes and searches, filtered
//	    or not, on the store and on a map with the textbook cosine agree:
//	    the same hits, in the same order, with the same scores (within
//	    float32 error; where the model's scores tie, either item may come
//	    first). Small integer vectors make ties and zero vectors frequent.
//	V4. Idempotence (the external-store contract): replaying any suffix of
//	    the changes applied so far, as a job restored from a checkpoint
//	    does, leaves every search answering as before the replay.
//	V5. S3: a hit's metadata is the caller's to change.
//	V6. Concurrent upserts from several goroutines all land, and searches
//	    running beside them do not fail.
//
// The model test (V3) assumes exact search: a store with an approximate
// index must run it in its exact mode and check its recall separately.
package vectortest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/weirproject/weir/agent/vector"
)

// Open returns an empty store whose vectors have dim dimensions (dim is
// between 1 and 12). Run calls it once per check and once per rapid case;
// the store must be empty and independent of those opened before it (a
// new namespace or table of a database store). A store with a Close()
// method is closed at the end of its rapid case; other cleanup is the
// opener's (t.Cleanup on the test it is given).
type Open func(t *testing.T, dim int) vector.Store

// Run runs the suite on the stores open makes (the checks listed in the
// package documentation).
func Run(t *testing.T, open Open) {
	t.Run("Refusals", func(t *testing.T) { refusals(t, open) })
	t.Run("RepeatedIDs", func(t *testing.T) { repeatedIDs(t, open) })
	t.Run("MatchesModel", func(t *testing.T) { matchesModel(t, open) })
	t.Run("ReplayIsIdempotent", func(t *testing.T) { replayIsIdempotent(t, open) })
	t.Run("HitsAreCopies", func(t *testing.T) { hitsAreCopies(t, open) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, open) })
}

func refusals(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, 2)
	if err := s.Upsert(ctx, vector.Item{ID: "a", Vector: []float32{1, 0}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []vector.Item{{ID: "", Vector: []float32{1, 0}}, {ID: "b"}, {ID: "c", Vector: []float32{1, 2, 3}}} {
		err := s.Upsert(ctx, vector.Item{ID: "ok", Vector: []float32{0, 1}}, bad)
		if err == nil {
			t.Fatalf("item %+v accepted", bad)
		}
		if bad.ID != "" && !strings.Contains(err.Error(), bad.ID) {
			t.Errorf("the error for item %q does not name it: %v", bad.ID, err)
		}
	}
	hits, err := s.Search(ctx, vector.Query{Vector: []float32{0, 1}, K: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].ID != "a" {
		t.Fatalf("after refused calls the store holds %v, want only a", hits)
	}
	if _, err := s.Search(ctx, vector.Query{Vector: []float32{1}, K: 1}); err == nil {
		t.Fatal("a query of another dimension was accepted")
	}
	if _, err := s.Search(ctx, vector.Query{Vector: []float32{1, 0}}); err == nil {
		t.Fatal("a query with K 0 was accepted")
	}
}

func repeatedIDs(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, 2)
	err := s.Upsert(ctx,
		vector.Item{ID: "x", Vector: []float32{1, 0}, Content: "first"},
		vector.Item{ID: "y", Vector: []float32{0, 1}, Content: "y"},
		vector.Item{ID: "x", Vector: []float32{0, 1}, Content: "last", Metadata: map[string]string{"v": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "nobody", "nothing"); err != nil {
		t.Fatalf("deleting unknown IDs: %v", err)
	}
	hits, err := s.Search(ctx, vector.Query{Vector: []float32{0, 1}, K: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := []vector.Hit{{ID: "x", Content: "last", Metadata: map[string]string{"v": "2"}, Score: 1}, {ID: "y", Content: "y", Score: 1}}
	if err := sameExact(hits, want); err != nil {
		t.Fatal(err)
	}
}

// sameExact compares hits field by field, scores within float32 error.
func sameExact(got, want []vector.Hit) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d hits %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Content != w.Content || !equalMeta(g.Metadata, w.Metadata) || math.Abs(float64(g.Score-w.Score)) > 1e-4 {
			return fmt.Errorf("hit %d is %+v, want %+v", i, g, w)
		}
	}
	return nil
}

func equalMeta(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Model is the specification of a Store: a map, and a search that scores
// every matching item with the textbook cosine (in float64) and sorts
// them all.
type Model struct {
	Items map[string]vector.Item
}

// NewModel returns an empty model.
func NewModel() *Model { return &Model{Items: map[string]vector.Item{}} }

// Apply applies a change to the model.
func (m *Model) Apply(c vector.Change) {
	if c.Delete {
		delete(m.Items, c.Item.ID)
		return
	}
	m.Items[c.Item.ID] = c.Item
}

// Cosine is the cosine similarity of a and b, 0 when either is zero.
func Cosine(a, b []float32) float64 {
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

// Search returns the model's answer to q.
func (m *Model) Search(q vector.Query) []vector.Hit {
	var hs []vector.Hit
	for _, it := range m.Items {
		if q.Filter.Match(it.Metadata) {
			hs = append(hs, vector.Hit{ID: it.ID, Content: it.Content, Metadata: it.Metadata, Score: float32(Cosine(q.Vector, it.Vector))})
		}
	}
	slices.SortFunc(hs, func(a, b vector.Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return hs[:min(q.K, len(hs))]
}

// SameHits compares a store's hits with the model's: scores position by
// position within float32 error, and IDs, except that where the model's
// scores are within that error of each other (a tie in exact arithmetic)
// either item may come first, or be the one inside the top K: the hit's
// own score, as the model computes it, must then be within the error of
// the wanted one. Content and metadata must be the item's.
func (m *Model) SameHits(q vector.Query, got, want []vector.Hit) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d hits, want %d (got %v, want %v)", len(got), len(want), got, want)
	}
	for i := range got {
		if math.Abs(float64(got[i].Score-want[i].Score)) > 1e-4 {
			return fmt.Errorf("hit %d: score %v, want %v (got %v, want %v)", i, got[i].Score, want[i].Score, got, want)
		}
		it, ok := m.Items[got[i].ID]
		if !ok || !q.Filter.Match(it.Metadata) {
			return fmt.Errorf("hit %d: %s is not in the store or does not match the filter (got %v, want %v)", i, got[i].ID, got, want)
		}
		if got[i].Content != it.Content || !equalMeta(got[i].Metadata, it.Metadata) {
			return fmt.Errorf("hit %d: %+v does not carry the item's content and metadata %+v", i, got[i], it)
		}
		if got[i].ID != want[i].ID && math.Abs(Cosine(q.Vector, it.Vector)-float64(want[i].Score)) > 1e-4 {
			return fmt.Errorf("hit %d: %s, want %s (got %v, want %v)", i, got[i].ID, want[i].ID, got, want)
		}
	}
	return nil
}

// gens draws the test's changes and queries: few IDs, two tags, small
// integer components (so ties and zero vectors are frequent).
type gens struct {
	dim int
	vec *rapid.Generator[[]int32]
	id  *rapid.Generator[string]
	tag *rapid.Generator[string]
}

func newGens(t *rapid.T) gens {
	dim := rapid.IntRange(1, 12).Draw(t, "dim")
	return gens{
		dim: dim,
		vec: rapid.SliceOfN(rapid.Int32Range(-2, 2), dim, dim),
		id:  rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h"}),
		tag: rapid.SampledFrom([]string{"red", "blue"}),
	}
}

func toVec(xs []int32) []float32 {
	v := make([]float32, len(xs))
	for i, x := range xs {
		v[i] = float32(x)
	}
	return v
}

func (g gens) change(t *rapid.T, step int) vector.Change {
	if rapid.IntRange(0, 4).Draw(t, "op") == 0 {
		return vector.Remove(g.id.Draw(t, "del"))
	}
	it := vector.Item{ID: g.id.Draw(t, "id"), Vector: toVec(g.vec.Draw(t, "vec")), Content: fmt.Sprint("c", step)}
	if rapid.IntRange(0, 4).Draw(t, "meta") > 0 {
		it.Metadata = map[string]string{"tag": g.tag.Draw(t, "tag")}
	}
	return vector.Upsert(it)
}

func (g gens) query(t *rapid.T) vector.Query {
	q := vector.Query{Vector: toVec(g.vec.Draw(t, "q")), K: rapid.IntRange(1, 9).Draw(t, "k")}
	if rapid.Bool().Draw(t, "filter") {
		q.Filter = vector.Filter{"tag": g.tag.Draw(t, "ftag")}
	}
	return q
}

// closeStore closes a store that has a Close method (a database store's
// connections).
func closeStore(s vector.Store) {
	if c, ok := s.(interface{ Close() }); ok {
		c.Close()
	}
}

func apply(ctx context.Context, s vector.Store, c vector.Change) error {
	if c.Delete {
		return s.Delete(ctx, c.Item.ID)
	}
	return s.Upsert(ctx, c.Item)
}

func matchesModel(t *testing.T, open Open) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		g := newGens(rt)
		s := open(t, g.dim)
		defer closeStore(s)
		m := NewModel()
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			if rapid.IntRange(0, 2).Draw(rt, "search") == 0 {
				q := g.query(rt)
				got, err := s.Search(ctx, q)
				if err != nil {
					rt.Fatal(err)
				}
				if err := m.SameHits(q, got, m.Search(q)); err != nil {
					rt.Fatalf("step %d, query %+v: %v", step, q, err)
				}
				continue
			}
			c := g.change(rt, step)
			if err := apply(ctx, s, c); err != nil {
				rt.Fatal(err)
			}
			m.Apply(c)
		}
	})
}

func replayIsIdempotent(t *testing.T, open Open) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		g := newGens(rt)
		s := open(t, g.dim)
		defer closeStore(s)
		m := NewModel()
		var log []vector.Change
		for step := range rapid.IntRange(1, 25).Draw(rt, "changes") {
			c := g.change(rt, step)
			if err := apply(ctx, s, c); err != nil {
				rt.Fatal(err)
			}
			m.Apply(c)
			log = append(log, c)
		}
		// A restore from the checkpoint taken after `from` changes replays
		// the ones after it into the store, which kept them all.
		from := rapid.IntRange(0, len(log)).Draw(rt, "checkpoint")
		for _, c := range log[from:] {
			if err := apply(ctx, s, c); err != nil {
				rt.Fatal(err)
			}
		}
		for _, tag := range []string{"", "red", "blue"} {
			q := vector.Query{Vector: toVec(g.vec.Draw(rt, "q")), K: 9}
			if tag != "" {
				q.Filter = vector.Filter{"tag": tag}
			}
			got, err := s.Search(ctx, q)
			if err != nil {
				rt.Fatal(err)
			}
			if err := m.SameHits(q, got, m.Search(q)); err != nil {
				rt.Fatalf("after replaying changes %d..%d: query %+v: %v", from, len(log), q, err)
			}
		}
	})
}

func hitsAreCopies(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, 2)
	md := map[string]string{"k": "v"}
	if err := s.Upsert(ctx, vector.Item{ID: "m", Vector: []float32{1, 1}, Metadata: md}); err != nil {
		t.Fatal(err)
	}
	md["k"] = "changed by the caller"
	for range 2 {
		hs, err := s.Search(ctx, vector.Query{Vector: []float32{1, 1}, K: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 || hs[0].Metadata["k"] != "v" {
			t.Fatalf("hits %v, want m with k=v (the store must copy metadata in and out)", hs)
		}
		hs[0].Metadata["k"] = "changed"
	}
}

func concurrent(t *testing.T, open Open) {
	ctx := context.Background()
	s := open(t, 3)
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range each {
				it := vector.Item{ID: fmt.Sprintf("w%d-%02d", w, i), Vector: []float32{float32(w + 1), float32(i), 1}}
				if err := s.Upsert(ctx, it); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range each {
				if _, err := s.Search(ctx, vector.Query{Vector: []float32{1, 1, 1}, K: 3}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, vector.Query{Vector: []float32{1, 0, 0}, K: writers*each + 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != writers*each {
		t.Fatalf("%d items after %d concurrent upserts", len(hits), writers*each)
	}
}
