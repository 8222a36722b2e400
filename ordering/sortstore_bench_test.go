package ordering

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// BenchmarkSortBackends runs a Sort job over 50,000 records (1,000 keys,
// timestamps out of order by up to 50 ms) with the memory backend (the
// in-memory queue) and the Pebble backend (keyed state and timers),
// side by side; cpu-ns/record is the process's CPU time per record.
func BenchmarkSortBackends(b *testing.B) {
	const n = 50000
	rng := rand.New(rand.NewPCG(3, 4))
	in := make([]ev, n)
	for i := range in {
		in[i] = ev{Key: fmt.Sprint("k", rng.IntN(1000)), TS: int64(i/10 + rng.IntN(50)), Partition: int64(rng.IntN(3)), Offset: int64(i)}
	}
	for _, backend := range []string{state.BackendMemory, state.BackendPebble} {
		b.Run(backend, func(b *testing.B) {
			cpu0 := int64(testenv.CPUTime())
			for range b.N {
				env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet,
					StateBackend: weir.StateBackendConfig{Kind: backend, Dir: b.TempDir()}})
				src := weir.FromSlice(env, "in", in, watermark.ForBoundedOutOfOrderness[ev](50*time.Millisecond).
					WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true }))
				o := sinkTo(Sort(weir.KeyBy(src, func(e ev) string { return e.Key }), "sort", SortOptions[ev]{Tiebreak: tiebreak}))
				if err := env.Execute(context.Background()); err != nil {
					b.Fatal(err)
				}
				if got := len(o.records()); got != n {
					b.Fatalf("released %d of %d records", got, n)
				}
			}
			b.ReportMetric(float64(int64(testenv.CPUTime())-cpu0)/float64(b.N*n), "cpu-ns/record")
		})
	}
}
