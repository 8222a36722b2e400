package pgvector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirproject/weir/agent/vector"
)

// pgvector (exact, HNSW) against the embedded Flat on the same vectors and
// queries, in the same run: 10k vectors of 256 dimensions, K = 10. Each
// iteration runs one Flat search and one search of each Postgres store,
// back to back, on the same query, so all see the same load; likewise the
// upserts (batches of 100 new items). Ratios are of the sums over the run.
//
//	go test ./agent/vector/pgvector -run '^$' -bench . -benchtime 200x -count 3
func BenchmarkSearch(b *testing.B) {
	const dim, n, k = 256, 10_000, 10
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, n))
	items := make([]vector.Item, n)
	for i := range items {
		items[i] = vector.Item{ID: fmt.Sprintf("doc-%06d", i), Vector: randVec(r, dim), Metadata: map[string]string{"shard": fmt.Sprint(i % 10)}}
	}
	f := vector.NewFlat(dim)
	exact := open(b, dim, func(c *Config) { c.Table = "bench_exact" })
	hnsw := open(b, dim, func(c *Config) { c.Table, c.Index, c.EfSearch = "bench_hnsw", IndexHNSW, 40 })
	stores := []vector.Store{f, exact, hnsw}
	for _, s := range stores {
		for i := 0; i < n; i += 500 {
			if err := s.Upsert(ctx, items[i:i+500]...); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, s := range []*Store{exact, hnsw} {
		if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE "+s.table); err != nil {
			b.Fatal(err)
		}
	}
	queries := make([][]float32, 64)
	for i := range queries {
		queries[i] = randVec(r, dim)
	}
	// Exact agrees with Flat; HNSW's recall is measured here too.
	found := 0
	for _, q := range queries {
		want, _ := f.Search(ctx, vector.Query{Vector: q, K: k})
		got, err := exact.Search(ctx, vector.Query{Vector: q, K: k})
		if err != nil {
			b.Fatal(err)
		}
		for i := range want {
			if got[i].ID != want[i].ID {
				b.Fatalf("exact hit %d is %s, Flat's %s", i, got[i].ID, want[i].ID)
			}
		}
		in := map[string]bool{}
		for _, h := range want {
			in[h.ID] = true
		}
		approx, _ := hnsw.Search(ctx, vector.Query{Vector: q, K: k})
		for _, h := range approx {
			if in[h.ID] {
				found++
			}
		}
	}
	recall := float64(found) / float64(len(queries)*k)

	b.Run("search", func(b *testing.B) {
		var d [3]time.Duration
		for i := 0; b.Loop(); i++ {
			q := vector.Query{Vector: queries[i%len(queries)], K: k}
			for j, s := range stores {
				t0 := time.Now()
				if _, err := s.Search(ctx, q); err != nil {
					b.Fatal(err)
				}
				d[j] += time.Since(t0)
			}
		}
		per := func(x time.Duration) float64 { return float64(x.Microseconds()) / float64(b.N) }
		b.ReportMetric(per(d[0]), "flat-µs/search")
		b.ReportMetric(per(d[1]), "pg-exact-µs/search")
		b.ReportMetric(per(d[2]), "pg-hnsw-µs/search")
		b.ReportMetric(float64(d[1])/float64(d[0]), "pg-exact/flat")
		b.ReportMetric(float64(d[2])/float64(d[0]), "pg-hnsw/flat")
		b.ReportMetric(recall, "hnsw-recall@10")
	})
	b.Run("upsert100", func(b *testing.B) {
		var d [3]time.Duration
		next := n
		for b.Loop() {
			batch := make([]vector.Item, 100)
			for i := range batch {
				batch[i] = vector.Item{ID: fmt.Sprintf("new-%07d", next), Vector: randVec(r, dim), Metadata: map[string]string{"shard": "x"}}
				next++
			}
			for j, s := range stores {
				t0 := time.Now()
				if err := s.Upsert(ctx, batch...); err != nil {
					b.Fatal(err)
				}
				d[j] += time.Since(t0)
			}
		}
		per := func(x time.Duration) float64 { return float64(x.Microseconds()) / float64(b.N) }
		b.ReportMetric(per(d[0]), "flat-µs/batch")
		b.ReportMetric(per(d[1]), "pg-exact-µs/batch")
		b.ReportMetric(per(d[2]), "pg-hnsw-µs/batch")
		b.ReportMetric(float64(d[1])/float64(d[0]), "pg-exact/flat")
		b.ReportMetric(float64(d[2])/float64(d[0]), "pg-hnsw/flat")
	})
}
