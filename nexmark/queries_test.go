package nexmark

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/weirproject/weir"
)

// testEvents is the size of the query tests' input: at testRate events per
// second of event time it spans 40 s, so every window kind fires several
// times and auctions close with and without bids.
const (
	testEvents = 20_000
	testRate   = 500
)

func testGenerator(t testing.TB, seed uint64) *Generator {
	t.Helper()
	g, err := New(Config{Seed: seed, EventsPerSecond: testRate})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// runEngine runs build over g's first n events at the given parallelism
// (source splits: 3, so that splits and subtasks do not line up) and
// returns what it emitted.
func runEngine[T any](t *testing.T, g *Generator, n int64, parallelism int, build func(weir.Stream[Event]) weir.Stream[T]) []T {
	t.Helper()
	env := weir.NewEnvironment(weir.Config{Parallelism: parallelism})
	out := weir.Collect(build(Source(env, "nexmark", g, n, 3)))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out.Values()
}

func runRef[T any](g *Generator, n int64, ref func(iterSeq, func(T))) []T {
	var out []T
	ref(g.Events(0, n), func(v T) { out = append(out, v) })
	return out
}

// sorted returns the values printed with %+v, sorted: a multiset to
// compare.
func sorted[T any](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%+v", v)
	}
	slices.Sort(out)
	return out
}

func sameResults(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the reference has no results: the test input is too small to test anything", what)
	}
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("%s: %d results, the reference %d", what, len(got), len(want))
	for i := 0; i < max(len(got), len(want)) && i < 5000; i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("%s: first difference at sorted result %d:\n engine    %s\n reference %s", what, i, g, w)
		}
	}
}

// checkQuery compares the engine's results with the reference's, as
// multisets, at parallelism 1 and 2, for two seeds.
func checkQuery[T any](t *testing.T, build func(weir.Stream[Event]) weir.Stream[T], ref func(iterSeq, func(T)), parallelisms ...int) {
	if len(parallelisms) == 0 {
		parallelisms = []int{1, 2}
	}
	for _, seed := range []uint64{1, 2} {
		g := testGenerator(t, seed)
		want := sorted(runRef(g, testEvents, ref))
		t.Logf("seed %d: %d results", seed, len(want))
		for _, p := range parallelisms {
			got := sorted(runEngine(t, g, testEvents, p, build))
			sameResults(t, fmt.Sprintf("seed %d, parallelism %d", seed, p), got, want)
		}
	}
}

func TestQ0(t *testing.T) { checkQuery(t, Q0, RefQ0) }
func TestQ1(t *testing.T) { checkQuery(t, Q1, RefQ1) }
func TestQ2(t *testing.T) { checkQuery(t, Q2, RefQ2) }
func TestQ3(t *testing.T) { checkQuery(t, Q3, RefQ3) }
func TestQ5(t *testing.T) { checkQuery(t, Q5, RefQ5) }

// TestQ6 failed about 1 run in 16 at parallelism 2 on a loaded machine
// before Source stopped finishing its last splits ahead of the end (see the
// comment in reader.Poll and docs/nexmark.md, "Fixed: a finished source subtask was idle for a moment"): a q6-average
// subtask then got closed auctions after its watermark had reached the
// maximum. 80 runs at parallelism 2 passed after the change.
func TestQ6(t *testing.T)  { checkQuery(t, Q6, RefQ6) }
func TestQ7(t *testing.T)  { checkQuery(t, Q7, RefQ7) }
func TestQ8(t *testing.T)  { checkQuery(t, Q8, RefQ8) }
func TestQ11(t *testing.T) { checkQuery(t, Q11, RefQ11) }

// TestWinningBids checks q4's and q6's shared first stage on its own.
func TestWinningBids(t *testing.T) { checkQuery(t, WinningBids, RefWinningBids) }

// TestQ4: q4 answers once per closed auction; its last answer per
// category (the one with the highest count) equals the reference's.
func TestQ4(t *testing.T) {
	final := func(s weir.Stream[Event]) weir.Stream[Q4Out] { return Q4(s) }
	for _, seed := range []uint64{1, 2} {
		g := testGenerator(t, seed)
		want := sorted(runRef(g, testEvents, RefQ4))
		for _, p := range []int{1, 2} {
			last := map[int64]Q4Out{}
			for _, o := range runEngine(t, g, testEvents, p, final) {
				if o.Count > last[o.Category].Count {
					last[o.Category] = o
				}
			}
			var got []Q4Out
			for _, o := range last {
				got = append(got, o)
			}
			sameResults(t, fmt.Sprintf("seed %d, parallelism %d", seed, p), sorted(got), want)
		}
	}
}

// TestQueriesHaveResults: the registry's engine and reference agree on
// the number of results of every query (q4: the engine answers once per
// closed auction, the reference once per category, so it is left out).
func TestQueriesHaveResults(t *testing.T) {
	g := testGenerator(t, 3)
	for _, q := range Queries {
		if q.Name == "q4" {
			continue
		}
		env := weir.NewEnvironment(weir.Config{Parallelism: 2})
		var n atomicInt
		q.Build(Source(env, "nexmark", g, 5000, 2), &n)
		if err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := q.Reference(g.Events(0, 5000)); n.Load() != want || want == 0 {
			t.Errorf("%s: engine %d results, reference %d", q.Name, n.Load(), want)
		}
	}
}
