package bench

import (
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/window"
)

// BenchmarkWindowSumBackends is the engine side of BenchmarkWindowSum10kKeys
// (tumbling window sum, 10k keys drawn uniformly, a watermark at every new
// timestamp) on
// the memory and the Pebble state backend, side by side: on Pebble the
// window contents, and since issue 15 the window timers, live in the
// database behind its write-back cache.
func BenchmarkWindowSumBackends(b *testing.B) {
	for _, kind := range []string{"memory", "pebble"} {
		b.Run(kind, func(b *testing.B) {
			n := int64(b.N)
			seq := KeySequence(KeysUniform, n, 10_000, 1)
			env := weir.NewEnvironment(weir.Config{Parallelism: 1, StateBackend: runtime.StateBackendConfig{Kind: kind, Dir: b.TempDir()}})
			src := weir.Generate(env, "gen", n, func(i int64) weir.Record[winEv] {
				return weir.Record[winEv]{Value: winEv{Key: int64(seq[i]), N: 1}, Timestamp: i / windowPerMs}
			}, everyMs)
			sums := window.Reduce(weir.KeyBy(src, func(e winEv) int64 { return e.Key }), "sum", window.Tumbling(windowMs*time.Millisecond),
				func(a, b winEv) winEv { a.N += b.N; return a })
			var total, sum int64
			count(sums, &total, &sum, func(e winEv) int64 { return e.N })
			b.ResetTimer()
			if _, err := run(env); err != nil {
				b.Fatal(err)
			}
			if sum != n {
				b.Fatalf("sum %d want %d", sum, n)
			}
		})
	}
}
