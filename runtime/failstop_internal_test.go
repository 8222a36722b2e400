package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/watermark"
)

var errFailStop = errors.New("failstop: injected")

// failOn passes records on and fails on the one whose value is bad,
// logging every value it is given.
type failOn struct {
	Base[int]
	bad int
	log *valueLog
}

func (o *failOn) ProcessRecord(r Record[int]) error {
	o.log.add(r.Value)
	if r.Value == o.bad {
		return errFailStop
	}
	o.Out.Collect(r)
	return nil
}

func (o *failOn) EndInput() error { return nil }

// valueLog is what one operator was given, in order.
type valueLog struct {
	mu   sync.Mutex
	vals []int
}

func (l *valueLog) add(v int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.vals = append(l.vals, v)
}

func (l *valueLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.vals)
}

// TestFailureStopsTheChain checks I9: once an operator has failed its
// subtask, no operator of the subtask is given another record, also within
// one Poll of the source (its reader emits 20 records at once) and within
// one batch from the network (the 20 records arrive in one). Before I9 the
// records after the failed one went on through the chain and out to other
// subtasks: downstream saw the input with a gap (the failed record missing,
// later ones there), which no run, with or without the failure, produces;
// an agent operator numbered its inputs by that gapped order and discarded
// action states a later attempt needed (the simulator's seed
// 3067126113256803544, S11).
func TestFailureStopsTheChain(t *testing.T) {
	vals := make([]int, 20)
	for i := range vals {
		vals[i] = i
	}
	for _, tc := range []struct {
		name string
		edge Partitioner[int]
		// head: the source's records reach the chain through the
		// network (a pass-through heads the task), not chained to it.
		head bool
	}{{"chained to the source", Forward[int](), false}, {"behind a network batch", Rebalance[int](), true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g := &Graph{}
			src := AddSource[int](g, "src", SourceFunc[int](func(SourceContext) (Reader[int], error) {
				return &sliceReader{vals: slices.Clone(vals), per: len(vals)}, nil
			}), watermark.NoWatermarks[int]())
			headLog, failLog, afterLog := &valueLog{}, &valueLog{}, &valueLog{}
			from := src
			if tc.head {
				head := AddOneInput[int, int](g, "head", func() OneInputOperator[int, int] { return &failOn{bad: -1, log: headLog} })
				Connect[int](src, nil, head, 0, tc.edge)
				from = head
			}
			fail := AddOneInput[int, int](g, "fail", func() OneInputOperator[int, int] { return &failOn{bad: 3, log: failLog} })
			Connect[int](from, nil, fail, 0, Forward[int]())
			after := AddOneInput[int, int](g, "after", func() OneInputOperator[int, int] { return &failOn{bad: -1, log: afterLog} })
			Connect[int](fail, nil, after, 0, Forward[int]())
			err := Execute(ctx, g, Config{BufferSize: 64, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if !errors.Is(err, errFailStop) {
				t.Fatalf("the job ended with %v, want the injected failure", err)
			}
			if got := failLog.get(); !slices.Equal(got, vals[:4]) {
				t.Errorf("the failing operator was given %v, want %v (nothing after its failure)", got, vals[:4])
			}
			if got := afterLog.get(); !slices.Equal(got, vals[:3]) {
				t.Errorf("the operator behind it was given %v, want %v", got, vals[:3])
			}
			if got := headLog.get(); tc.head && !slices.Equal(got, vals[:4]) {
				t.Errorf("the head of the chain was given %v, want %v (nothing after the failure it fed)", got, vals[:4])
			}
		})
	}
}
