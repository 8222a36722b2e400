package bench

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// The window scenario: n records over `keys` keys, event time rising 1 ms
// every 100 records, a per-key sum per 1 s tumbling window, every window
// fired once the watermark passes its end.
const (
	windowPerMs = 100
	windowMs    = 1000
)

type winEv struct {
	Key int64
	N   int64
}

// WindowSum runs the tumbling-window sum in a one-subtask job and as a
// hand-written loop, in the same run, with record i of key i % keys: the
// keys come round in the same order in every window. That order favours
// the loop: its per-key maps are allocated in key order, so it walks memory
// in address order and the hardware prefetches for it.
//
// Both sides fire a window as soon as the first record past its end
// arrives: the loop checks its queue whenever the timestamp changes, and
// the engine's source emits a watermark (ts - 1) at every new timestamp (a
// punctuated generator), so each holds one or two windows per key.
// WindowSumPeriodic keeps Flink's default periodic watermark instead.
func WindowSum(n int64, keys int) (Result, error) {
	k := int64(keys)
	return windowSum(n, keys, func(i int64) int64 { return i % k }, everyMs,
		fmt.Sprintf("tumbling window sum, %d keys", keys))
}

// WindowSumRandom is WindowSum with the key of each record drawn uniformly
// at random (a fixed pseudo-random sequence): neither side gets memory
// locality from the order of keys.
func WindowSumRandom(n int64, keys int) (Result, error) {
	k := uint64(keys)
	return windowSum(n, keys, func(i int64) int64 { return int64(splitmix(uint64(i)) % k) }, everyMs,
		fmt.Sprintf("tumbling window sum, %d keys in random order", keys))
}

// WindowSumPeriodic is WindowSum with the source's watermark emitted every
// 200 ms of wall time (the default periodic interval) instead of at every
// new timestamp. The generator produces about 45 s of event time per second
// of wall time, so the watermark trails by some nine windows and the engine
// holds that many windows per key while the loop holds two: more memory
// touched per record, the same output.
func WindowSumPeriodic(n int64, keys int) (Result, error) {
	k := int64(keys)
	return windowSum(n, keys, func(i int64) int64 { return i % k }, watermark.ForMonotonous[winEv](),
		fmt.Sprintf("tumbling window sum, %d keys, periodic watermark", keys))
}

// everyMs is the engine's watermark strategy matching the loop's firing: a
// watermark just behind every new timestamp, from the record that brings
// it (timestamps ascend).
var everyMs = watermark.ForGenerator(func() watermark.Generator[winEv] {
	last := int64(math.MinInt64)
	return watermark.Punctuated(func(_ winEv, ts int64) (int64, bool) {
		if ts == last {
			return 0, false
		}
		last = ts
		return ts - 1, true
	})
})

// splitmix is the splitmix64 finalizer of x + the golden gamma.
func splitmix(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func windowSum(n int64, keys int, keyOf func(int64) int64, wm watermark.Strategy[winEv], name string) (Result, error) {
	engine := func() (time.Duration, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.Generate(env, "gen", n, func(i int64) weir.Record[winEv] {
			return weir.Record[winEv]{Value: winEv{Key: keyOf(i), N: 1}, Timestamp: i / windowPerMs}
		}, wm)
		sums := window.Reduce(weir.KeyBy(src, func(e winEv) int64 { return e.Key }), "sum", window.Tumbling(windowMs*time.Millisecond),
			func(a, b winEv) winEv { a.N += b.N; return a })
		var total, sum int64
		count(sums, &total, &sum, func(e winEv) int64 { return e.N })
		t, err := run(env)
		if err == nil && sum != n {
			return 0, fmt.Errorf("window sum: engine %d, want %d", sum, n)
		}
		return t, err
	}
	loop := func() (time.Duration, error) {
		t, sum := windowSumLoop(n, keyOf)
		if sum != n {
			return 0, fmt.Errorf("window sum: loop %d, want %d", sum, n)
		}
		return t, nil
	}
	e, l, err := sides(engine, loop)
	if err != nil {
		return Result{}, err
	}
	return result(name, n, e, l, 0, 1), nil
}

// windowSumLoop is the window sum as a plain loop, for n records with the
// keys keyOf gives: a map of per-key maps of window sums, and a queue of
// windows in firing order.
func windowSumLoop(n int64, keyOf func(int64) int64) (time.Duration, int64) {
	type pending struct{ start, key int64 }
	start := time.Now()
	sums := map[int64]map[int64]int64{}
	var queue []pending
	var total int64
	fire := func(to int64) {
		i := 0
		for ; i < len(queue) && queue[i].start+windowMs-1 <= to; i++ {
			p := queue[i]
			total += sums[p.key][p.start]
			delete(sums[p.key], p.start)
		}
		queue = slices.Delete(queue, 0, i)
	}
	last := int64(-1)
	for i := range n {
		key, ts := keyOf(i), i/windowPerMs
		ws := ts - ts%windowMs
		m := sums[key]
		if m == nil {
			m = map[int64]int64{}
			sums[key] = m
		}
		if _, ok := m[ws]; !ok {
			queue = append(queue, pending{ws, key})
		}
		m[ws]++
		if ts != last {
			fire(ts - 1)
			last = ts
		}
	}
	fire(1<<62 - 1)
	return time.Since(start), total
}
