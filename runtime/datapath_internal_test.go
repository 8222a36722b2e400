package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/watermark"
)

// The data path of the runtime on its own: source (parallelism 2) ->
// key-by exchange -> keyed operator (parallelism 2) -> rebalance exchange
// -> sink (parallelism 3), with small batches so that records cross the
// channels in many batches, some full and some flushed part-full. The
// outputs are checked exactly: every record arrives once, at the subtask
// owning its key group, with its timestamp, and the sink sees the final
// watermark after the last record.

const (
	dpRecords = 3001 // odd: the subtasks' shares differ, batches end part-full
	dpKeys    = 13
	dpMaxP    = 128
)

func dpKeyGroup(v int, maxP int) int {
	return keygroup.Assign(keygroup.HashInt32(int32(v%dpKeys)), maxP)
}

// sliceReader emits vals, at most per records a Poll, with timestamp =
// value.
type sliceReader struct {
	vals []int
	per  int
}

func (r *sliceReader) Poll(out SourceOutput[int]) (PollStatus, error) {
	if len(r.vals) == 0 {
		return Done, nil
	}
	n := min(r.per, len(r.vals))
	for _, v := range r.vals[:n] {
		out.Collect(0, v, int64(v))
	}
	r.vals = r.vals[n:]
	return More, nil
}
func (r *sliceReader) Ready() <-chan struct{} { return nil }
func (r *sliceReader) Close() error           { return nil }

// agg is the keyed operator's output: after each record, its key's count
// and sum so far, and the record itself.
type agg struct {
	Key, Count, Sum, Value, Subtask int
	TS                              int64
}

// sumOp keeps a count and sum per key (plain maps: the test is about the
// data path, not state) and fails on a record of a key group it does not
// own.
type sumOp struct {
	Base[agg]
	count, sum map[int]int
}

func (o *sumOp) Open(ctx *Context, out Output[agg]) error {
	o.count, o.sum = map[int]int{}, map[int]int{}
	return o.Base.Open(ctx, out)
}

func (o *sumOp) ProcessRecord(r Record[int]) error {
	if kg := dpKeyGroup(r.Value, o.Ctx.MaxParallelism); !o.Ctx.KeyGroups.Contains(kg) {
		return fmt.Errorf("subtask %d (key groups %v) got %d of key group %d", o.Ctx.Subtask, o.Ctx.KeyGroups, r.Value, kg)
	}
	k := r.Value % dpKeys
	o.count[k]++
	o.sum[k] += r.Value
	o.Out.Collect(Record[agg]{Value: agg{Key: k, Count: o.count[k], Sum: o.sum[k], Value: r.Value, Subtask: o.Ctx.Subtask, TS: r.Timestamp},
		Timestamp: r.Timestamp})
	return nil
}

func (o *sumOp) EndInput() error { return nil }

// collectOp is the sink: it logs records and watermarks.
type collectOp struct {
	Base[struct{}]
	mu   *sync.Mutex
	recs *[]agg
	wms  map[int][]int64 // by sink subtask
}

func (o *collectOp) ProcessRecord(r Record[agg]) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.Timestamp != r.Value.TS {
		return fmt.Errorf("record %+v arrived with timestamp %d", r.Value, r.Timestamp)
	}
	*o.recs = append(*o.recs, r.Value)
	return nil
}

func (o *collectOp) ProcessWatermark(ts int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.wms[o.Ctx.Subtask] = append(o.wms[o.Ctx.Subtask], ts)
	return nil
}

func (o *collectOp) EndInput() error { return nil }

func TestDataPathThroughExchanges(t *testing.T) {
	for _, cfg := range []struct {
		name     string
		buf      int
		chaining bool
	}{{"batches of 16", 16, true}, {"batches of 1", 1, true}, {"unchained, batches of 7", 7, false}} {
		t.Run(cfg.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			g := &Graph{}
			src := AddSource[int](g, "src", SourceFunc[int](func(sc SourceContext) (Reader[int], error) {
				var vals []int
				for v := sc.Subtask; v < dpRecords; v += sc.Parallelism {
					vals = append(vals, v)
				}
				return &sliceReader{vals: vals, per: 5}, nil
			}), watermark.ForMonotonous[int]())
			src.SetParallelism(2)
			sum := AddOneInput[int, agg](g, "sum", func() OneInputOperator[int, agg] { return &sumOp{} })
			sum.SetParallelism(2)
			Connect[int](src, nil, sum, 0, KeyGroups[int](func(maxP int) func(int) int { return func(v int) int { return dpKeyGroup(v, maxP) } }))
			var mu sync.Mutex
			var recs []agg
			wms := map[int][]int64{}
			sink := AddOneInput[agg, struct{}](g, "sink", func() OneInputOperator[agg, struct{}] {
				return &collectOp{mu: &mu, recs: &recs, wms: wms}
			})
			sink.SetParallelism(3)
			Connect[agg](sum, nil, sink, 0, Rebalance[agg]())
			err := Execute(ctx, g, Config{MaxParallelism: dpMaxP, BufferSize: cfg.buf, DisableChaining: !cfg.chaining,
				AutoWatermarkInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			checkDataPath(t, recs, wms)
		})
	}
}

func checkDataPath(t *testing.T, recs []agg, sinkWms map[int][]int64) {
	t.Helper()
	if len(recs) != dpRecords {
		t.Errorf("the sink got %d records, want %d", len(recs), dpRecords)
	}
	seen := make([]int, dpRecords)
	counts := map[int][]int{}
	final := map[int]int{} // key -> sum at its last count
	for _, r := range recs {
		if r.Value < 0 || r.Value >= dpRecords {
			t.Fatalf("record %+v: value out of range", r)
		}
		seen[r.Value]++
		if r.Key != r.Value%dpKeys || r.TS != int64(r.Value) {
			t.Fatalf("record %+v: wrong key or timestamp", r)
		}
		if want := keygroup.OperatorIndex(dpKeyGroup(r.Value, dpMaxP), dpMaxP, 2); r.Subtask != want {
			t.Fatalf("record %+v processed by subtask %d, the owner of its key group is %d", r, r.Subtask, want)
		}
		counts[r.Key] = append(counts[r.Key], r.Count)
		if len(counts[r.Key]) == 1 || r.Count > maxOf(counts[r.Key][:len(counts[r.Key])-1]) {
			final[r.Key] = r.Sum
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("value %d reached the sink %d times, want once", v, n)
		}
	}
	for k := range dpKeys {
		var n, s int
		for v := k; v < dpRecords; v += dpKeys {
			n++
			s += v
		}
		c := counts[k]
		sort.Ints(c)
		for i, x := range c {
			if x != i+1 {
				t.Fatalf("key %d: counts %v, want 1..%d once each", k, c, n)
			}
		}
		if len(c) != n || final[k] != s {
			t.Fatalf("key %d: %d records summing to %d, want %d summing to %d", k, len(c), final[k], n, s)
		}
	}
	for sub := range 3 {
		wms := sinkWms[sub]
		if len(wms) == 0 || wms[len(wms)-1] != watermark.Max {
			t.Fatalf("watermarks at sink subtask %d %v: want the final one (%d) last", sub, wms, int64(watermark.Max))
		}
		for i := 1; i < len(wms); i++ {
			if wms[i] < wms[i-1] {
				t.Fatalf("watermarks at sink subtask %d went back: %v", sub, wms)
			}
		}
	}
}

func maxOf(xs []int) int {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}
