package weir_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/state"
)

// TestKeyByExchangeKeyGroups: over a key-by exchange the keyed operator
// takes each record's key group from the exchange (runtime.KeyGroupProcessor)
// instead of hashing the key again. Every record must still see its own key
// and its own key group (a key group paired with another record of the
// batch would show here), and per-key state must count every record, at
// several parallelisms, small batches (many of them) and a max parallelism
// that is not a power of two.
func TestKeyByExchangeKeyGroups(t *testing.T) {
	const n, keys = 20_000, 3_000
	for _, cfg := range []weir.Config{
		{Parallelism: 1},
		{Parallelism: 2, BufferSize: 7},
		{Parallelism: 3, BufferSize: 64, MaxParallelism: 100},
		{Parallelism: 2, MaxParallelism: 1 << 15},
	} {
		t.Run(fmt.Sprintf("p%d-buf%d-maxp%d", cfg.Parallelism, cfg.BufferSize, cfg.MaxParallelism), func(t *testing.T) {
			maxP := cfg.MaxParallelism
			if maxP == 0 {
				maxP = keygroup.DefaultMaxParallelism(cfg.Parallelism)
			}
			env := weir.NewEnvironment(cfg)
			in := make([]event, n)
			for i := range in {
				in[i] = event{Key: fmt.Sprintf("user-%d", (i*7919)%keys), TS: int64(i), N: i}
			}
			s := weir.FromSlice(env, "src", in, strategy())
			// A map first, so that the key-by edge is an exchange at
			// parallelism > 1 and not a chain.
			s = weir.Map(s, "id", func(e event) event { return e })
			out := weir.Collect(weir.Process(weir.KeyBy(s, func(e event) string { return e.Key }), "check",
				func() weir.KeyedProcessFunction[string, event, string] {
					var cnt *state.ValueState[string, int]
					return weir.ProcessFuncs[string, event, string]{
						OpenFn: func(ctx *weir.KeyedContext[string, string]) error {
							cnt = state.MustValue[string, int](ctx.State(), "count")
							return nil
						},
						ElementFn: func(e event, ctx *weir.KeyedContext[string, string]) error {
							if ctx.Key() != e.Key {
								return fmt.Errorf("record of key %q processed with current key %q", e.Key, ctx.Key())
							}
							want := keygroup.Assign(keygroup.HashString(e.Key), maxP)
							if kg := ctx.State().CurrentKeyGroup(); kg != want {
								return fmt.Errorf("key %q: current key group %d, want %d", e.Key, kg, want)
							}
							c, _ := cnt.Value()
							cnt.Update(c + 1)
							ctx.Collect(fmt.Sprintf("%s=%d", e.Key, c+1))
							return nil
						},
					}
				}))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := env.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, v := range out.Values() {
				got[v] = true
			}
			wantN := map[string]int{}
			for _, e := range in {
				wantN[e.Key]++
			}
			for k, c := range wantN {
				if !got[fmt.Sprintf("%s=%d", k, c)] {
					t.Fatalf("key %q never reached its count %d", k, c)
				}
			}
			if len(out.Values()) != n {
				t.Fatalf("%d outputs, want %d", len(out.Values()), n)
			}
		})
	}
}
