package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/watermark"
	"pgregory.net/rapid"
)

// selVal numbers a record of the selection tests: the source subtask that
// emitted it and its place in that subtask's output (channel order).
type selVal struct{ Sub, Seq int }

// heldReader emits vals, per records a Poll; with after set, it emits
// nothing before after is closed; with emitted set, it closes it once it
// has emitted its last value; with end set, it ends only once end is
// closed.
type heldReader struct {
	vals          []selVal
	per           int
	after, end    <-chan struct{}
	emitted       chan struct{}
	emittedClosed bool
}

func (r *heldReader) Poll(out SourceOutput[selVal]) (PollStatus, error) {
	if r.after != nil {
		select {
		case <-r.after:
			r.after = nil
		default:
			return Wait, nil
		}
	}
	n := min(r.per, len(r.vals))
	for _, v := range r.vals[:n] {
		out.Collect(0, v, int64(v.Seq))
	}
	r.vals = r.vals[n:]
	if len(r.vals) > 0 {
		return More, nil
	}
	if r.emitted != nil && !r.emittedClosed {
		r.emittedClosed = true
		close(r.emitted)
	}
	if r.end != nil {
		select {
		case <-r.end:
		default:
			return Wait, nil
		}
	}
	return Done, nil
}

func (r *heldReader) Ready() <-chan struct{} {
	if r.after != nil {
		return r.after
	}
	return r.end
}
func (r *heldReader) Close() error { return nil }

// selSource is a source of parallelism p whose subtask s emits n selVals
// {s, 0..n-1}, subtask 0 held as the reader says.
func selSource(g *Graph, name string, p, n, per int, after, end <-chan struct{}, emitted chan struct{}) *Node {
	src := AddSource[selVal](g, name, SourceFunc[selVal](func(sc SourceContext) (Reader[selVal], error) {
		r := &heldReader{per: per, after: after, end: end}
		if sc.Subtask == 0 {
			r.emitted = emitted
		}
		for i := range n {
			r.vals = append(r.vals, selVal{sc.Subtask, i})
		}
		return r, nil
	}), watermark.NoWatermarks[selVal]())
	src.SetParallelism(p)
	return src
}

// creditOp selects input 1 while it has credit: each record of input 2
// gives it per records of input 1 (initially credit), and the end of input
// 2 unlimited credit. It logs what it processes, in order, and counts the
// records of input 1 it got without credit (overrun).
type creditOp struct {
	Base[struct{}]
	credit, per int
	ended2      bool
	mu          *sync.Mutex
	log         *[][2]selVal // {input, 0}, value
	overrun     *int
	completed   func(id int64)
}

func (o *creditOp) SelectsInput(i int) bool { return i == 2 || o.ended2 || o.credit > 0 }

func (o *creditOp) add(input int, v selVal) {
	o.mu.Lock()
	*o.log = append(*o.log, [2]selVal{{Sub: input}, v})
	o.mu.Unlock()
}

func (o *creditOp) ProcessRecord1(r Record[selVal]) error {
	if !o.SelectsInput(1) {
		o.mu.Lock()
		*o.overrun++
		o.mu.Unlock()
	}
	o.credit--
	o.add(1, r.Value)
	return nil
}

func (o *creditOp) ProcessRecord2(r Record[selVal]) error {
	o.credit += o.per
	o.add(2, r.Value)
	return nil
}

func (o *creditOp) EndInput(i int) error {
	if i == 2 {
		o.ended2 = true
	}
	return nil
}

func (o *creditOp) NotifyCheckpointComplete(id int64) error {
	if o.completed != nil {
		o.completed(id)
	}
	return nil
}
func (o *creditOp) NotifyCheckpointAborted(int64) {}

type selJob struct {
	p1, p2, n1, n2, per, credit, buf int
	after2, end1, end2               <-chan struct{}
	emitted1                         chan struct{}
	completed                        func(int64)
	cp                               CheckpointConfig
}

