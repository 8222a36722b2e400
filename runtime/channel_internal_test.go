package runtime

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"testing"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/keygroup"
)

// recv takes one batch from g's inbox without blocking.
func recv[T any](t *testing.T, g *gate[T]) (batch[T], bool) {
	t.Helper()
	select {
	case b := <-g.inbox:
		return b, true
	default:
		return batch[T]{}, false
	}
}

func values(recs []Record[int]) []int {
	out := make([]int, len(recs))
	for i, r := range recs {
		out[i] = r.Value
	}
	return out
}

// TestCreditsBoundInFlightBatches: a producer holds at most
// BuffersPerChannel buffers in flight; the next one blocks it until the
// consumer hands a buffer back (I4). Nothing is dropped.
func TestCreditsBoundInFlightBatches(t *testing.T) {
	const credits, size = 2, 4
	g := newGate[int](1, credits, size)
	done := make(chan struct{})
	defer close(done)
	c := &outChannel[int]{idx: 0, g: g, done: done, task: &task{}}

	added := make(chan int, 100) // the producer reports every add that returned
	go func() {
		for i := range credits*size + 1 {
			c.add(Record[int]{Value: i})
			added <- i
		}
		close(added)
	}()
	// The first credits*size adds fill and send every buffer.
	for i := range credits * size {
		if got := <-added; got != i {
			t.Fatalf("add %d returned, want %d", got, i)
		}
	}
	// The next add needs a third buffer: the producer is blocked in it.
	// (A producer that did not block would report add 8; give it every
	// chance to, without relying on time.)
	for range 100 {
		goruntime.Gosched()
	}
	select {
	case i := <-added:
		t.Fatalf("add %d returned while every buffer was in flight", i)
	default:
	}
	if n := len(g.inbox); n != credits {
		t.Fatalf("%d batches in the inbox, want %d", n, credits)
	}
	if n := len(g.free[0]); n != 0 {
		t.Fatalf("%d free buffers while the producer is blocked", n)
	}
	// The consumer processes one batch and hands its buffer back: the
	// producer goes on.
	b, _ := recv(t, g)
	if got := values(b.recs); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("first batch %v", got)
	}
	g.release(b)
	if got, ok := <-added; !ok || got != credits*size {
		t.Fatalf("after a release the producer reported %d, %v", got, ok)
	}
	if _, ok := <-added; ok {
		t.Fatal("producer did more than asked")
	}
	b, _ = recv(t, g)
	if got := values(b.recs); !slices.Equal(got, []int{4, 5, 6, 7}) {
		t.Fatalf("second batch %v", got)
	}
	g.release(b)
	// The last record sits in a partly filled buffer until a flush.
	if _, ok := recv(t, g); ok {
		t.Fatal("a partly filled buffer was sent without a flush")
	}
	c.flush()
	b, _ = recv(t, g)
	if got := values(b.recs); !slices.Equal(got, []int{8}) || b.ctrl != ctrlNone {
		t.Fatalf("flushed batch %v ctrl %d", got, b.ctrl)
	}
}

// TestControlElementsAreBackPressuredToo: a watermark needs a buffer like
// records do, so it cannot overtake them through a full channel.
func TestControlElementsAreBackPressuredToo(t *testing.T) {
	g := newGate[int](1, 1, 2)
	done := make(chan struct{})
	c := &outChannel[int]{idx: 0, g: g, done: done, task: &task{}}
	c.add(Record[int]{Value: 1})
	c.add(Record[int]{Value: 2}) // full: sent, no buffer left
	sent := make(chan struct{})
	go func() {
		c.send(ctrlWatermark, 7)
		close(sent)
	}()
	for range 100 {
		goruntime.Gosched()
	}
	select {
	case <-sent:
		t.Fatal("a watermark was sent without a free buffer")
	default:
	}
	b, _ := recv(t, g)
	g.release(b)
	<-sent
	b, _ = recv(t, g)
	if b.ctrl != ctrlWatermark || b.val != 7 || len(b.recs) != 0 {
		t.Fatalf("got %+v", b)
	}
	close(done)
}

