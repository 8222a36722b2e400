package nexmark

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/cputime"
)

// BenchmarkQuery runs each query from the generator on the engine and as
// its hand-written reference, b.N events each, so ns/op and allocs/op are
// per event: `go test -run XXX -bench 'Query/q7/' -benchmem ./nexmark/`;
// with -cpuprofile, one side at a time (`-bench 'Query/q7/engine'`).
// Rate 10M events per second of event time, as `weir bench nexmark`.
func BenchmarkQuery(b *testing.B) {
	g := MustNew(Config{EventsPerSecond: 10_000_000})
	for _, q := range Queries {
		b.Run(q.Name+"/engine", func(b *testing.B) {
			var results atomic.Int64
			env := weir.NewEnvironment(weir.Config{Parallelism: 1})
			q.Build(Source(env, "nexmark", g, int64(b.N), 1), &results)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuNanos()
			if err := env.Execute(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cpuNanos()-cpu)/float64(b.N), "cpu-ns/event")
		})
		b.Run(q.Name+"/loop", func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuNanos()
			q.Reference(g.Events(0, int64(b.N)))
			b.ReportMetric(float64(cpuNanos()-cpu)/float64(b.N), "cpu-ns/event")
		})
	}
}

// cpuNanos is the process's user + system CPU time, as `weir bench
// nexmark` measures it.
func cpuNanos() int64 { return int64(cputime.Process()) }
