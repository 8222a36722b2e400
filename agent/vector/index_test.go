package vector_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/agent/embed"
	"github.com/weirproject/weir/agent/vector"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// Ask is a test query: top K of collection Coll for Text, at time TS.
type Ask struct {
	Coll string    `json:"coll"`
	Name string    `json:"name"`
	Vec  []float32 `json:"vec"`
	TS   int64     `json:"ts"`
}

type doc struct {
	coll string
	ch   vector.Change
	ts   int64
}

var words = []string{"kafka", "broker", "partition", "offset", "pebble", "compaction", "watermark", "window", "agent", "model", "vector", "search"}

// corpus returns changes and queries over collections a and b, each
// change at its own timestamp in [1, 100], queries at timestamps in
// between.
func corpus() ([]doc, []Ask) {
	r := rand.New(rand.NewPCG(1, 2))
	e := &embed.Offline{Dimensions: 16}
	text := func() string {
		return words[r.IntN(len(words))] + " " + words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
	}
	var docs []doc
	for ts := int64(1); ts <= 100; ts++ {
		coll := []string{"a", "b"}[r.IntN(2)]
		id := fmt.Sprintf("%s%d", coll, r.IntN(25))
		t := text()
		ch := vector.Upsert(vector.Item{ID: id, Vector: e.Vector(t), Content: t, Metadata: map[string]string{"half": fmt.Sprint(ts <= 50)}})
		if ts%9 == 0 {
			ch = vector.Remove(id)
		}
		docs = append(docs, doc{coll, ch, ts})
	}
	var asks []Ask
	for i := range 40 {
		coll := []string{"a", "b"}[i%2]
		asks = append(asks, Ask{Coll: coll, Name: fmt.Sprint("q", i), Vec: e.Vector(text()), TS: int64(5 + i*5/2)})
	}
	return docs, asks
}

// expected answers each query from stores built by applying, in timestamp
// order, the changes of its collection up to its timestamp.
func expected(t *testing.T, docs []doc, asks []Ask) map[string]string {
	out := map[string]string{}
	for _, a := range asks {
		s := vector.NewFlat(0)
		for _, d := range docs {
			if d.coll != a.Coll || d.ts > a.TS {
				continue
			}
			if d.ch.Delete {
				s.Delete(context.Background(), d.ch.Item.ID)
			} else if err := s.Upsert(context.Background(), d.ch.Item); err != nil {
				t.Fatal(err)
			}
		}
		hits, err := s.Search(context.Background(), query(a))
		if err != nil {
			t.Fatal(err)
		}
		out[a.Name] = fmt.Sprint(hits)
	}
	return out
}

func query(a Ask) vector.Query { return vector.Query{Vector: a.Vec, K: 3} }

// shuffled returns the steps of records in a random arrival order.
func shuffled[T any](r *rand.Rand, vs []T, ts func(T) int64) []weirtest.Step[T] {
	steps := make([]weirtest.Step[T], len(vs))
	for i, v := range vs {
		steps[i] = weirtest.Rec(0, v, ts(v))
	}
	r.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	return steps
}

type job struct {
	env *weir.Environment
	out *weirtest.Observation[vector.Result[Ask]]
}

func build(par int, cp runtime.CheckpointConfig, docSteps []weirtest.Step[doc], askSteps []weirtest.Step[Ask]) job {
	env := weir.NewEnvironment(weir.Config{Parallelism: par, Checkpoint: cp})
	docs := weir.FromSource(env, "docs", weirtest.Script([][]weirtest.Step[doc]{docSteps}), watermark.NoWatermarks[doc]()).Parallelism(1)
	asks := weir.FromSource(env, "asks", weirtest.Script([][]weirtest.Step[Ask]{askSteps}), watermark.NoWatermarks[Ask]()).Parallelism(1)
	changes := weir.Map(docs, "change", func(d doc) vector.Change {
		c := d.ch
		c.Item.Metadata = withColl(c.Item.Metadata, d.coll)
		return c
	})
	res := vector.Index(weir.KeyBy(changes, func(c vector.Change) string { return c.Item.Metadata["coll"] }),
		weir.KeyBy(asks, func(a Ask) string { return a.Coll }), "index",
		vector.IndexOptions[Ask]{Query: query})
	return job{env, weirtest.Observe(res)}
}

