package runtime

import (
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/keygroup"
)

// Channels between subtasks.
//
// A channel connects one upstream subtask to one downstream subtask input.
// It owns a fixed number of batch buffers (credits). The upstream writer
// takes a free buffer, appends records to it, and sends it to the
// downstream gate's inbox when it is full, when a control element
// (watermark, idleness, end of input) follows, or on a flush. The
// downstream subtask processes the batch and hands the buffer back on the
// channel's free list. So:
//
//	upstream:   buf := <-free        (blocks when all buffers are in flight:
//	                                  back-pressure, I4)
//	            buf = append(buf, r) (per record: no lock, no channel op, I5)
//	            inbox <- batch{buf}  (never blocks: the inbox holds every credit)
//	downstream: b := <-inbox; process; free <- b.recs[:0]
//
// Every channel of one gate shares the gate's inbox, so a subtask waits on a
// single Go channel per input however many upstream subtasks feed it.
// Order within a channel is kept because one writer sends in order and the
// inbox is FIFO (I1).

type ctrlKind uint8

const (
	ctrlNone ctrlKind = iota
	ctrlWatermark
	ctrlIdle
	ctrlActive
	ctrlEnd
	ctrlBarrier // val is the checkpoint id
)

type batch[T any] struct {
	ch   int32
	ctrl ctrlKind
	val  int64
	recs []Record[T]
	// kgs is the key group of each record of recs on a key-by edge (the
	// writer computed it to route the record; the keyed operator takes it
	// instead of hashing the key again), nil on other edges.
	kgs []int32
}

// gate is the input of one downstream subtask: its inbox and, per channel,
// the free list the buffers go back to.
type gate[T any] struct {
	inbox chan batch[T]
	free  []chan chanBuf[T]
	// size is a buffer's capacity in records. A buffer is allocated when
	// its channel first takes it (acquire), not with the gate: a channel
	// that never has more than one batch in flight allocates one, not
	// every credit (a short job's channels allocated megabytes they never
	// filled).
	size int
}

// chanBuf is one buffer of a channel: its records and, on a key-by edge,
// their key groups (allocated on first use, then recycled with the
// records).
type chanBuf[T any] struct {
	recs []Record[T]
	kgs  []int32
}

func newGate[T any](channels, credits, size int) *gate[T] {
	g := &gate[T]{
		inbox: make(chan batch[T], channels*credits),
		free:  make([]chan chanBuf[T], channels),
		size:  size,
	}
	for i := range g.free {
		g.free[i] = make(chan chanBuf[T], credits)
		for j := 0; j < credits; j++ {
			g.free[i] <- chanBuf[T]{} // allocated by acquire
		}
	}
	return g
}

// release hands a processed buffer back to its channel.
func (g *gate[T]) release(b batch[T]) {
	if b.recs != nil {
		g.free[b.ch] <- chanBuf[T]{recs: b.recs[:0], kgs: b.kgs[:0]}
	}
}

// outChannel is the upstream end of one channel.
type outChannel[T any] struct {
	idx     int32
	g       *gate[T]
	buf     []Record[T] // nil while no buffer is held
	kgs     []int32     // key groups of buf's records (key-by edges only)
	done    <-chan struct{}
	records *Counter // records sent, counted per batch
	task    *task    // told when the channel blocks the producer
}

// acquire takes a free buffer, blocking while all are in flight. It returns
// false if the job is being cancelled.
func (c *outChannel[T]) acquire() bool {
	select {
	case b := <-c.g.free[c.idx]:
		c.take(b)
		return true
	default:
	}
	// Every buffer is in flight: the consumer is slower. Tell the task
	// (sources pause their idleness clocks: blocked time is not silence).
	c.task.backpressured(true)
	defer c.task.backpressured(false)
	select {
	case b := <-c.g.free[c.idx]:
		c.take(b)
		return true
	case <-c.done:
		return false
	}
}

// take holds b, allocating its records the first time the buffer is
// taken: buf is never nil while held (nil means none held, and release
// returns only a buffer whose records are not nil).
func (c *outChannel[T]) take(b chanBuf[T]) {
	if b.recs == nil {
		b.recs = make([]Record[T], 0, c.g.size)
	}
	c.buf, c.kgs = b.recs, b.kgs
}

func (c *outChannel[T]) send(ctrl ctrlKind, val int64) {
	if c.buf == nil && !c.acquire() {
		return
	}
	if c.records != nil && len(c.buf) > 0 {
		c.records.Add(int64(len(c.buf)))
	}
	c.g.inbox <- batch[T]{ch: c.idx, ctrl: ctrl, val: val, recs: c.buf, kgs: c.kgs}
	c.buf, c.kgs = nil, nil
}

func (c *outChannel[T]) add(r Record[T]) {
	if c.buf == nil && !c.acquire() {
		return
	}
	c.buf = append(c.buf, r)
	if len(c.buf) == cap(c.buf) {
		c.send(ctrlNone, 0)
	}
}

// addKeyed is add for a key-by edge: r's key group goes along with it, in
// a slice that travels and is recycled with the buffer.
func (c *outChannel[T]) addKeyed(r Record[T], kg int32) {
	if c.buf == nil && !c.acquire() {
		return
	}
	if c.kgs == nil {
		c.kgs = make([]int32, 0, cap(c.buf))
	}
	c.buf = append(c.buf, r)
	c.kgs = append(c.kgs, kg)
	if len(c.buf) == cap(c.buf) {
		c.send(ctrlNone, 0)
	}
}

