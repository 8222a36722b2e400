package pgvector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir/agent/vector"
	"github.com/weirproject/weir/agent/vector/pgvector/pgtest"
	"github.com/weirproject/weir/agent/vector/vectortest"
)

// One server for the package's tests (initdb takes seconds); skip says
// why there is none when PostgreSQL or pgvector is not installed.
var (
	srv  *pgtest.Server
	skip string
)

func TestMain(m *testing.M) {
	var err error
	srv, err = pgtest.New()
	switch {
	case errors.Is(err, pgtest.ErrNotInstalled):
		skip = err.Error()
	case err != nil:
		fmt.Fprintln(os.Stderr, "starting the test's PostgreSQL server:", err)
		os.Exit(1)
	}
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	os.Exit(code)
}

func server(t testing.TB) *pgtest.Server {
	t.Helper()
	if srv == nil {
		t.Skip(skip)
	}
	return srv
}

var namespaces atomic.Int64

// open opens a store on the test server in a new namespace of the table
// for dim (tables are shared, namespaces not).
func open(t testing.TB, dim int, mod func(*Config)) *Store {
	t.Helper()
	cfg := Config{ConnString: server(t).ConnString, Table: fmt.Sprintf("conf_d%d", dim), Dim: dim,
		Namespace: fmt.Sprintf("ns%d", namespaces.Add(1)), MaxConns: 4}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestConformance runs the Store suite on the exact store.
func TestConformance(t *testing.T) {
	vectortest.Run(t, func(t *testing.T, dim int) vector.Store { return open(t, dim, nil) })
}

// TestAgreesWithFlat: the same random corpus (normal vectors, metadata)
// in Flat and in pgvector gives the same hits for the same queries,
// filtered or not.
func TestAgreesWithFlat(t *testing.T) {
	ctx := context.Background()
	const dim, n = 32, 500
	s := open(t, dim, nil)
	f := vector.NewFlat(dim)
	r := rand.New(rand.NewPCG(7, 7))
	var items []vector.Item
	for i := range n {
		items = append(items, vector.Item{ID: fmt.Sprintf("doc-%04d", i), Vector: randVec(r, dim), Content: fmt.Sprint("text ", i),
			Metadata: map[string]string{"shard": fmt.Sprint(i % 7)}})
	}
	for _, st := range []vector.Store{s, f} {
		if err := st.Upsert(ctx, items...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		q := vector.Query{Vector: randVec(r, dim), K: 10}
		if i%2 == 1 {
			q.Filter = vector.Filter{"shard": fmt.Sprint(i % 7)}
		}
		want, _ := f.Search(ctx, q)
		got, err := s.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("query %d: %d hits, Flat %d", i, len(got), len(want))
		}
		for j := range want {
			if got[j].ID != want[j].ID || got[j].Content != want[j].Content || got[j].Metadata["shard"] != want[j].Metadata["shard"] ||
				abs(got[j].Score-want[j].Score) > 1e-5 {
				t.Fatalf("query %d hit %d: %+v, Flat %+v", i, j, got[j], want[j])
			}
		}
	}
	if n2, err := s.Len(ctx); err != nil || n2 != n {
		t.Fatalf("Len = %d, %v; want %d", n2, err, n)
	}
}

func abs(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestIndexRecall: with an HNSW or IVFFlat index, searches use it (the
// plan says so) and find at least 90 % of the exact top 10 (Flat's), also
// with a filter that one row in 5 matches (iterative scans).
func TestIndexRecall(t *testing.T) {
	ctx := context.Background()
	const dim, n, k = 16, 2000, 10
	r := rand.New(rand.NewPCG(3, 3))
	var items []vector.Item
	for i := range n {
		items = append(items, vector.Item{ID: fmt.Sprintf("d%05d", i), Vector: randVec(r, dim), Metadata: map[string]string{"m": fmt.Sprint(i % 5)}})
	}
	f := vector.NewFlat(dim)
	f.Upsert(ctx, items...)
	queries := make([]vector.Query, 20)
	for i := range queries {
		queries[i] = vector.Query{Vector: randVec(r, dim), K: k}
		if i%2 == 1 {
			queries[i].Filter = vector.Filter{"m": "2"}
		}
	}
	for _, c := range []Config{
		{Table: "recall_hnsw", Index: IndexHNSW, EfSearch: 64},
		{Table: "recall_ivf", Index: IndexIVFFlat, Lists: 20, Probes: 10},
	} {
		t.Run(c.Index, func(t *testing.T) {
			s := open(t, dim, func(cfg *Config) {
				cfg.Table, cfg.Index, cfg.EfSearch, cfg.Lists, cfg.Probes = c.Table, c.Index, c.EfSearch, c.Lists, c.Probes
			})
			for i := 0; i < n; i += 500 {
				if err := s.Upsert(ctx, items[i:i+500]...); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Reindex(ctx); err != nil { // IVFFlat's clusters from the loaded rows
				t.Fatal(err)
			}
			if _, err := s.pool.Exec(ctx, "ANALYZE "+s.table); err != nil { // the planner learns the namespace is every row
				t.Fatal(err)
			}
			conn, err := s.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The planner takes the index when a sequential scan is
			// possible but dear; at 2,000 rows it may not, so it is told.
			var plan strings.Builder
			func() {
				defer conn.Release()
				if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
					t.Fatal(err)
				}
				defer conn.Exec(ctx, "RESET enable_seqscan")
				rows, err := conn.Query(ctx, "EXPLAIN "+s.searchSQL, s.cfg.Namespace, string(appendVector(nil, queries[0].Vector)), k)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var line string
					rows.Scan(&line)
					plan.WriteString(line + "\n")
				}
				if rows.Err() != nil {
					t.Fatal(rows.Err())
				}
			}()
			if !strings.Contains(plan.String(), "_"+c.Index) {
				t.Fatalf("the search does not use the %s index:\n%s", c.Index, plan.String())
			}
			found, total := 0, 0
			for _, q := range queries {
				want, _ := f.Search(ctx, q)
				got, err := s.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != k {
					t.Fatalf("query %+v: %d hits, want %d", q.Filter, len(got), k)
				}
				in := map[string]bool{}
				for _, h := range want {
					in[h.ID] = true
				}
				for i, h := range got {
					if q.Filter != nil && !q.Filter.Match(h.Metadata) {
						t.Fatalf("hit %+v does not match filter %v", h, q.Filter)
					}
					if i > 0 && h.Score > got[i-1].Score {
						t.Fatalf("hits not in descending score: %v", got)
					}
					if in[h.ID] {
						found++
					}
				}
				total += len(want)
			}
			recall := float64(found) / float64(total)
			t.Logf("%s recall@%d = %.3f", c.Index, k, recall)
			if recall < 0.9 {
				t.Fatalf("recall@%d = %.3f, want at least 0.9", k, recall)
			}
		})
	}
}

// TestNamespacesAreSeparate: two stores on one table see only their own
// items; Clear empties one.
func TestNamespacesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a := open(t, 2, func(c *Config) { c.Table = "shared_ns" })
	b := open(t, 2, func(c *Config) { c.Table = "shared_ns" })
	if err := a.Upsert(ctx, vector.Item{ID: "x", Vector: []float32{1, 0}, Content: "a's"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Upsert(ctx, vector.Item{ID: "x", Vector: []float32{0, 1}, Content: "b's"}, vector.Item{ID: "y", Vector: []float32{1, 1}}); err != nil {
		t.Fatal(err)
	}
	ha, _ := a.Search(ctx, vector.Query{Vector: []float32{1, 0}, K: 5})
	if len(ha) != 1 || ha[0].Content != "a's" {
		t.Fatalf("a sees %v", ha)
	}
	if err := b.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Len(ctx); n != 0 {
		t.Fatalf("b has %d items after Clear", n)
	}
	if n, _ := a.Len(ctx); n != 1 {
		t.Fatalf("a has %d items after b's Clear", n)
	}
}

// TestConfigRefusals: invalid configurations are refused before
// connecting, each with one line naming the field.
func TestConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Dim: 3}, "ConnString"},
		{Config{ConnString: "host=/x", Dim: 0}, "Dim"},
		{Config{ConnString: "host=/x", Dim: MaxDim + 1}, "Dim"},
		{Config{ConnString: "host=/x", Dim: 3, Table: "docs; DROP TABLE x"}, "Table"},
		{Config{ConnString: "host=/x", Dim: 3, Table: "Docs"}, "Table"},
		{Config{ConnString: "host=/x", Dim: 3, Table: "a.b.c"}, "Table"},
		{Config{ConnString: "host=/x", Dim: 3, Table: "9docs"}, "Table"},
		{Config{ConnString: "host=/x", Dim: 3, Table: strings.Repeat("t", 49)}, "Table"},
		{Config{ConnString: "host=/x", Dim: 3, Index: "annoy"}, "Index"},
		{Config{ConnString: "host=/x", Dim: 3000, Index: IndexHNSW}, "Dim"},
		{Config{ConnString: "host=/x", Dim: 3, EfSearch: 10}, "HNSW"},
		{Config{ConnString: "host=/x", Dim: 3, Index: IndexHNSW, Probes: 10}, "IVFFlat"},
		{Config{ConnString: "host=/x", Dim: 3, M: -1}, "negative"},
	} {
		_, err := Open(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%+v) = %v, want one line about %s", c.cfg, err, c.want)
		}
	}
}

