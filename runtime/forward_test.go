package runtime_test

import (
	"sync"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// splitSeen records, per split, which subtasks saw its records and whether
// they came in order.
type splitSeen struct {
	mu       sync.Mutex
	subtasks map[int]map[int]bool
	last     map[int]int64
	disorder int
}

type splitSeenOp struct {
	runtime.Base[struct{}]
	s *splitSeen
}

func (o *splitSeenOp) ProcessRecord(r runtime.Record[[2]int64]) error {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	split, i := int(r.Value[0]), r.Value[1]
	if s.subtasks[split] == nil {
		s.subtasks[split] = map[int]bool{}
	}
	s.subtasks[split][o.Ctx.Subtask] = true
	if last, ok := s.last[split]; ok && i < last {
		s.disorder++
	}
	s.last[split] = i
	return nil
}

func (o *splitSeenOp) EndInput() error { return nil }

// TestParallelismSetAfterTransformStaysForward: an operator whose
// parallelism is set after it was added (Transform(...).Parallelism(p))
// behind an input with the same explicit parallelism (not the job default)
// is connected forward: each input subtask feeds one subtask, so a split's
// records stay in order and together (what a per-partition tiebreak, such
// as ordering.Sort's, relies on).
func TestParallelismSetAfterTransformStaysForward(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.GenerateSplits(env, "src", 3, 500, func(split int, i int64) weir.Record[[2]int64] {
		return weir.Record[[2]int64]{Value: [2]int64{int64(split), i}, Timestamp: i}
	}, watermark.ForMonotonous[[2]int64]()).Parallelism(3)
	mapped := weir.Map(src, "same", func(v [2]int64) [2]int64 { return v }).Parallelism(3)
	s := &splitSeen{subtasks: map[int]map[int]bool{}, last: map[int]int64{}}
	weir.Transform(mapped, "seen", func() runtime.OneInputOperator[[2]int64, struct{}] {
		return &splitSeenOp{s: s}
	}).Parallelism(3)
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if len(s.subtasks) != 3 {
		t.Fatalf("saw %d splits, want 3", len(s.subtasks))
	}
	for split, subs := range s.subtasks {
		if len(subs) != 1 {
			t.Errorf("split %d reached subtasks %v: the edges were rebalanced, not forward", split, subs)
		}
	}
	if s.disorder > 0 {
		t.Errorf("%d records out of split order", s.disorder)
	}
}