func (c *outChannel[T]) flush() {
	if len(c.buf) > 0 {
		c.send(ctrlNone, 0)
	}
}

// partitioning says which downstream subtasks a record goes to.
type partitioning uint8

const (
	partForward partitioning = iota
	partRebalance
	partBroadcast
	partKey
	// partAuto is forward where the two operators' parallelisms are equal
	// and rebalance where they differ, decided when the job is built
	// (builder.kindOf); no writer ever has this kind.
	partAuto
)

func (p partitioning) String() string {
	switch p {
	case partForward:
		return "forward"
	case partRebalance:
		return "rebalance"
	case partBroadcast:
		return "broadcast"
	case partKey:
		return "key-by"
	case partAuto:
		return "forward-or-rebalance"
	}
	return "?"
}

// writer is the Output of one network edge in one upstream subtask.
type writer[T any] struct {
	kind     partitioning
	chans    []*outChannel[T]
	keyGroup func(T) int     // key group of a record, for partKey
	route    keygroup.Router // key group -> consumer subtask, for partKey
	next     int
	records  *Counter
}

var _ Output[int] = (*writer[int])(nil)

func (w *writer[T]) Collect(r Record[T]) {
	switch w.kind {
	case partForward:
		w.chans[0].add(r)
	case partRebalance:
		w.chans[w.next].add(r)
		w.next++
		if w.next == len(w.chans) {
			w.next = 0
		}
	case partKey:
		kg := w.keyGroup(r.Value)
		w.chans[w.route.Operator(kg)].addKeyed(r, int32(kg))
	case partBroadcast:
		for _, c := range w.chans {
			c.add(r)
		}
	}
}

// collectRef is Collect with the record passed by pointer (refOutput).
func (w *writer[T]) collectRef(r *Record[T]) {
	switch w.kind {
	case partForward:
		w.chans[0].add(*r)
	case partRebalance:
		w.chans[w.next].add(*r)
		w.next++
		if w.next == len(w.chans) {
			w.next = 0
		}
	default:
		w.Collect(*r)
	}
}

// collectAll is Collect for each of recs, in order (allOutput: a source's
// run of records), the edge's kind looked at once for the run.
func (w *writer[T]) collectAll(recs []Record[T]) {
	switch w.kind {
	case partKey:
		for i := range recs {
			kg := w.keyGroup(recs[i].Value)
			w.chans[w.route.Operator(kg)].addKeyed(recs[i], int32(kg))
		}
	case partForward:
		c := w.chans[0]
		for i := range recs {
			c.add(recs[i])
		}
	default:
		for i := range recs {
			w.collectRef(&recs[i])
		}
	}
}

func (w *writer[T]) EmitWatermark(ts int64) {
	for _, c := range w.chans {
		c.send(ctrlWatermark, ts)
	}
}

func (w *writer[T]) EmitIdle(idle bool) {
	k := ctrlActive
	if idle {
		k = ctrlIdle
	}
	for _, c := range w.chans {
		c.send(k, 0)
	}
}

func (w *writer[T]) flush() {
	for _, c := range w.chans {
		c.flush()
	}
}

func (w *writer[T]) barrier(id int64) {
	for _, c := range w.chans {
		if mutant.On(mutant.ChannelDropBeforeBarrier) && len(c.buf) > 0 {
			c.buf = c.buf[:len(c.buf)-1]
			if c.kgs != nil {
				c.kgs = c.kgs[:len(c.kgs)-1]
			}
		}
		c.send(ctrlBarrier, id)
	}
}

func (w *writer[T]) end() {
	for _, c := range w.chans {
		c.send(ctrlEnd, 0)
	}
}

// flusher is the untyped view of a writer that a task keeps.
type flusher interface {
	flush()
	barrier(id int64)
	end()
}

// fanout sends to several outputs (an operator with several consumers).
type fanout[T any] []Output[T]

func (f fanout[T]) Collect(r Record[T]) {
	for _, o := range f {
		o.Collect(r)
	}
}

func (f fanout[T]) EmitWatermark(ts int64) {
	for _, o := range f {
		o.EmitWatermark(ts)
	}
}

func (f fanout[T]) EmitIdle(idle bool) {
	for _, o := range f {
		o.EmitIdle(idle)
	}
}

// control is what every output shares: watermarks and idleness.
type control interface {
	EmitWatermark(ts int64)
	EmitIdle(idle bool)
}

// withSides is an operator's main output when it also has side outputs:
// records go to the main output only; watermarks and idleness go
// everywhere.
type withSides[T any] struct {
	main  Output[T]
	sides []control
}

func (w withSides[T]) Collect(r Record[T]) { w.main.Collect(r) }

func (w withSides[T]) EmitWatermark(ts int64) {
	w.main.EmitWatermark(ts)
	for _, s := range w.sides {
		s.EmitWatermark(ts)
	}
}

func (w withSides[T]) EmitIdle(idle bool) {
	w.main.EmitIdle(idle)
	for _, s := range w.sides {
		s.EmitIdle(idle)
	}
}

func outputOf[T any](outs []Output[T]) Output[T] {
	switch len(outs) {
	case 0:
		return discard[T]{}
	case 1:
		return outs[0]
	}
	return fanout[T](outs)
}
