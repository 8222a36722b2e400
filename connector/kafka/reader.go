package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/runtime"
)

// split is one assigned partition as the reader (on the subtask goroutine)
// sees it.
type split struct {
	id        int
	topic     string
	topicID   [16]byte
	partition int32
	// initial is the restored offset (>= 0), offsetUnresolved (use
	// Options.Start) or offsetEarliest.
	initial int64
	// pos is the next offset to emit (-1 until the start is resolved);
	// end the end-offset snapshot (-1 until taken).
	pos, end int64
	// idled: the split was marked idle because its topic caught up;
	// idle: that marking is still in force (LiveRejoin clears it at the
	// split's first live record).
	idled, idle bool
	track       *partTrack
}

// fetchMsg is what the reader's goroutines hand to Poll, in order per
// partition.
type fetchMsg struct {
	// init carries the resolved start offsets and end-offset snapshots.
	init []splitInit
	// split, records and next: a fetched batch of one partition; next is
	// the consumer position after it (past control records and gaps).
	split   int
	records []*kgo.Record
	next    int64
	// reset: the position jumped to next because the broker did not have
	// the offset asked for.
	reset bool
	from  int64
	// discovered announces a partition found after the start (K13),
	// before any batch of it.
	discovered *discovered
}

type discovered struct {
	split     int
	topic     string
	topicID   [16]byte
	partition int32
}

type splitInit struct {
	split      int
	start, end int64
}

// reader reads the splits of one source subtask. Poll, Ready, the
// snapshot methods and the checkpoint listener run on the subtask
// goroutine; the fetch goroutines talk to it through msgs and ready.
type reader[T any] struct {
	src   *Source[T]
	opts  Options
	deser Deserializer[T]
	ctx   runtime.SourceContext
	log   *slog.Logger
	run   *run

	splits  []*split
	started bool
	// decoded is the run of decoded records of one split not yet sent
	// (emit, flush): it never outlives a fetch's records in a Poll.
	decoded []runtime.Record[T]
	runCap  int // decoded's most records (runtime.RunRecords)
	msgs    chan fetchMsg
	ready   chan struct{}
	// slabs is the reader's record slabs (pool.go); pools holds it, the
	// Pools option of its fetches.
	slabs  *slabPool
	pools  []kgo.Pool
	cur    fetchMsg
	hasCur bool
	curIdx int

	idleDirty atomic.Bool

	cl     *kgo.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	errMu sync.Mutex
	err   error

	pending  []pendingCommit
	commitCh chan kadm.Offsets

	// Options.Stop (K14): stopAsked once Poll has seen Stop closed;
	// stopEnds, per split id, the end offsets listed after that (nil until
	// they arrive on stopCh).
	stopAsked bool
	stopEnds  map[int]int64
	stopCh    chan map[topicPartition]int64
}

type pendingCommit struct {
	id      int64
	offsets kadm.Offsets
}

func newReader[T any](s *Source[T], ctx runtime.SourceContext, r *run) *reader[T] {
	log := ctx.Logger
	if log == nil {
		log = slog.Default()
	}
	slabs := &slabPool{}
	return &reader[T]{src: s, opts: s.opts, deser: forReader(s.deser), ctx: ctx, log: log, run: r, runCap: runtime.RunRecords[T](),
		msgs: make(chan fetchMsg, s.opts.BufferedFetches), ready: make(chan struct{}, 1), slabs: slabs, pools: []kgo.Pool{slabs}}
}

// topicCaughtUp implements waker; any goroutine may call it.
func (r *reader[T]) topicCaughtUp() {
	r.idleDirty.Store(true)
	r.wake()
}

func (r *reader[T]) wake() {
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

func (r *reader[T]) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
	r.wake()
}

