package asyncio

import (
	"context"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// The async benchmarks measure the operator's overhead per record with a
// Func that returns at once: a job of b.N generated records through the
// operator (default capacity 100) into a sink that discards them, next to
// BenchmarkGoroutinePerRecord, the bare cost of one goroutine and one
// channel send per record with the same bound on records in flight.

func benchmarkAsync(b *testing.B, add func(weir.Stream[int], string, Func[int, int], Options) weir.Stream[int]) {
	f := func(_ context.Context, v int) ([]int, error) { return []int{v}, nil }
	env := weir.NewEnvironment(weir.Config{})
	src := weir.Generate(env, "src", int64(b.N), func(i int64) runtime.Record[int] {
		return runtime.Record[int]{Value: int(i), Timestamp: i}
	}, watermark.ForMonotonous[int]())
	weir.ToSink(add(src, "async", f, Options{}), "discard", func(*runtime.Context) (weir.SinkWriter[int], error) {
		return weir.SinkFunc[int](func(weir.Record[int]) error { return nil }), nil
	})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := env.Execute(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

func BenchmarkAsyncUnordered(b *testing.B) { benchmarkAsync(b, Unordered[int, int]) }

func BenchmarkAsyncOrdered(b *testing.B) { benchmarkAsync(b, Ordered[int, int]) }

// BenchmarkGoroutinePerRecord is the baseline: a hand-written loop that
// spawns one goroutine per record, which sends its result on a channel;
// at most DefaultCapacity are in flight.
func BenchmarkGoroutinePerRecord(b *testing.B) {
	results := make(chan int, DefaultCapacity)
	sum, inFlight := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if inFlight == DefaultCapacity {
			sum += <-results
			inFlight--
		}
		go func(v int) { results <- v }(i)
		inFlight++
	}
	for ; inFlight > 0; inFlight-- {
		sum += <-results
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	_ = sum
}
