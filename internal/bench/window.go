package bench

import (
	"fmt"
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
// hand-written loop, in the same run.
func WindowSum(n int64, keys int) (Result, error) {
	k := int64(keys)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.Generate(env, "gen", n, func(i int64) weir.Record[winEv] {
		return weir.Record[winEv]{Value: winEv{Key: i % k, N: 1}, Timestamp: i / windowPerMs}
	}, watermark.ForMonotonous[winEv]())
	sums := window.Reduce(weir.KeyBy(src, func(e winEv) int64 { return e.Key }), "sum", window.Tumbling(windowMs*time.Millisecond),
		func(a, b winEv) winEv { a.N += b.N; return a })
	var total, sum int64
	count(sums, &total, &sum, func(e winEv) int64 { return e.N })
	engine, err := run(env)
	if err != nil {
		return Result{}, err
	}
	loop, loopSum := WindowSumLoop(n, k)
	if sum != n || loopSum != n {
		return Result{}, fmt.Errorf("window sum: engine %d, loop %d, want %d", sum, loopSum, n)
	}
	return result(fmt.Sprintf("tumbling window sum, %d keys", keys), n, engine, loop, 0, 1), nil
}

// WindowSumLoop is WindowSum as a plain loop: a map of per-key maps of
// window sums, and a queue of windows in firing order.
func WindowSumLoop(n, keys int64) (time.Duration, int64) {
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
		key, ts := i%keys, i/windowPerMs
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