func (r *reader[T]) failure() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// start announces the splits and starts the fetch goroutines: on the first
// Poll, so that a job that fails while being built leaves nothing running.
func (r *reader[T]) start(out runtime.SourceOutput[T]) error {
	r.started = true
	for _, s := range r.splits {
		out.AddSplit(s.id)
	}
	r.run.tracker.readerStarted()
	r.run.tracker.publishTopicGauges(r.ctx, r.splits)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if stop := r.opts.Stop; stop != nil {
		r.stopCh = make(chan map[topicPartition]int64, 1)
		r.wg.Add(1)
		go func() { // wake Poll when Stop closes
			defer r.wg.Done()
			select {
			case <-stop:
				r.wake()
			case <-ctx.Done():
			}
		}()
	}
	if len(r.splits) == 0 && r.opts.DiscoveryInterval <= 0 {
		return nil // nothing to read, ever
	}
	cl, err := r.src.newClient()
	if err != nil {
		return err
	}
	r.cl = cl
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.fetchMain(ctx); err != nil && ctx.Err() == nil {
			r.fail(err)
		}
	}()
	if r.opts.Group != "" {
		r.commitCh = make(chan kadm.Offsets, 1)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.commitLoop(ctx)
		}()
	}
	return nil
}

// Poll implements runtime.Reader: it emits what the fetchers have handed
// over, at most RecordsPerPoll records, and never blocks.
func (r *reader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if !r.started {
		if err := r.start(out); err != nil {
			return runtime.Wait, err
		}
	}
	if err := r.failure(); err != nil {
		return runtime.Wait, err
	}
	if r.idleDirty.Swap(false) {
		r.applyTopicIdle(out)
	}
	if r.opts.Stop != nil {
		if st, done := r.pollStop(); done {
			return runtime.Done, nil
		} else if st {
			// Stop is closed and its end offsets are not known yet:
			// emit nothing that might lie beyond them.
			return runtime.Wait, nil
		}
	}
	n := 0
	for n < r.opts.RecordsPerPoll {
		if !r.hasCur {
			select {
			case m := <-r.msgs:
				r.cur, r.hasCur, r.curIdx = m, true, 0
			default:
			}
			if !r.hasCur {
				break
			}
		}
		m := &r.cur
		if m.init != nil {
			r.applyInit(m.init)
			r.hasCur, r.cur = false, fetchMsg{}
			continue
		}
		if m.discovered != nil {
			r.addDiscovered(m.discovered, out)
			r.hasCur, r.cur = false, fetchMsg{}
			continue
		}
		s := r.splits[m.split]
		if r.stopEnds != nil {
			if r.stopSplit(s, m) {
				r.hasCur, r.cur = false, fetchMsg{}
				continue
			}
		}
		for r.curIdx < len(m.records) && n < r.opts.RecordsPerPoll {
			rec := m.records[r.curIdx]
			r.curIdx++
			n++
			err := r.emit(s, rec, out)
			rec.Recycle() // its slab goes back to the pool (pool.go)
			if err != nil {
				r.flush(s, out)
				return runtime.Wait, err
			}
		}
		r.flush(s, out)
		if r.curIdx < len(m.records) {
			break
		}
		if m.reset {
			s.track.resets.Add(1)
			r.log.Warn("kafka partition position reset: the broker no longer has (or never had) the offset asked for",
				"topic", s.topic, "partition", s.partition, "from", m.from, "to", m.next)
			s.pos = m.next
		} else if m.next > s.pos {
			s.pos = m.next
		}
		s.track.setPosition(s.pos)
		r.checkCaughtUp(s)
		r.hasCur, r.cur = false, fetchMsg{}
	}
	if r.idleDirty.Swap(false) {
		r.applyTopicIdle(out)
	}
	if r.stopEnds != nil {
		if _, done := r.pollStop(); done {
			return runtime.Done, nil
		}
	}
	if r.hasCur || len(r.msgs) > 0 {
		return runtime.More, nil
	}
	return runtime.Wait, nil
}

