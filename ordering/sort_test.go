package ordering

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type ev struct {
	Key       string `json:"key"`
	TS        int64  `json:"ts"`
	Partition int64  `json:"partition"`
	Offset    int64  `json:"offset"`
	// WM, when set, makes the punctuated test generator emit it.
	WM int64 `json:"wm,omitempty"`
}

func tiebreak(e ev) (int64, int64) { return e.Partition, e.Offset }

// out collects records and watermarks of one subtask in arrival order.
type out struct {
	mu   sync.Mutex
	seq  []string
	recs []runtime.Record[ev]
}

type outOp struct {
	runtime.Base[struct{}]
	o *out
}

func (x *outOp) ProcessRecord(r runtime.Record[ev]) error {
	x.o.mu.Lock()
	x.o.recs = append(x.o.recs, r)
	x.o.seq = append(x.o.seq, fmt.Sprintf("%s@%d", r.Value.Key, r.Timestamp))
	x.o.mu.Unlock()
	return nil
}

func (x *outOp) ProcessWatermark(ts int64) error {
	x.o.mu.Lock()
	x.o.seq = append(x.o.seq, fmt.Sprintf("wm %d", ts))
	x.o.mu.Unlock()
	return nil
}

func (x *outOp) EndInput() error { return nil }

func (o *out) records() []runtime.Record[ev] {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.recs)
}

func (o *out) sequence() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seq)
}

func sinkTo(s weir.Stream[ev]) *out {
	o := &out{}
	weir.Transform(weir.Rebalance(s), "out", func() runtime.OneInputOperator[ev, struct{}] { return &outOp{o: o} }).Parallelism(1)
	return o
}

// checkSorted fails unless, per key, timestamps never decrease and equal
// timestamps follow the tiebreak.
func checkSorted(t *testing.T, recs []runtime.Record[ev]) {
	t.Helper()
	last := map[string]ev{}
	for _, r := range recs {
		p, ok := last[r.Value.Key]
		if ok && (p.TS > r.Value.TS || (p.TS == r.Value.TS && (p.Partition > r.Value.Partition ||
			(p.Partition == r.Value.Partition && p.Offset > r.Value.Offset)))) {
			t.Fatalf("key %s: %+v released after %+v", r.Value.Key, r.Value, p)
		}
		last[r.Value.Key] = r.Value
	}
}

// S1, S2: shuffled input comes out sorted per key, ties by (partition,
// offset), at parallelism 2; with records held as values and encoded
// (HeldCodec).
func TestSortOrdersPerKey(t *testing.T) {
	t.Run("values", func(t *testing.T) { testSortOrdersPerKey(t, nil, "") })
	t.Run("encoded", func(t *testing.T) { testSortOrdersPerKey(t, state.JSONCodec[ev](), "") })
	// With the Pebble backend the records are held in keyed state and
	// timers in its database (sortstore.go).
	t.Run("pebble", func(t *testing.T) { testSortOrdersPerKey(t, nil, state.BackendPebble) })
}

func testSortOrdersPerKey(t *testing.T, held state.Codec[ev], backend string) {
	rng := rand.New(rand.NewPCG(1, 2))
	var in []ev
	for i := range 2000 {
		in = append(in, ev{Key: fmt.Sprint("k", rng.IntN(17)), TS: int64(rng.IntN(300)), Partition: int64(rng.IntN(3)), Offset: int64(i)})
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, Logger: quiet,
		StateBackend: weir.StateBackendConfig{Kind: backend, Dir: t.TempDir()}})
	src := weir.FromSlice(env, "in", in, watermark.ForBoundedOutOfOrderness[ev](50*time.Millisecond).
		WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true }))
	sorted := Sort(weir.KeyBy(src, func(e ev) string { return e.Key }), "sort", SortOptions[ev]{Tiebreak: tiebreak, HeldCodec: held})
	o := sinkTo(sorted)
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := o.records()
	if len(got) != len(in) {
		t.Fatalf("released %d records, want %d", len(got), len(in))
	}
	checkSorted(t, got)
	for _, r := range got {
		if r.Timestamp != r.Value.TS {
			t.Fatalf("record %+v released with timestamp %d", r.Value, r.Timestamp)
		}
	}
}

// S1, S3, S5: a record behind the watermark is emitted at once, counted and
// copied to the violations side output; the others wait for the watermark.
func TestSortViolations(t *testing.T) {
	in := []ev{
		{Key: "a", TS: 5, Offset: 0},
		{Key: "a", TS: 12, Offset: 1},
		{Key: "a", TS: 3, Offset: 2},
		{Key: "a", TS: 20, Offset: 3, WM: 20},
		{Key: "a", TS: 15, Offset: 4}, // behind watermark 20
		{Key: "a", TS: 30, Offset: 5},
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet, AutoWatermarkInterval: -1})
	strategy := watermark.ForGenerator(func() watermark.Generator[ev] {
		return watermark.Punctuated(func(e ev, _ int64) (int64, bool) { return e.WM, e.WM != 0 })
	}).WithTimestamp(func(e ev, _ int64) (int64, bool) { return e.TS, true })
	src := weir.FromSlice(env, "in", in, strategy)
	late := weir.NewOutputTag[ev]("late")
	sorted := Sort(weir.KeyBy(src, func(e ev) string { return e.Key }), "sort", SortOptions[ev]{Violations: late})
	o := sinkTo(sorted)
	lateOut := sinkTo(weir.SideOutput(sorted, late))
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a@3", "a@5", "a@12", "a@20", "wm 20", "a@15", "a@30", fmt.Sprintf("wm %d", watermark.Max)}
	if got := o.sequence(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output %v, want %v", got, want)
	}
	if got := lateOut.records(); len(got) != 1 || got[0].Value.TS != 15 {
		t.Fatalf("violations side output %v, want the record at 15", got)
	}
	if n := env.Metrics().Sum("sort", "orderViolations"); n != 1 {
		t.Fatalf("orderViolations = %d, want 1", n)
	}
	if n := env.Metrics().Sum("sort", "recordsReleased"); n != 5 {
		t.Fatalf("recordsReleased = %d, want 5", n)
	}
}