// run runs the job and returns what the operator processed, in order, and
// its overrun count.
func (j selJob) run(ctx context.Context) ([][2]selVal, int, error) {
	g := &Graph{}
	s1 := selSource(g, "in1", j.p1, j.n1, 3, nil, j.end1, j.emitted1)
	s2 := selSource(g, "in2", j.p2, j.n2, 2, j.after2, j.end2, nil)
	var mu sync.Mutex
	var log [][2]selVal
	var overrun int
	op := AddTwoInput[selVal, selVal, struct{}](g, "credit", func() TwoInputOperator[selVal, selVal, struct{}] {
		return &creditOp{credit: j.credit, per: j.per, mu: &mu, log: &log, overrun: &overrun, completed: j.completed}
	})
	op.SetParallelism(1)
	Connect[selVal](s1, nil, op, 0, Rebalance[selVal]())
	Connect[selVal](s2, nil, op, 1, Rebalance[selVal]())
	err := Execute(ctx, g, Config{MaxParallelism: 128, BufferSize: j.buf, Checkpoint: j.cp,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	mu.Lock()
	defer mu.Unlock()
	return log, overrun, err
}

// checkDelivered checks that log holds every record of both inputs once,
// each source subtask's in the order emitted.
func checkDelivered(log [][2]selVal, j selJob) error {
	next := map[[2]int]int{} // {input, sub} -> next seq
	for _, e := range log {
		in, v := e[0].Sub, e[1]
		k := [2]int{in, v.Sub}
		if v.Seq != next[k] {
			return fmt.Errorf("input %d, source subtask %d: got #%d, want #%d (order or duplicate)", in, v.Sub, v.Seq, next[k])
		}
		next[k]++
	}
	for in, pn := range [][2]int{{j.p1, j.n1}, {j.p2, j.n2}} {
		for s := range pn[0] {
			if got := next[[2]int{in + 1, s}]; got != pn[1] {
				return fmt.Errorf("input %d, source subtask %d: %d records delivered, want %d", in+1, s, got, pn[1])
			}
		}
	}
	return nil
}

// TestInputSelectionReadsInput2WhileInput1Waits: the operator takes no
// record of input 1 before input 2 gives it credit, and input 2 is held
// until all of input 1 was emitted (12 records, within the channel's
// buffers): the subtask must read input 2 past the batches of input 1
// waiting in its inbox, and never give the operator a record of input 1
// it did not select.
func TestInputSelectionReadsInput2WhileInput1Waits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emitted := make(chan struct{})
	j := selJob{p1: 1, p2: 1, n1: 12, n2: 3, per: 4, buf: 4, after2: emitted, emitted1: emitted}
	log, overrun, err := j.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDelivered(log, j); err != nil {
		t.Fatal(err)
	}
	if overrun != 0 {
		t.Fatalf("%d records of input 1 processed while it was not selected", overrun)
	}
	if log[0][0].Sub != 2 {
		t.Fatalf("the first record processed is of input %d, want 2", log[0][0].Sub)
	}
}

// TestInputSelectionAlignment: input 1 is not selected until a record of
// input 2 comes, which its source emits only once a checkpoint has
// completed. The checkpoint's barrier on input 1 is behind records the
// operator did not select: the subtask reads them anyway once input 2 has
// delivered its barrier (InputSelectable's exception), or the checkpoint
// would never complete.
func TestInputSelectionAlignment(t *testing.T) {
	for name, mode := range map[string]CheckpointMode{"exactly-once": ExactlyOnce, "at-least-once": AtLeastOnce} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done, end := make(chan struct{}), make(chan struct{})
			var once sync.Once
			j := selJob{p1: 2, p2: 1, n1: 30, n2: 1, per: 1000, buf: 4, after2: done, end1: end,
				completed: func(int64) { once.Do(func() { close(done) }) },
				cp:        CheckpointConfig{Interval: 10 * time.Millisecond, Dir: t.TempDir(), Mode: mode}}
			var log [][2]selVal
			var err error
			ran := make(chan struct{})
			go func() {
				defer close(ran)
				log, _, err = j.run(ctx)
			}()
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("no checkpoint completed while input 1 was not selected")
			}
			close(end)
			<-ran
			if err != nil {
				t.Fatal(err)
			}
			if err := checkDelivered(log, j); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestInputSelectionProperty: over batch sizes, parallelisms and credit
// rules (selection flipping on every record or rarely, input 1 waiting
// for the end of input 2), every record is delivered once, in channel
// order, and none of input 1 without the operator's selection.
func TestInputSelectionProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		j := selJob{
			p1: rapid.IntRange(1, 3).Draw(rt, "p1"), p2: rapid.IntRange(1, 3).Draw(rt, "p2"),
			n1: rapid.IntRange(0, 40).Draw(rt, "n1"), n2: rapid.IntRange(0, 20).Draw(rt, "n2"),
			per: rapid.IntRange(0, 3).Draw(rt, "per"), credit: rapid.IntRange(0, 5).Draw(rt, "credit"),
			buf: rapid.IntRange(1, 8).Draw(rt, "buf"),
		}
		log, overrun, err := j.run(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		if err := checkDelivered(log, j); err != nil {
			rt.Fatal(err)
		}
		if overrun != 0 {
			rt.Fatalf("%d records of input 1 processed while it was not selected", overrun)
		}
	})
}