// emit decodes rec into the run of records of split s (r.decoded), which
// flush sends; what must not overtake the records before it (a dead
// letter, the split's return from idleness) flushes the run first.
func (r *reader[T]) emit(s *split, rec *kgo.Record, out runtime.SourceOutput[T]) error {
	s.pos = rec.Offset + 1
	v, err := r.deser.Deserialize(rec)
	if err != nil {
		if errors.Is(err, ErrFailJob) {
			return fmt.Errorf("kafka topic %s partition %d offset %d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
		r.flush(s, out)
		out.DeadLetter(runtime.DeadLetter{Split: int(rec.Partition), Position: rec.Offset, Raw: rec.Value,
			Reason: fmt.Sprintf("kafka topic %s partition %d offset %d does not deserialize: %v", rec.Topic, rec.Partition, rec.Offset, err)})
		return nil
	}
	if s.idle && r.opts.Live == LiveRejoin {
		// The first live record of a caught-up split: its own
		// watermarks drive it from now on.
		r.flush(s, out)
		s.idle = false
		out.SetSplitIdle(s.id, false)
	}
	r.decoded = append(r.decoded, runtime.Record[T]{Value: v, Timestamp: rec.Timestamp.UnixMilli()})
	if len(r.decoded) >= r.runCap {
		r.flush(s, out)
	}
	return nil
}

// flush sends the decoded records of split s waiting in r.decoded, in one
// call where the runtime takes runs of records (runtime.SourceBatchOutput:
// it then passes them downstream as a run where the watermark strategy
// allows), else one by one. It keeps r.decoded's memory, not its values
// (which may point into a fetch's bytes).
func (r *reader[T]) flush(s *split, out runtime.SourceOutput[T]) {
	if len(r.decoded) == 0 {
		return
	}
	runtime.CollectRun(out, s.id, r.decoded)
	clear(r.decoded)
	r.decoded = r.decoded[:0]
}

func (r *reader[T]) applyInit(inits []splitInit) {
	for _, in := range inits {
		s := r.splits[in.split]
		s.pos, s.end = in.start, in.end
		s.track.setStart(in.start, in.end)
		r.checkCaughtUp(s)
	}
}

// addDiscovered adds a partition found after the start: live from birth
// (K13). It takes no part in its topic's catch-up, and under
// CatchUpEndOffsets it starts idle, as caught-up splits are.
func (r *reader[T]) addDiscovered(d *discovered, out runtime.SourceOutput[T]) {
	s := &split{id: d.split, topic: d.topic, topicID: d.topicID, partition: d.partition, initial: 0, pos: 0, end: -1}
	if s.id != len(r.splits) {
		r.fail(fmt.Errorf("kafka: internal error: discovered split %d, expected %d", s.id, len(r.splits)))
		return
	}
	s.track = r.run.tracker.registerBorn(d.topic, d.partition, r.ctx.Subtask)
	s.track.gauges = newPartGauges(r.ctx, d.topic, d.partition)
	gaugeSet(s.track.gauges.position, 0)
	gaugeSet(s.track.gauges.caughtUp, 1)
	r.splits = append(r.splits, s)
	out.AddSplit(s.id)
	r.log.Info("kafka partition discovered after the start: read from its beginning, live from birth",
		"topic", d.topic, "partition", d.partition)
	if r.opts.CatchUp == CatchUpEndOffsets {
		s.idled, s.idle = true, true
		out.SetSplitIdle(s.id, true)
	}
}

// checkCaughtUp applies the end-offset rule (K5, caughtUpAt): the consumer
// position, not the last record's offset, against the snapshot and the log
// end of the latest fetch. It is tracked (and reported by Status) under
// every policy; only CatchUpEndOffsets acts on it.
//
// The log end is the fetch goroutines' latest, not that of the batch just
// emitted: batches queued in msgs behind this one are a backlog too. Each
// fetch stores its log end before handing its batch over, and a fetch
// that moves the log end hands a message over even without records, so a
// position below the log end read here is always followed by another
// message of the split, which checks again.
//
// Until the topic has caught up, a caught-up split whose latest fetch shows
// a backlog is behind again (tracker's state diagram); the topic needs every
// partition caught up at once.
//
// The state is the tracker's (partTrack.caughtUp), not a copy: the reader
// that completes a topic may find this partition behind (tracker.markCaughtUp)
// and withdraw its catch-up, which this reader then makes again.
func (r *reader[T]) checkCaughtUp(s *split) {
	if s.track.topic.caughtUp.Load() {
		return // final (K8: later records are live)
	}
	now := caughtUpAt(s.pos, s.end, s.track.logEnd.Load())
	switch was := s.track.caughtUp.Load(); {
	case now && !was:
		r.run.tracker.markCaughtUp(s.track, r.log)
	case !now && was:
		r.run.tracker.markBehind(s.track)
	}
}

// applyTopicIdle marks idle, once, the splits of topics that have caught
// up (K6).
func (r *reader[T]) applyTopicIdle(out runtime.SourceOutput[T]) {
	if r.opts.CatchUp != CatchUpEndOffsets {
		return
	}
	for _, s := range r.splits {
		if !s.idled && s.track.topic.caughtUp.Load() {
			s.idled, s.idle = true, true
			out.SetSplitIdle(s.id, true)
		}
	}
}

// pollStop handles Options.Stop (K14) on the subtask goroutine: wait
// reports that Stop is closed and its end offsets are not known yet; done
// that every split has reached them.
func (r *reader[T]) pollStop() (wait, done bool) {
	if !r.stopAsked {
		select {
		case <-r.opts.Stop:
		default:
			return false, false
		}
		r.stopAsked = true
		r.requestStopEnds()
	}
	if r.stopEnds == nil {
		select {
		case ends := <-r.stopCh:
			r.stopEnds = make(map[int]int64, len(r.splits))
			for _, s := range r.splits {
				r.stopEnds[s.id] = ends[topicPartition{s.topic, s.partition}]
			}
			r.log.Info("kafka source stopping: reading up to the end offsets listed after Stop", "partitions", len(r.splits))
		default:
			return true, false
		}
	}
	for _, s := range r.splits {
		end, ok := r.stopEnds[s.id]
		if !ok { // discovered after the listing: not read any more
			continue
		}
		if s.pos < 0 || s.pos < end {
			return false, false
		}
	}
	return false, true
}

// stopSplit cuts the batch m of split s at its stop offset: records at or
// past it are dropped (never emitted). It reports whether nothing of m is
// left to emit. A batch's offsets ascend, so its last record tells whether
// anything is to be cut, and the cut is found by binary search: Poll calls
// this again for the rest of a batch it emits over several polls, and a
// scan of that rest on each call made bounded reads quadratic in the batch.
func (r *reader[T]) stopSplit(s *split, m *fetchMsg) bool {
	end, ok := r.stopEnds[s.id]
	if !ok {
		return true
	}
	if n := len(m.records); n > r.curIdx && m.records[n-1].Offset >= end {
		rest := m.records[r.curIdx:]
		m.records = m.records[:r.curIdx+sort.Search(len(rest), func(i int) bool { return rest[i].Offset >= end })]
		m.reset = false
	}
	if m.next > end {
		m.next = end
	}
	return false
}

// requestStopEnds lists, from another goroutine, the end offsets of the
// splits' topics and hands them to Poll through stopCh.
func (r *reader[T]) requestStopEnds() {
	if len(r.splits) == 0 || r.cl == nil {
		r.stopCh <- map[topicPartition]int64{}
		return
	}
	var topics []string
	seen := map[string]bool{}
	for _, s := range r.splits {
		if !seen[s.topic] {
			seen[s.topic] = true
			topics = append(topics, s.topic)
		}
	}
	cl := r.cl
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.RequestTimeout)
		defer cancel()
		for attempt := 1; ; attempt++ {
			var l kadm.ListedOffsets
			var err error
			if r.opts.ReadCommitted {
				l, err = adm.ListCommittedOffsets(ctx, topics...)
			} else {
				l, err = adm.ListEndOffsets(ctx, topics...)
			}
			if err == nil {
				err = l.Error()
			}
			if err == nil {
				ends := map[topicPartition]int64{}
				l.Each(func(o kadm.ListedOffset) { ends[topicPartition{o.Topic, o.Partition}] = o.Offset })
				r.stopCh <- ends
				r.wake()
				return
			}
			cl.ForceMetadataRefresh()
			if !sleepCtx(ctx, retryDelay(attempt)) {
				r.fail(fmt.Errorf("kafka: list end offsets of %v for Options.Stop: %w", topics, err))
				return
			}
		}
	}()
}