// TestCancelUnblocksProducer: a producer blocked on credits returns when the
// job is cancelled (the element is dropped: the job is over).
func TestCancelUnblocksProducer(t *testing.T) {
	g := newGate[int](1, 1, 1)
	done := make(chan struct{})
	c := &outChannel[int]{idx: 0, g: g, done: done, task: &task{}}
	c.add(Record[int]{Value: 1}) // sent; the only buffer is in flight
	returned := make(chan struct{})
	go func() {
		c.add(Record[int]{Value: 2})
		c.send(ctrlWatermark, 3)
		close(returned)
	}()
	close(done)
	<-returned
	if len(g.inbox) != 1 {
		t.Fatalf("%d batches after cancel, want 1", len(g.inbox))
	}
}

// TestChannelKeepsOrder: records, watermarks and idleness of one channel
// arrive in the order they were emitted (I1), through a consumer running
// concurrently with small buffers and few credits.
func TestChannelKeepsOrder(t *testing.T) {
	const n = 20000
	g := newGate[int](1, 2, 8)
	done := make(chan struct{})
	defer close(done)
	c := &outChannel[int]{idx: 0, g: g, done: done, task: &task{}}
	type elem struct {
		ctrl ctrlKind
		v    int64
	}
	var want []elem
	go func() {
		for i := range n {
			c.add(Record[int]{Value: i, Timestamp: int64(i)})
			switch {
			case i%37 == 0:
				c.send(ctrlWatermark, int64(i))
			case i%101 == 0:
				c.send(ctrlIdle, 0)
			case i%103 == 0:
				c.send(ctrlActive, 0)
			case i%997 == 0:
				c.flush()
			}
		}
		c.send(ctrlEnd, 0)
	}()
	for i := range n {
		want = append(want, elem{ctrlNone, int64(i)})
		switch {
		case i%37 == 0:
			want = append(want, elem{ctrlWatermark, int64(i)})
		case i%101 == 0:
			want = append(want, elem{ctrlIdle, 0})
		case i%103 == 0:
			want = append(want, elem{ctrlActive, 0})
		}
	}
	want = append(want, elem{ctrlEnd, 0})
	var got []elem
	for {
		b := <-g.inbox
		if len(b.recs) > cap(b.recs) || cap(b.recs) != 8 {
			t.Fatalf("batch of %d records with capacity %d", len(b.recs), cap(b.recs))
		}
		for _, r := range b.recs {
			got = append(got, elem{ctrlNone, int64(r.Value)})
		}
		if b.ctrl != ctrlNone {
			got = append(got, elem{b.ctrl, b.val})
		}
		end := b.ctrl == ctrlEnd
		g.release(b)
		if end {
			break
		}
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("element %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		t.Fatalf("got %d elements, want %d", len(got), len(want))
	}
}

// TestControlFlushesPendingRecords: a control element travels in the same
// batch as the records buffered before it, so it never overtakes them; a
// flush of an empty buffer sends nothing.
func TestControlFlushesPendingRecords(t *testing.T) {
	g := newGate[int](1, 4, 16)
	done := make(chan struct{})
	defer close(done)
	c := &outChannel[int]{idx: 0, g: g, done: done, records: &Counter{}, task: &task{}}
	c.flush()
	if _, ok := recv(t, g); ok {
		t.Fatal("flush without records sent a batch")
	}
	c.add(Record[int]{Value: 1})
	c.add(Record[int]{Value: 2})
	c.send(ctrlWatermark, 5)
	b, ok := recv(t, g)
	if !ok || b.ctrl != ctrlWatermark || b.val != 5 || !slices.Equal(values(b.recs), []int{1, 2}) {
		t.Fatalf("got %+v", b)
	}
	c.send(ctrlIdle, 0)
	b, ok = recv(t, g)
	if !ok || b.ctrl != ctrlIdle || len(b.recs) != 0 {
		t.Fatalf("got %+v", b)
	}
	c.add(Record[int]{Value: 3})
	c.flush()
	b, ok = recv(t, g)
	if !ok || b.ctrl != ctrlNone || !slices.Equal(values(b.recs), []int{3}) {
		t.Fatalf("got %+v", b)
	}
	if c.records.Value() != 3 {
		t.Fatalf("records counter %d, want 3", c.records.Value())
	}
}

// TestGateSharesOneInboxAcrossChannels: batches of several channels arrive
// on one inbox tagged with their channel, and each buffer goes back to its
// own channel's free list.
func TestGateSharesOneInboxAcrossChannels(t *testing.T) {
	g := newGate[int](3, 1, 1)
	done := make(chan struct{})
	defer close(done)
	var chans []*outChannel[int]
	for i := range 3 {
		chans = append(chans, &outChannel[int]{idx: int32(i), g: g, done: done, task: &task{}})
	}
	for i, c := range chans {
		c.add(Record[int]{Value: 10 * i})
	}
	seen := map[int32]int{}
	for range 3 {
		b, ok := recv(t, g)
		if !ok {
			t.Fatal("missing batch")
		}
		seen[b.ch] = b.recs[0].Value
		g.release(b)
		if len(g.free[b.ch]) != 1 {
			t.Fatalf("buffer of channel %d not returned to its free list", b.ch)
		}
	}
	if seen[0] != 0 || seen[1] != 10 || seen[2] != 20 {
		t.Fatalf("seen %v", seen)
	}
}

// TestWriterPartitioning: rebalance round-robins, broadcast copies,
// forward uses its one channel, key-by follows the key function; control
// elements go to every channel.
func TestWriterPartitioning(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	mk := func(kind partitioning, n int) (*writer[int], []*gate[int]) {
		w := &writer[int]{kind: kind}
		var gs []*gate[int]
		for range n {
			g := newGate[int](1, 4, 64)
			gs = append(gs, g)
			w.chans = append(w.chans, &outChannel[int]{idx: 0, g: g, done: done, task: &task{}})
		}
		return w, gs
	}
	collect := func(gs []*gate[int]) [][]int {
		out := make([][]int, len(gs))
		for i, g := range gs {
			for {
				b, ok := recv(t, g)
				if !ok {
					break
				}
				out[i] = append(out[i], values(b.recs)...)
				if b.ctrl == ctrlWatermark {
					out[i] = append(out[i], -int(b.val))
				}
				g.release(b)
			}
		}
		return out
	}
	w, gs := mk(partRebalance, 3)
	for i := range 7 {
		w.Collect(Record[int]{Value: i})
	}
	w.EmitWatermark(100)
	if got := fmt.Sprint(collect(gs)); got != "[[0 3 6 -100] [1 4 -100] [2 5 -100]]" {
		t.Fatalf("rebalance: %s", got)
	}
	w, gs = mk(partBroadcast, 2)
	w.Collect(Record[int]{Value: 1})
	w.Collect(Record[int]{Value: 2})
	w.EmitWatermark(5)
	if got := fmt.Sprint(collect(gs)); got != "[[1 2 -5] [1 2 -5]]" {
		t.Fatalf("broadcast: %s", got)
	}
	// Key-by: 4 key groups over 2 subtasks (groups 0-1 to the first, 2-3
	// to the second); each batch carries its records' key groups.
	w, gs = mk(partKey, 2)
	w.keyGroup, w.route = func(v int) int { return v % 4 }, keygroup.NewRouter(4, 2)
	for i := range 6 {
		w.Collect(Record[int]{Value: 10 + i})
	}
	w.flush()
	var got [2][]string
	for i, g := range gs {
		b, _ := recv(t, g)
		if len(b.kgs) != len(b.recs) {
			t.Fatalf("key-by: %d key groups for %d records", len(b.kgs), len(b.recs))
		}
		for j, r := range b.recs {
			got[i] = append(got[i], fmt.Sprintf("%d:%d", r.Value, b.kgs[j]))
		}
		g.release(b)
	}
	if s := fmt.Sprint(got); s != "[[12:0 13:1] [10:2 11:3 14:2 15:3]]" {
		t.Fatalf("key-by: %s", s)
	}
	w, gs = mk(partForward, 1)
	w.Collect(Record[int]{Value: 9})
	w.EmitIdle(true)
	b, _ := recv(t, gs[0])
	if b.ctrl != ctrlIdle || !slices.Equal(values(b.recs), []int{9}) {
		t.Fatalf("forward: %+v", b)
	}
	gs[0].release(b)
	w.end()
	b, _ = recv(t, gs[0])
	if b.ctrl != ctrlEnd {
		t.Fatalf("end: %+v", b)
	}
}

// rec is an Output that records what it receives.
type rec struct{ log []string }

func (r *rec) Collect(x Record[int]) {
	r.log = append(r.log, fmt.Sprintf("r%d@%d", x.Value, x.Timestamp))
}
func (r *rec) EmitWatermark(ts int64) { r.log = append(r.log, fmt.Sprintf("w%d", ts)) }
func (r *rec) EmitIdle(idle bool)     { r.log = append(r.log, fmt.Sprintf("idle=%v", idle)) }

// TestFanoutAndWithSides: a fanout gives every output everything; withSides
// gives records to the main output only and watermarks and idleness to the
// main output and every side output.
func TestFanoutAndWithSides(t *testing.T) {
	a, b := &rec{}, &rec{}
	f := outputOf([]Output[int]{a, b})
	f.Collect(Record[int]{Value: 1, Timestamp: 2})
	f.EmitWatermark(3)
	f.EmitIdle(true)
	f.EmitIdle(false)
	want := []string{"r1@2", "w3", "idle=true", "idle=false"}
	if !slices.Equal(a.log, want) || !slices.Equal(b.log, want) {
		t.Fatalf("fanout: %v / %v", a.log, b.log)
	}
	if o := outputOf([]Output[int]{a}); o != Output[int](a) {
		t.Fatalf("outputOf of one output is %T, want the output itself", o)
	}
	if _, ok := outputOf[int](nil).(discard[int]); !ok {
		t.Fatal("outputOf of no output should discard")
	}

	m, s1, s2 := &rec{}, &rec{}, &rec{}
	w := mainOutput[int](Output[int](m), []control{s1, s2})
	w.Collect(Record[int]{Value: 5, Timestamp: 6})
	w.EmitWatermark(7)
	w.EmitIdle(true)
	if want := []string{"r5@6", "w7", "idle=true"}; !slices.Equal(m.log, want) {
		t.Fatalf("main: %v", m.log)
	}
	for _, s := range []*rec{s1, s2} {
		if want := []string{"w7", "idle=true"}; !slices.Equal(s.log, want) {
			t.Fatalf("side: %v", s.log)
		}
	}
	// Without a main consumer, side outputs still get the control elements.
	s3 := &rec{}
	w = mainOutput[int](nil, []control{s3})
	w.Collect(Record[int]{Value: 1})
	w.EmitWatermark(9)
	if want := []string{"w9"}; !slices.Equal(s3.log, want) {
		t.Fatalf("side without main: %v", s3.log)
	}
	if o := mainOutput[int](Output[int](m), nil); o != Output[int](m) {
		t.Fatalf("mainOutput without sides is %T", o)
	}
}

// TestInputStateRoutesBatches: inputState hands records to the operator,
// control elements to the channel combiner, and counts ends per channel.
func TestInputStateRoutesBatches(t *testing.T) {
	g := newGate[int](2, 2, 4)
	done := make(chan struct{})
	defer close(done)
	to := &valveRec{}
	tk, cancel := newTestTask(clock.NewManual(t0))
	defer cancel()
	tk.align = aligner{t: tk}
	in := newInputState[int](tk, g, to)
	c0 := &outChannel[int]{idx: 0, g: g, done: done, task: &task{}}
	c1 := &outChannel[int]{idx: 1, g: g, done: done, task: &task{}}
	step := func() {
		b, ok := recv(t, g)
		if !ok {
			t.Fatal("no batch")
		}
		in.handle(b)
	}
	c0.add(Record[int]{Value: 1, Timestamp: 1})
	c0.send(ctrlWatermark, 10)
	step()
	c1.send(ctrlWatermark, 20)
	step()
	c1.send(ctrlIdle, 0)
	step()
	c0.send(ctrlWatermark, 30) // only active channel: the output follows it
	step()
	c1.send(ctrlActive, 0) // 20 < 30: stays unaligned
	step()
	c1.send(ctrlWatermark, 25)
	step()
	c1.send(ctrlWatermark, 40) // realigns; min(30, 40) = 30: nothing new
	step()
	c0.send(ctrlWatermark, 50)
	step()
	c0.send(ctrlEnd, 0)
	step()
	if in.finished() {
		t.Fatal("finished after one of two channels ended")
	}
	c0.send(ctrlEnd, 0) // a repeated end counts once
	step()
	c1.send(ctrlEnd, 0)
	step()
	if !in.finished() {
		t.Fatal("not finished after both channels ended")
	}
	want := []string{"r1@1", "w10", "w30", "w40"}
	if !slices.Equal(to.log, want) {
		t.Fatalf("got %v, want %v", to.log, want)
	}
	// Every buffer is back on its free list.
	for i := range g.free {
		if len(g.free[i]) != 2 {
			t.Fatalf("channel %d has %d free buffers, want 2", i, len(g.free[i]))
		}
	}
}

type valveRec struct{ rec }

func (v *valveRec) MarkIdle()   { v.log = append(v.log, "idle") }
func (v *valveRec) MarkActive() { v.log = append(v.log, "active") }
