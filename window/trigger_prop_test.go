package window_test

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/window"
)

// keyed is a firing of a count window: the key and the values it saw.
type keyed struct {
	Key string
	Ns  []int64
}

func keyedFn(k string, _ window.Window, es []ev, emit func(keyed)) error {
	ns := make([]int64, len(es))
	for i, e := range es {
		ns[i] = e.N
	}
	emit(keyed{k, ns})
	return nil
}

// byKey groups firings per key, in order.
func byKey(fs []keyed) map[string][]string {
	out := map[string][]string{}
	for _, f := range fs {
		out[f.Key] = append(out[f.Key], fmt.Sprint(f.Ns))
	}
	return out
}

// TestCountWindowsMatchReference: for random keys, record counts,
// parallelism, n, size and slide:
//   - Global with CountTrigger(n) fires each key floor(c/n) times, the
//     i-th firing with the key's first i*n records (no purge);
//   - CountTumbling(n) fires the same number of times, the i-th with
//     records (i-1)*n+1 .. i*n;
//   - CountSliding(size, slide) fires at every slide-th record j*slide,
//     with the key's last min(size, j*slide) records; its Reduce sums
//     them (evicting Reduce agrees with Process).
func TestCountWindowsMatchReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nKeys := rapid.IntRange(1, 4).Draw(rt, "keys")
		count := rapid.IntRange(0, 80).Draw(rt, "records")
		n := rapid.Int64Range(1, 6).Draw(rt, "n")
		size := rapid.Int64Range(1, 6).Draw(rt, "size")
		slide := rapid.Int64Range(1, 6).Draw(rt, "slide")
		par := rapid.IntRange(1, 2).Draw(rt, "parallelism")
		var in []ev
		perKey := map[string][]int64{}
		for i := range count {
			k := string(rune('a' + rapid.IntRange(0, nKeys-1).Draw(rt, "key")))
			in = append(in, ev{Key: k, TS: int64(i), N: int64(i + 1)})
			perKey[k] = append(perKey[k], int64(i+1))
		}

		env := weir.NewEnvironment(weir.Config{Parallelism: par, AutoWatermarkInterval: -1})
		ks := weir.KeyBy(weir.FromSlice(env, "src", in, eagerBounded(0)).Parallelism(1), evKey)
		cumulative := weir.Collect(window.Process(ks, "count", window.Global(), keyedFn, window.WithTrigger(window.CountTrigger(n))))
		tumbling := weir.Collect(window.Process(ks, "tumbling", window.CountTumbling(n), keyedFn))
		sliding := weir.Collect(window.Process(ks, "sliding", window.CountSliding(size, slide), keyedFn))
		slidingSum := weir.Collect(window.ReduceKeyed(ks, "sliding-sum", window.CountSliding(size, slide), sumEv))
		run(rt, env)

		wantCum, wantTum, wantSl := map[string][]string{}, map[string][]string{}, map[string][]string{}
		wantSum := map[string][]int64{}
		for k, ns := range perKey {
			for i := int64(1); i*n <= int64(len(ns)); i++ {
				wantCum[k] = append(wantCum[k], fmt.Sprint(ns[:i*n]))
				wantTum[k] = append(wantTum[k], fmt.Sprint(ns[(i-1)*n:i*n]))
			}
			for j := int64(1); j*slide <= int64(len(ns)); j++ {
				last := ns[max(0, j*slide-size) : j*slide]
				wantSl[k] = append(wantSl[k], fmt.Sprint(last))
				var s int64
				for _, v := range last {
					s += v
				}
				wantSum[k] = append(wantSum[k], s)
			}
		}
		gotSum := map[string][]int64{}
		for _, r := range slidingSum.Values() {
			gotSum[r.Key] = append(gotSum[r.Key], r.Value.N)
			if r.Window != window.GlobalWindow {
				rt.Fatalf("count window %v, want GlobalWindow", r.Window)
			}
		}
		for _, c := range []struct {
			name      string
			got, want map[string][]string
		}{{"CountTrigger", byKey(cumulative.Values()), wantCum}, {"CountTumbling", byKey(tumbling.Values()), wantTum},
			{"CountSliding", byKey(sliding.Values()), wantSl}} {
			for _, k := range keysOf(c.got, c.want) {
				if !slices.Equal(c.got[k], c.want[k]) {
					rt.Fatalf("%s, key %s:\n got %v\nwant %v", c.name, k, c.got[k], c.want[k])
				}
			}
		}
		for k := range perKey {
			if !slices.Equal(gotSum[k], wantSum[k]) {
				rt.Fatalf("CountSliding Reduce, key %s: got %v, want %v", k, gotSum[k], wantSum[k])
			}
		}
	})
}

func keysOf(ms ...map[string][]string) []string {
	var ks []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	slices.Sort(ks)
	return ks
}