// Ready implements runtime.Reader.
func (r *reader[T]) Ready() <-chan struct{} { return r.ready }

// Close implements runtime.Reader: it stops the fetchers and the client.
func (r *reader[T]) Close() error {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	if r.cl != nil {
		r.cl.Close()
		r.cl = nil
	}
	r.slabs.release()
	return nil
}

// states returns every split's position.
func (r *reader[T]) states() ([][]byte, kadm.Offsets, error) {
	items := make([][]byte, 0, len(r.splits))
	var offs kadm.Offsets
	for _, s := range r.splits {
		off := s.pos
		if off < 0 {
			off = s.initial
		} else if mutant.On(mutant.KafkaSnapshotOnePast) {
			off++
		}
		b, err := json.Marshal(splitState{Topic: s.topic, Partition: s.partition, Offset: off})
		if err != nil {
			return nil, nil, err
		}
		items = append(items, b)
		if off >= 0 && r.opts.Group != "" {
			offs.AddOffset(s.topic, s.partition, off, -1)
		}
	}
	return items, offs, nil
}

// SnapshotState implements runtime.Snapshotter: every split's position in
// a union list, so that a restore at any parallelism finds all of them.
func (r *reader[T]) SnapshotState(w *runtime.SnapshotWriter) error {
	items, offs, err := r.states()
	if err != nil {
		return err
	}
	w.List(unionList, checkpoint.Union, items)
	if r.opts.Group != "" {
		r.pending = append(r.pending, pendingCommit{id: w.CheckpointID(), offsets: offs})
	}
	return nil
}

