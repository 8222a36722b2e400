package vector

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The embedded store's search against the loop one would write by hand:
// vectors as [][]float32, the textbook cosine (dot product over both
// norms) per item, every score sorted, the first K kept. Same data, same
// queries, same K; the answers are compared once before timing.
//
//	go test ./agent/vector -run '^$' -bench Search -benchtime 20x -count 3

type naive struct {
	ids  []string
	vecs [][]float32
}

func (s *naive) search(q []float32, k int) []Hit {
	type scored struct {
		id string
		s  float64
	}
	all := make([]scored, len(s.vecs))
	for i, v := range s.vecs {
		var d, nq, nv float64
		for j := range q {
			d += float64(q[j]) * float64(v[j])
			nq += float64(q[j]) * float64(q[j])
			nv += float64(v[j]) * float64(v[j])
		}
		all[i] = scored{s.ids[i], d / math.Sqrt(nq*nv)}
	}
	slices.SortFunc(all, func(a, b scored) int {
		if a.s != b.s {
			if a.s > b.s {
				return -1
			}
			return 1
		}
		if a.id < b.id {
			return -1
		}
		return 1
	})
	hits := make([]Hit, k)
	for i := range hits {
		hits[i] = Hit{ID: all[i].id, Score: float32(all[i].s)}
	}
	return hits
}

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func BenchmarkSearch(b *testing.B) {
	const dim, k = 256, 10
	for _, n := range []int{10_000, 100_000} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		f := NewFlat(dim)
		nv := &naive{}
		for i := range n {
			v := randVec(r, dim)
			id := fmt.Sprintf("doc-%06d", i)
			md := map[string]string{"shard": fmt.Sprint(i % 10)}
			if err := f.Upsert(context.Background(), Item{ID: id, Vector: v, Metadata: md}); err != nil {
				b.Fatal(err)
			}
			nv.ids = append(nv.ids, id)
			nv.vecs = append(nv.vecs, v)
		}
		queries := make([][]float32, 16)
		for i := range queries {
			queries[i] = randVec(r, dim)
		}
		for _, q := range queries[:2] {
			got, _ := f.Search(context.Background(), Query{Vector: q, K: k})
			want := nv.search(q, k)
			for i := range want {
				if got[i].ID != want[i].ID {
					b.Fatalf("n=%d: hit %d is %s, the loop's %s", n, i, got[i].ID, want[i].ID)
				}
			}
		}
		// One iteration runs the loop, Flat and Flat with a filter on the
		// same query, back to back, so that the three see the same load (the
		// machine is shared); the ratio is of their sums over the run.
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var loop, flat, filtered time.Duration
			for i := 0; b.Loop(); i++ {
				q := queries[i%len(queries)]
				t0 := time.Now()
				nv.search(q, k)
				t1 := time.Now()
				if _, err := f.Search(context.Background(), Query{Vector: q, K: k}); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if _, err := f.Search(context.Background(), Query{Vector: q, K: k, Filter: Filter{"shard": "3"}}); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				loop, flat, filtered = loop+t1.Sub(t0), flat+t2.Sub(t1), filtered+t3.Sub(t2)
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			b.ReportMetric(per(loop), "loop-µs/search")
			b.ReportMetric(per(flat), "flat-µs/search")
			b.ReportMetric(per(filtered), "flat-filter-µs/search")
			b.ReportMetric(float64(loop)/float64(flat), "loop/flat")
		})
	}
}
