package runtime_test

import (
	"sync"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// refSeen counts how records reached refOp, and sums their values.
type refSeen struct {
	mu              sync.Mutex
	byRef, byValue  int
	sum, timestamps int64
}

// refOp takes records by pointer (runtime.RecordRefProcessor).
type refOp struct {
	runtime.Base[struct{}]
	s *refSeen
}

func (o *refOp) ProcessRecord(r runtime.Record[[40]int64]) error {
	o.s.mu.Lock()
	o.s.byValue++
	o.s.mu.Unlock()
	return o.add(&r)
}

func (o *refOp) ProcessRecordRef(r *runtime.Record[[40]int64]) error {
	o.s.mu.Lock()
	o.s.byRef++
	o.s.mu.Unlock()
	return o.add(r)
}

func (o *refOp) add(r *runtime.Record[[40]int64]) error {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	o.s.sum += r.Value[0] + r.Value[39]
	o.s.timestamps += r.Timestamp
	return nil
}

// TestRecordRefProcessorGetsRecordsByPointer: an operator that implements
// RecordRefProcessor gets every record through ProcessRecordRef, chained to
// a source (the source's record) and behind a channel (the batch's
// records), with the values and timestamps ProcessRecord would have had.
func TestRecordRefProcessorGetsRecordsByPointer(t *testing.T) {
	const splits, perSplit = 2, 300
	for _, tc := range []struct {
		name      string
		rebalance bool
	}{{"chained", false}, {"channel", true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := weir.NewEnvironment(weir.Config{Parallelism: 1})
			src := weir.GenerateSplits(env, "src", splits, perSplit, func(split int, i int64) weir.Record[[40]int64] {
				var v [40]int64
				v[0], v[39] = i, int64(split)
				return weir.Record[[40]int64]{Value: v, Timestamp: i}
			}, watermark.ForMonotonous[[40]int64]())
			if tc.rebalance {
				src = weir.Rebalance(src)
			}
			s := &refSeen{}
			weir.Transform(src, "ref", func() runtime.OneInputOperator[[40]int64, struct{}] { return &refOp{s: s} })
			if err := env.Execute(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			const n = splits * perSplit
			if s.byRef != n || s.byValue != 0 {
				t.Errorf("ProcessRecordRef %d times, ProcessRecord %d times; want %d and 0", s.byRef, s.byValue, n)
			}
			wantTs := int64(splits * perSplit * (perSplit - 1) / 2)
			if want := wantTs + perSplit; s.sum != want || s.timestamps != wantTs {
				t.Errorf("values sum to %d, timestamps to %d; want %d and %d", s.sum, s.timestamps, want, wantTs)
			}
		})
	}
}