// withColl records the collection in the metadata, so that deletes (which
// carry no metadata of their own) are keyed too.
func withColl(md map[string]string, coll string) map[string]string {
	out := map[string]string{"coll": coll}
	for k, v := range md {
		out[k] = v
	}
	return out
}

func answers(t *testing.T, rs []vector.Result[Ask]) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		if r.Error != "" {
			t.Fatalf("query %s: %s", r.Query.Name, r.Error)
		}
		hits := r.Hits
		for i := range hits {
			delete(hits[i].Metadata, "coll")
			if len(hits[i].Metadata) == 0 {
				hits[i].Metadata = nil
			}
		}
		if _, dup := out[r.Query.Name]; dup {
			t.Fatalf("query %s answered twice", r.Query.Name)
		}
		out[r.Query.Name] = fmt.Sprint(hits)
	}
	return out
}

func diff(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d answers, want %d", what, len(got), len(want))
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		if got[k] != want[k] {
			t.Fatalf("%s: query %s got %s\nwant %s", what, k, got[k], want[k])
		}
	}
}

// X1, X2: the two streams arrive in random orders; every query is
// answered from exactly the changes of its key at or before its
// timestamp.
func TestIndexEventTimeOrder(t *testing.T) {
	docs, asks := corpus()
	want := expected(t, docs, asks)
	for seed := range uint64(3) {
		r := rand.New(rand.NewPCG(seed, 7))
		ds := shuffled(r, docs, func(d doc) int64 { return d.ts })
		as := shuffled(r, asks, func(a Ask) int64 { return a.TS })
		j := build(2, runtime.CheckpointConfig{}, ds, as)
		if err := j.env.Execute(ctx(t)); err != nil {
			t.Fatal(err)
		}
		j.out.CheckFinal(t)
		diff(t, fmt.Sprintf("seed %d", seed), answers(t, j.out.Values()), want)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// X4: a checkpoint taken with collections built and records held, restored
// at parallelism 1 and 2, answers every query as an uninterrupted run
// does.
func TestIndexRestoreGivesSameResults(t *testing.T) {
	docs, asks := corpus()
	want := expected(t, docs, asks)
	r := rand.New(rand.NewPCG(9, 9))
	const cut = 50
	// Phase 1: everything up to the cut, and some records after it, which
	// stay held; then watermark cut and a pause.
	var d1, d2 []doc
	for _, d := range docs {
		if d.ts <= cut || d.ts <= cut+10 && d.ts%2 == 0 {
			d1 = append(d1, d)
		} else {
			d2 = append(d2, d)
		}
	}
	var a1, a2 []Ask
	for _, a := range asks {
		if a.TS <= cut || a.TS <= cut+10 && a.TS%2 == 1 {
			a1 = append(a1, a)
		} else {
			a2 = append(a2, a)
		}
	}
	for _, restorePar := range []int{1, 2} {
		t.Run(fmt.Sprint("restore-parallelism-", restorePar), func(t *testing.T) {
			gate := weirtest.NewGate()
			ds := append(shuffled(r, d1, func(d doc) int64 { return d.ts }), weirtest.WM[doc](0, cut), weirtest.PauseOn[doc](gate))
			as := append(shuffled(r, a1, func(a Ask) int64 { return a.TS }), weirtest.WM[Ask](0, cut), weirtest.PauseOn[Ask](gate))
			j1 := build(2, runtime.CheckpointConfig{Dir: t.TempDir()}, ds, as)
			job, stop := weirtest.Start(t, j1.env)
			if err := gate.WaitArrived(ctx(t), 2); err != nil {
				t.Fatal(err)
			}
			if err := j1.out.WaitUntil(ctx(t), func() bool { return j1.out.MinWatermark() >= cut }); err != nil {
				t.Fatal(err)
			}
			_, path, err := job.TriggerCheckpoint(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			stop()
			got := answers(t, j1.out.Values())

			j2 := build(restorePar, runtime.CheckpointConfig{RestoreFrom: path},
				shuffled(r, d2, func(d doc) int64 { return d.ts }), shuffled(r, a2, func(a Ask) int64 { return a.TS }))
			if err := j2.env.Execute(ctx(t)); err != nil {
				t.Fatal(err)
			}
			for k, v := range answers(t, j2.out.Values()) {
				if _, dup := got[k]; dup {
					t.Fatalf("query %s answered before the checkpoint and after the restore", k)
				}
				got[k] = v
			}
			diff(t, "restored", got, want)
		})
	}
}
