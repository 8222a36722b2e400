package bench

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
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
// hand-written loop, in the same run, with keys drawn uniformly
// (KeysUniform).
func WindowSum(n int64, keys int) (Result, error) {
	return WindowSumOrder(n, keys, KeysUniform, false)
}

// WindowSumRandom is WindowSum: keys drawn uniformly at random. It was the
// random-order row beside a round-robin WindowSum before issue 31.
func WindowSumRandom(n int64, keys int) (Result, error) { return WindowSum(n, keys) }

// WindowSumPeriodic is WindowSum with Flink's default periodic watermark
// (see WindowSumOrder).
func WindowSumPeriodic(n int64, keys int) (Result, error) {
	return WindowSumOrder(n, keys, KeysUniform, true)
}

// WindowSumOrder runs the tumbling-window sum with the keys in order o,
// both sides reading the same pre-generated key sequence. With
// KeysRoundRobin record i has key i % keys: the keys come round in the same
// order in every window. That order favours the loop: its per-key maps are
// allocated in key order, so it walks memory in address order and the
// hardware prefetches for it.
//
// Both sides fire a window as soon as the first record past its end
// arrives: the loop checks its queue whenever the timestamp changes, and
// the engine's source emits a watermark (ts - 1) at every new timestamp (a
// punctuated generator), so each holds one or two windows per key.
//
// periodic keeps Flink's default instead, the source's watermark emitted
// every 200 ms of wall time. The generator produces about 45 s of event
// time per second of wall time, so the watermark trails by some nine
// windows and the engine holds that many windows per key while the loop
// holds two: more memory touched per record, the same output. So the
// periodic scenarios also run a second loop that fires on the same wall-clock
// cadence (windowSumLoopEvery), holding as many windows as the engine, in
// the same rounds: Result.SameCadenceRatio.
func WindowSumOrder(n int64, keys int, o KeyOrder, periodic bool) (Result, error) {
	wm, name := everyMs, fmt.Sprintf("tumbling window sum, %d keys %s", keys, o)
	if periodic {
		wm, name = watermark.ForMonotonous[winEv](), name+", periodic watermark"
	}
	return windowSum(n, KeySequence(o, n, keys, 1), wm, periodic, name)
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

func windowSum(n int64, seq []int32, wm watermark.Strategy[winEv], periodic bool, name string) (Result, error) {
	engine := func() (time.Duration, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.Generate(env, "gen", n, func(i int64) weir.Record[winEv] {
			return weir.Record[winEv]{Value: winEv{Key: int64(seq[i]), N: 1}, Timestamp: i / windowPerMs}
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
		t, sum := windowSumLoop(seq)
		if sum != n {
			return 0, fmt.Errorf("window sum: loop %d, want %d", sum, n)
		}
		return t, nil
	}
	if !periodic {
		e, l, err := sides(engine, loop)
		if err != nil {
			return Result{}, err
		}
		return result(name, n, e, l, 0, 1), nil
	}
	sameCadence := func() (time.Duration, error) {
		t, sum := windowSumLoopEvery(seq, runtime.DefaultAutoWatermarkInterval)
		if sum != n {
			return 0, fmt.Errorf("window sum: same-cadence loop %d, want %d", sum, n)
		}
		return t, nil
	}
	ts, err := runSides(engine, loop, sameCadence)
	if err != nil {
		return Result{}, err
	}
	r := result(name, n, ts[0], ts[1], 0, 1)
	r.SameCadenceLoopPerSec = float64(n) / ts[2].Seconds()
	r.SameCadenceRatio = r.SameCadenceLoopPerSec / r.EnginePerSec
	return r, nil
}

// windowSumLoop is the window sum as a plain loop, record i of key seq[i]
// and timestamp i / windowPerMs as the engine's generator makes it: a map of per-key maps of window sums, and a queue of
// windows in firing order.
func windowSumLoop(seq []int32) (time.Duration, int64) {
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
	for i, k := range seq {
		key, ts := int64(k), int64(i)/windowPerMs
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

// windowSumLoopEvery is windowSumLoop with the engine's periodic watermark:
// it fires the windows behind the highest timestamp seen when every has
// passed since the last firing (the clock read every 1024 records, as the
// engine's source reads it between batches) and all at the end, so it
// holds as many windows per key as the engine does. Its lines repeat
// windowSumLoop's on purpose: that loop is the baseline of every window row
// since issue 31's fifth slice, and stays as it was measured.
func windowSumLoopEvery(seq []int32, every time.Duration) (time.Duration, int64) {
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
	maxTs, lastFire := int64(-1), start
	for i, k := range seq {
		key, ts := int64(k), int64(i)/windowPerMs
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
		maxTs = max(maxTs, ts)
		if i&1023 == 1023 {
			if now := time.Now(); now.Sub(lastFire) >= every {
				fire(maxTs - 1)
				lastFire = now
			}
		}
	}
	fire(1<<62 - 1)
	return time.Since(start), total
}
