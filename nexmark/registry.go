package nexmark

import (
	"iter"
	"sync/atomic"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// Query is one Nexmark query as weir runs it, with its reference.
type Query struct {
	// Name is "q0" ... "q8", "q11".
	Name string
	// Title is the query's name in the Nexmark suite.
	Title string
	// Build adds the query behind events and a sink that adds the number
	// of results to *results as each of its subtasks ends.
	Build func(events weir.Stream[Event], results *atomic.Int64)
	// Reference runs the query's Ref function over events and returns the
	// number of results.
	Reference func(events iter.Seq[Event]) int64
}

// Queries are the queries in suite order.
var Queries = []Query{
	query("q0", "pass-through", Q0, RefQ0),
	query("q1", "currency conversion", Q1, RefQ1),
	query("q2", "selection", Q2, RefQ2),
	query("q3", "local item suggestion", Q3, RefQ3),
	query("q4", "average price for a category", Q4, RefQ4),
	query("q5", "hot items", Q5, RefQ5),
	query("q6", "average selling price by seller", Q6, RefQ6),
	query("q7", "highest bid", Q7, RefQ7),
	query("q8", "monitor new users", Q8, RefQ8),
	query("q11", "user sessions", Q11, RefQ11),
}

// Lookup returns the query called name.
func Lookup(name string) (Query, bool) {
	for _, q := range Queries {
		if q.Name == name {
			return q, true
		}
	}
	return Query{}, false
}

// Names returns the names of Queries, in order.
func Names() []string {
	out := make([]string, len(Queries))
	for i, q := range Queries {
		out[i] = q.Name
	}
	return out
}

func query[T any](name, title string, build func(weir.Stream[Event]) weir.Stream[T], ref func(iter.Seq[Event], func(T))) Query {
	return Query{
		Name:  name,
		Title: title,
		Build: func(events weir.Stream[Event], results *atomic.Int64) { CountResults(build(events), results) },
		Reference: func(events iter.Seq[Event]) int64 {
			var n int64
			ref(events, func(T) { n++ })
			return n
		},
	}
}

// CountResults ends s in a sink that counts its records per subtask and
// adds the count to *n when the subtask ends (no shared write per record).
func CountResults[T any](s weir.Stream[T], n *atomic.Int64) {
	weir.Transform(s, "count-results", func() runtime.OneInputOperator[T, struct{}] { return &counter[T]{total: n} })
}

type counter[T any] struct {
	runtime.Base[struct{}]
	n     int64
	total *atomic.Int64
}

func (c *counter[T]) ProcessRecord(weir.Record[T]) error { c.n++; return nil }
func (c *counter[T]) EndInput() error                    { return nil }
func (c *counter[T]) Close() error                       { c.total.Add(c.n); c.n = 0; return nil }
