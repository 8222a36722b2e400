package runtime

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/watermark"
)

// Tests of M1..M5 (mailbox.go): what Context.Yield runs.

// yieldLog is what the operators of TestYieldSkipsUpstreamAndTaskLetters
// saw, in order. Appended on the task goroutine, read by the test after the
// job ended.
type yieldLog struct {
	mu  sync.Mutex
	ev  []string
	inB bool // B is inside ProcessRecord (task goroutine only)
}

func (l *yieldLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, fmt.Sprintf(format, args...))
}

func (l *yieldLog) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ev)
}

// oneShotReader emits one record, then ends.
type oneShotReader struct{ sent bool }

func (r *oneShotReader) Poll(out SourceOutput[int]) (PollStatus, error) {
	if r.sent {
		return Done, nil
	}
	r.sent = true
	out.Collect(0, 1, 1)
	return More, nil
}
func (r *oneShotReader) Ready() <-chan struct{} { return nil }
func (r *oneShotReader) Close() error           { return nil }

// probeOp forwards records and logs its snapshots; B (wait != nil) waits in
// ProcessRecord, through Yield, until its own letter has run.
type probeOp struct {
	Base[int]
	name    string
	log     *yieldLog
	mb      chan *Mailbox // hands the operator's mailbox handle to the test
	wait    chan struct{} // B only: closed when B starts waiting
	ownRan  bool          // B only: its own letter ran
	yielded int
}

func (o *probeOp) Open(ctx *Context, out Output[int]) error {
	o.Base.Open(ctx, out)
	o.mb <- ctx.Mailbox()
	return nil
}

func (o *probeOp) ProcessRecord(r Record[int]) error {
	if o.wait != nil {
		o.log.inB = true
		close(o.wait)
		for !o.ownRan {
			if err := o.Ctx.Yield(); err != nil {
				return err
			}
			o.yielded++
		}
		o.log.inB = false
		o.log.add("B returned")
	}
	o.Out.Collect(r)
	return nil
}

func (o *probeOp) EndInput() error { return nil }

func (o *probeOp) SnapshotState(*SnapshotWriter) error {
	o.log.add("snapshot %s inB=%v", o.name, o.log.inB)
	return nil
}

// queuedTask reports whether a task letter (a checkpoint trigger) is queued.
func queuedTask(m *mailbox) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.mu.q[m.mu.head:] {
		if l.pos == posTask {
			return true
		}
	}
	return false
}

// TestYieldSkipsUpstreamAndTaskLetters: in the chain source -> A -> B -> C
// (one task), B waits in ProcessRecord through Yield until its own letter
// ran. Meanwhile A posts a letter from another goroutine and a checkpoint
// is triggered (a task letter, since the source heads the task). B's Yield
// must run C's letter and its own, and neither A's letter nor the
// checkpoint: those run after B's ProcessRecord returned, so every
// operator is snapshotted outside B's call.
func TestYieldSkipsUpstreamAndTaskLetters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := &yieldLog{}
	mbs := map[string]chan *Mailbox{}
	ops := map[string]*probeOp{}
	wait := make(chan struct{})
	g := &Graph{}
	src := AddSource[int](g, "src", SourceFunc[int](func(SourceContext) (Reader[int], error) { return &oneShotReader{}, nil }),
		watermark.NoWatermarks[int]())
	prev := src
	for _, name := range []string{"A", "B", "C"} {
		mbs[name] = make(chan *Mailbox, 1)
		op := &probeOp{name: name, log: log, mb: mbs[name]}
		if name == "B" {
			op.wait = wait
		}
		ops[name] = op
		n := AddOneInput[int, int](g, name, func() OneInputOperator[int, int] { return op })
		Connect[int](prev, nil, n, 0, Forward[int]())
		prev = n
	}
	job, err := Start(ctx, g, Config{Checkpoint: CheckpointConfig{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	mbA, mbB, mbC := <-mbs["A"], <-mbs["B"], <-mbs["C"]
	select {
	case <-wait:
	case <-ctx.Done():
		t.Fatal("B never received its record")
	}
	// B waits in Yield now. A's completion arrives, then a checkpoint is
	// triggered; once its letter is queued (or, with a Yield that runs
	// everything, has run), C's and B's letters arrive.
	mbA.Post(func() { log.add("A letter inB=%v", log.inB) })
	cp := make(chan error, 1)
	go func() {
		_, _, err := job.TriggerCheckpoint(ctx)
		cp <- err
	}()
	tk := job.current().tasks[0]
	for !queuedTask(&tk.mailbox) && !slices.ContainsFunc(log.events(), func(e string) bool { return e[:4] == "snap" }) {
		if ctx.Err() != nil {
			t.Fatal("the checkpoint trigger was never posted")
		}
		time.Sleep(time.Millisecond)
	}
	mbC.Post(func() { log.add("C letter inB=%v", log.inB) })
	mbB.Post(func() {
		log.add("B letter inB=%v", log.inB)
		ops["B"].ownRan = true
	})
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-cp; err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	ev := log.events()
	ret := slices.Index(ev, "B returned")
	for _, want := range []string{"C letter inB=true", "B letter inB=true"} {
		if i := slices.Index(ev, want); i < 0 || i > ret {
			t.Errorf("%q did not run inside B's Yield: %q", want, ev)
		}
	}
	for _, want := range []string{"A letter inB=false", "snapshot A inB=false", "snapshot B inB=false", "snapshot C inB=false"} {
		if i := slices.Index(ev, want); i < ret {
			t.Errorf("%q did not run after B's ProcessRecord returned: %q", want, ev)
		}
	}
}

// TestYieldDefersUpstreamTimers: a processing-time callback of an operator
// upstream that falls due while a downstream operator waits in Yield stays
// queued (the Yield runs the downstream operator's own callback), and the
// task loop fires it once the Yield has returned.
func TestYieldDefersUpstreamTimers(t *testing.T) {
	clk := clock.NewManual(t0)
	tk, cancel := newTestTask(clk)
	defer cancel()
	up, down := &Context{task: tk, pos: 0}, &Context{task: tk, pos: 1}
	var got []string
	now := clock.NowMillis(clk)
	up.RegisterProcessingTimer(now+10, func(int64) { got = append(got, "upstream") })
	down.RegisterProcessingTimer(now+20, func(int64) { got = append(got, "own") })
	clk.Advance(10 * time.Millisecond) // the upstream callback is due
	go clk.Advance(10 * time.Millisecond)
	if err := down.Yield(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"own"}) {
		t.Fatalf("inside Yield ran %v, want only the operator's own callback", got)
	}
	if n := drive(&tk.timers); n != 1 || !slices.Equal(got, []string{"own", "upstream"}) {
		t.Fatalf("the task loop then fired %d times and ran %v; want the upstream callback", n, got)
	}
}
