package window_test

import (
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// The two benchmarks below do the same work: b.N records over 10,000 keys,
// event time rising 1ms every 100 records (so a 1s window holds 100,000
// records, 10 per key), a per-key sum per 1s tumbling window, every window
// fired once the watermark (ascending timestamps) passes its end. The
// first runs the window operator in a one-subtask job (source, key-by
// exchange, window, discarding sink); the second is the same computation
// as a hand-written single-goroutine loop, the floor under what any
// operator could cost.

const (
	benchKeys   = 10_000
	benchPerMs  = 100
	benchWindow = 1000 // ms
)

type benchEv struct {
	Key int64
	N   int64
}

func BenchmarkTumblingSum10kKeys(b *testing.B) {
	benchSum(b, window.Tumbling(benchWindow*time.Millisecond))
}

// BenchmarkTumblingSumTrigger10kKeys is BenchmarkTumblingSum10kKeys with
// EventTimeTrigger set explicitly: the same output through the general
// trigger path (a trigger call and a timer-queue lookup per record).
func BenchmarkTumblingSumTrigger10kKeys(b *testing.B) {
	benchSum(b, window.Tumbling(benchWindow*time.Millisecond), window.WithTrigger(window.EventTimeTrigger()))
}

// BenchmarkCountTumblingSum10kKeys sums windows of 10 records per key
// (CountTumbling(10)): Global windows with PurgingTrigger(CountTrigger),
// a count in trigger state per key; every record is counted once.
func BenchmarkCountTumblingSum10kKeys(b *testing.B) {
	benchSum(b, window.CountTumbling(10))
}

// BenchmarkSessionSum10kKeys sums event-time sessions with a 1s gap over
// the same records: each key gets a record every 100ms of event time, so
// its one session grows by a merge with every record (a new window that
// overlaps it), and fires at the end of the input.
func BenchmarkSessionSum10kKeys(b *testing.B) {
	benchSum(b, window.Session(time.Second))
}

func benchSum(b *testing.B, a window.Assigner, opts ...window.Option) {
	b.ReportAllocs()
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.Generate(env, "gen", int64(b.N), func(i int64) runtime.Record[benchEv] {
		return runtime.Record[benchEv]{Value: benchEv{Key: i % benchKeys, N: 1}, Timestamp: i / benchPerMs}
	}, watermark.ForMonotonous[benchEv]())
	sums := window.Reduce(weir.KeyBy(src, func(e benchEv) int64 { return e.Key }), "sum", a,
		func(a, b benchEv) benchEv { a.N += b.N; return a }, opts...)
	var total int64
	weir.ToSink(sums, "sink", func(*runtime.Context) (weir.SinkWriter[benchEv], error) {
		return weir.SinkFunc[benchEv](func(r runtime.Record[benchEv]) error { total += r.Value.N; return nil }), nil
	})
	b.ResetTimer()
	run(b, env)
	b.StopTimer()
	want := int64(b.N)
	if _, count := a.(interface{ DefaultEvictor() window.Evictor }); count {
		// Count windows of 10: a key's last c % 10 records never fire.
		want = 0
		for k := range int64(benchKeys) {
			c := int64(b.N) / benchKeys
			if k < int64(b.N)%benchKeys {
				c++
			}
			want += c - c%10
		}
	}
	if total != want {
		b.Fatalf("sum of window sums %d, want %d", total, want)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkTumblingSumLoop(b *testing.B) {
	b.ReportAllocs()
	type pending struct{ start, key int64 }
	sums := map[int64]map[int64]int64{} // key -> window start -> sum
	var queue []pending                 // windows in firing order
	var total int64
	wm := int64(-1 << 63)
	fire := func(to int64) {
		n := 0
		for ; n < len(queue) && queue[n].start+benchWindow-1 <= to; n++ {
			p := queue[n]
			total += sums[p.key][p.start]
			delete(sums[p.key], p.start)
		}
		queue = slices.Delete(queue, 0, n)
	}
	b.ResetTimer()
	for i := range int64(b.N) {
		key, ts := i%benchKeys, i/benchPerMs
		start := ts - ts%benchWindow
		m := sums[key]
		if m == nil {
			m = map[int64]int64{}
			sums[key] = m
		}
		if _, ok := m[start]; !ok {
			// Timestamps ascend, so appending keeps the queue sorted.
			queue = append(queue, pending{start, key})
		}
		m[start]++
		// A watermark every 10,000 records (the periodic emit).
		if i%10_000 == 9_999 && ts-1 > wm {
			wm = ts - 1
			fire(wm)
		}
	}
	fire(1<<63 - 1)
	b.StopTimer()
	if total != int64(b.N) {
		b.Fatalf("sum of window sums %d, want %d", total, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