// TestOpenChecksTheTable: a table of another dimension, a missing table
// with SkipSetup, a schema-qualified table, and a server without the
// extension in the database are each refused saying what to do (or, for
// the schema, accepted).
func TestOpenChecksTheTable(t *testing.T) {
	ctx := context.Background()
	cs := server(t).ConnString
	open(t, 4, func(c *Config) { c.Table = "dims" })
	_, err := Open(ctx, Config{ConnString: cs, Table: "dims", Dim: 5})
	if err == nil || !strings.Contains(err.Error(), "vector(4)") {
		t.Fatalf("a table of 4 dimensions opened with Dim 5: %v", err)
	}
	_, err = Open(ctx, Config{ConnString: cs, Table: "absent", Dim: 5, SkipSetup: true})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("SkipSetup on a missing table: %v", err)
	}
	conn, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"CREATE SCHEMA IF NOT EXISTS rag", "DROP DATABASE IF EXISTS novector", "CREATE DATABASE novector",
		"DROP ROLE IF EXISTS plain", "CREATE ROLE plain LOGIN"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, 3, func(c *Config) { c.Table, c.Index = "rag.docs", IndexHNSW })
	if err := s.Upsert(ctx, vector.Item{ID: "a", Vector: []float32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reindex(ctx); err != nil {
		t.Fatal(err)
	}
	// A database without the extension, opened by a user who may not
	// create it.
	plain := strings.Replace(strings.Replace(cs, "user=weir", "user=plain", 1), "dbname=postgres", "dbname=novector", 1)
	_, err = Open(ctx, Config{ConnString: plain, Dim: 3})
	if err == nil || !strings.Contains(err.Error(), "CREATE EXTENSION vector as a superuser") {
		t.Fatalf("a user who may not create the extension: %v", err)
	}
	// The superuser creates it.
	super := strings.Replace(cs, "dbname=postgres", "dbname=novector", 1)
	s2, err := Open(ctx, Config{ConnString: super, Dim: 3})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

// TestContextDeadline: a search blocked by a lock returns when its
// context's deadline passes, with an error wrapping
// context.DeadlineExceeded, and the store works afterwards.
func TestContextDeadline(t *testing.T) {
	ctx := context.Background()
	s := open(t, 2, func(c *Config) { c.Table = "deadline" })
	if err := s.Upsert(ctx, vector.Item{ID: "a", Vector: []float32{1, 0}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.cfg.ConnString)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE deadline IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = s.Search(dctx, vector.Query{Vector: []float32{1, 0}, K: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("search under a lock past its deadline: %v, want an error wrapping context.DeadlineExceeded", err)
	}
	err = s.Upsert(dctx, vector.Item{ID: "b", Vector: []float32{0, 1}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("upsert with an expired context: %v", err)
	}
	tx.Rollback(ctx)
	hits, err := s.Search(ctx, vector.Query{Vector: []float32{1, 0}, K: 5})
	if err != nil || len(hits) != 1 {
		t.Fatalf("after the deadline: %v, %v; want a alone", hits, err)
	}
}
