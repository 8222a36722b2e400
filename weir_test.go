package weir_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/jobtest"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// event and strategy are internal/jobtest's, shared with the runtime's
// and checkpoint's end-to-end tests.
type event = jobtest.Event

var strategy = jobtest.Strategy

func TestMapFilterKeyedCount(t *testing.T) {
	for _, par := range []int{1, 2, 3} {
		env := weir.NewEnvironment(weir.Config{Parallelism: par})
		var in []event
		for i := range 1000 {
			in = append(in, event{Key: string(rune('a' + i%7)), TS: int64(i), N: i})
		}
		s := weir.FromSlice(env, "src", in, strategy())
		s = weir.Filter(s, "even", func(e event) bool { return e.N%2 == 0 })
		s = weir.Map(s, "double", func(e event) event { e.N *= 2; return e })
		counts := weir.Process(weir.KeyBy(s, func(e event) string { return e.Key }), "count",
			func() weir.KeyedProcessFunction[string, event, [2]int] {
				var cnt *state.ValueState[string, int]
				return weir.ProcessFuncs[string, event, [2]int]{
					OpenFn: func(ctx *weir.KeyedContext[string, [2]int]) error {
						cnt = state.MustValue[string, int](ctx.State(), "count")
						return nil
					},
					ElementFn: func(e event, ctx *weir.KeyedContext[string, [2]int]) error {
						n, _ := cnt.Value()
						cnt.Update(n + 1)
						ctx.Collect([2]int{int(e.Key[0]), n + 1})
						return nil
					},
				}
			})
		out := weir.Collect(counts)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := env.Execute(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		final := map[int]int{}
		for _, v := range out.Values() {
			final[v[0]] = max(final[v[0]], v[1])
		}
		want := map[int]int{}
		for _, e := range in {
			if e.N%2 == 0 {
				want[int(e.Key[0])]++
			}
		}
		if len(final) != len(want) {
			t.Fatalf("par %d: got %v want %v", par, final, want)
		}
		for k, v := range want {
			if final[k] != v {
				t.Fatalf("par %d: key %c: got %d want %d", par, k, final[k], v)
			}
		}
		if n := len(out.Values()); n != 500 {
			t.Fatalf("par %d: %d outputs, want 500", par, n)
		}
		wms := out.Watermarks(0)
		if len(wms) == 0 || wms[len(wms)-1] != watermark.Max || !slices.IsSorted(wms) {
			t.Fatalf("par %d: watermarks %v", par, wms)
		}
	}
}