// SnapshotSplits implements runtime.SplitSnapshotter.
func (r *reader[T]) SnapshotSplits(int64) ([][]byte, error) {
	items, _, err := r.states()
	return items, err
}

// NotifyCheckpointComplete implements runtime.CheckpointListener: the
// offsets of checkpoint id are committed to Options.Group, from another
// goroutine (K10).
func (r *reader[T]) NotifyCheckpointComplete(id int64) error {
	var latest *pendingCommit
	n := 0
	for i := range r.pending {
		if r.pending[i].id > id {
			break
		}
		latest = &r.pending[i]
		n = i + 1
	}
	if latest == nil || r.commitCh == nil {
		r.pending = r.pending[n:]
		return nil
	}
	offs := latest.offsets
	r.pending = r.pending[n:]
	// Latest wins: replace a commit still waiting.
	select {
	case <-r.commitCh:
	default:
	}
	r.commitCh <- offs
	return nil
}

// NotifyCheckpointAborted implements runtime.CheckpointListener.
func (r *reader[T]) NotifyCheckpointAborted(id int64) {
	for i, p := range r.pending {
		if p.id == id {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			return
		}
	}
}

func (r *reader[T]) commitLoop(ctx context.Context) {
	adm := kadm.NewClient(r.cl)
	for {
		select {
		case <-ctx.Done():
			return
		case offs := <-r.commitCh:
			cctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
			err := adm.CommitAllOffsets(cctx, r.opts.Group, offs)
			cancel()
			if err != nil && ctx.Err() == nil {
				// Commits are for monitoring only; the job restores from
				// its checkpoints.
				r.log.Warn("kafka offset commit failed (monitoring only: positions are in the checkpoint)",
					"group", r.opts.Group, "err", err)
			}
		}
	}
}
