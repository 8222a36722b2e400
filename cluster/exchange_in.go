package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// producersList is the operator-state list in which a keyed task's source
// keeps what it knows of each producer (W4).
const producersList = "cluster-producers"

// producerState is one producer's last control state, as checkpointed.
type producerState struct {
	Producer  int32 `json:"producer"`
	Watermark int64 `json:"watermark"`
	Idle      bool  `json:"idle,omitempty"`
	Ended     bool  `json:"ended,omitempty"`
	// CaughtUp: the producer's current run has caught up (W6).
	CaughtUp bool `json:"caughtUp,omitempty"`
	// IdlePos is the position in its source partition the producer went
	// idle at (W7); -1: not named (an idle record of before W7), and the
	// idleness is taken as sent.
	IdlePos int64 `json:"idlePos"`
}

// exchangeSource reads one partition of the exchange topic for a keyed
// task (W4): a Kafka source on that partition alone, read_committed, whose
// records it splits into data (emitted) and control records (applied to
// the split of their producer). Splits are producers, not the Kafka
// partition: each of the producers expected (the source topic's
// partitions) is a split of the runtime's source, so the task's watermark
// is the runtime's watermark.Combiner over them; a producer that has sent
// nothing yet holds it at Min.
type exchangeSource[T any] struct {
	src   *kafka.Source[inRec[T]]
	codec Codec[T]
	// bin decodes batches of version 2 (nil if T does not compile): it is
	// compiled whatever Job.Codec is, so that a batch written before
	// Job.Codec was set still reads.
	bin       *binCodec[T]
	producers int
	// The source topic, for W7's end offsets.
	ends sourceEnds
}

func newExchangeSource[T any](cfg Config, codec Codec[T], topic string, part int32, producers int) *exchangeSource[T] {
	deser := kafka.DeserializerFunc[inRec[T]](func(r *kgo.Record) (inRec[T], error) { return decode(codec, r) })
	src := kafka.NewSource(kafka.Options{Brokers: cfg.Brokers, Topics: []string{topic}, Partitions: []int32{part},
		ReadCommitted: true, CatchUp: kafka.CatchUpOff, Security: cfg.Security, ClientOptions: cfg.ClientOptions}, deser)
	return &exchangeSource[T]{src: src, codec: codec, bin: newBinCodec[T](), producers: producers, ends: sourceEnds{
		opts:  cfg.plainClientOptions(),
		topic: cfg.SourceTopic, committed: cfg.SourceReadCommitted}}
}

// sourceEnds lists the end offsets of the source topic's partitions as its
// source tasks read it (last stable offsets under read_committed), for a
// keyed task's check of idle producers (W7). Its client is made at the
// first check, so a task whose producers never go idle has none.
type sourceEnds struct {
	opts      []kgo.Opt
	topic     string
	committed bool
	cl        *kgo.Client
}

// list returns the end offsets of the source topic's partitions.
func (e *sourceEnds) list() (map[int32]int64, error) {
	if e.cl == nil {
		cl, err := kgo.NewClient(e.opts...)
		if err != nil {
			return nil, err
		}
		e.cl = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), endsTimeout)
	defer cancel()
	adm := kadm.NewClient(e.cl)
	var (
		l   kadm.ListedOffsets
		err error
	)
	if e.committed {
		l, err = adm.ListCommittedOffsets(ctx, e.topic)
	} else {
		l, err = adm.ListEndOffsets(ctx, e.topic)
	}
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			ends[o.Partition] = o.Offset
		}
	})
	return ends, nil
}

func (e *sourceEnds) close() {
	if e.cl != nil {
		e.cl.Close()
		e.cl = nil
	}
}

// endsTimeout bounds a check of W7; a check that fails holds the idle
// producers it was for (the safe way: event time waits).
const endsTimeout = 5 * time.Second

// Validate implements runtime.Validator.
func (s *exchangeSource[T]) Validate() error { return s.src.Validate() }

// CreateReader implements runtime.Source.
func (s *exchangeSource[T]) CreateReader(ctx runtime.SourceContext) (runtime.Reader[T], error) {
	inner, err := s.src.CreateReader(ctx)
	if err != nil {
		return nil, err
	}
	log := ctx.Logger
	if log == nil {
		log = slog.Default()
	}
	r := &exchangeReader[T]{inner: inner, codec: s.codec, bin: s.bin, state: make([]producerState, s.producers), applied: make([]bool, s.producers),
		checked: make([]int64, s.producers), ends: s.ends, log: log}
	for p := range r.state {
		r.state[p] = producerState{Producer: int32(p), Watermark: watermark.Min, IdlePos: -1}
	}
	if ctx.Restored != nil {
		items, err := ctx.Restored.List(producersList)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			st := producerState{IdlePos: -1}
			if err := json.Unmarshal(it, &st); err != nil {
				return nil, fmt.Errorf("cluster: corrupt producer state in checkpoint %d: %w", ctx.Restored.CheckpointID, err)
			}
			if st.Producer < 0 || int(st.Producer) >= s.producers {
				return nil, fmt.Errorf("cluster: checkpoint %d knows producer %d, but the source topic has %d partitions; "+
					"the source topic's partitions changed, which a clustered job does not support", ctx.Restored.CheckpointID, st.Producer, s.producers)
			}
			r.state[st.Producer] = st
		}
	}
	r.tap.r = r
	return r, nil
}

// exchangeReader is the reader of a keyed task's source.
//
// Idleness (W6): a producer's split is idle in the runtime when the
// producer says so and either it has not caught up (time-out idleness of a
// partition that still replays, as in a local job) or every producer has
// caught up (the source topic has, as a whole). A producer that caught up
// while others still replay stays active with its last watermark, holding
// the minimum as a local job's caught-up partition does until its topic
// has caught up: its partition may still get history (a loader writing),
// which must not be late. applied is what the runtime was told.
//
// An idle producer's idleness holds only while its source partition ends
// where the producer went idle (W7): checked is the poll at which that was
// last found true, and verify checks again before anything of a later poll
// may move the watermark.
type exchangeReader[T any] struct {
	inner   runtime.Reader[inRec[T]]
	codec   Codec[T]
	bin     *binCodec[T]
	keys    keyTable // the binary values' map keys, interned
	state   []producerState
	applied []bool
	checked []int64
	polls   int64
	ends    sourceEnds
	// topicCaughtUp: every producer has caught up or ended (W6).
	topicCaughtUp bool
	ended         int
	started       bool
	tap           tap[T]
	err           error
	log           *slog.Logger
}

// idleWanted is the idleness W6 gives producer p.
func (r *exchangeReader[T]) idleWanted(p int) bool {
	st := r.state[p]
	return st.Idle && (!st.CaughtUp || r.topicCaughtUp)
}

// sync tells the runtime producer p's idleness if it changed. A producer
// made active again holds the task's watermark where it stands: its split
// gets that watermark (if above its own), since an active split whose
// watermark is below the output rejoins the minimum only once it has
// caught up with it (watermark I5), and until then would hold nothing.
// Its records behind that watermark are late, as a local job's would be.
func (r *exchangeReader[T]) sync(out runtime.SourceOutput[T], p int) {
	st := &r.state[p]
	if st.Ended {
		return
	}
	want := r.idleWanted(p)
	if want == r.applied[p] {
		return
	}
	r.applied[p] = want
	out.SetSplitIdle(p, want)
	if want {
		return
	}
	if w, ok := out.(runtime.SourceWatermarker); ok {
		if cur := w.SourceWatermark(); cur > st.Watermark {
			st.Watermark = cur
			out.EmitWatermark(p, cur)
		}
	}
}

// recheck recomputes whether the source topic has caught up and, if that
// changed, every producer's idleness; otherwise producer p's.
func (r *exchangeReader[T]) recheck(out runtime.SourceOutput[T], p int) {
	all := true
	for _, st := range r.state {
		if !st.CaughtUp && !st.Ended {
			all = false
			break
		}
	}
	if all == r.topicCaughtUp {
		r.sync(out, p)
		return
	}
	r.topicCaughtUp = all
	if all {
		r.log.Info("cluster: every source task has caught up with its partition's history; caught-up producers may go idle",
			"producers", len(r.state))
	} else {
		r.log.Info("cluster: a source task started again and replays; caught-up producers hold the watermark until it has caught up",
			"producer", p)
	}
	for q := range r.state {
		r.sync(out, q)
	}
}

func (r *exchangeReader[T]) Poll(out runtime.SourceOutput[T]) (runtime.PollStatus, error) {
	if !r.started {
		r.started = true
		// Every expected producer holds the watermark from the start,
		// where the checkpoint left it (never lower: W4). All are added
		// before any watermark is applied: a producer's watermark
		// applied while later producers were not yet added would be the
		// minimum of too few, and the task's watermark, which never goes
		// back, would pass records the others still hold.
		for p := range r.state {
			out.AddSplit(p)
		}
		for p, st := range r.state {
			switch {
			case st.Ended:
				out.FinishSplit(p)
				r.ended++
				continue
			case st.Watermark > watermark.Min:
				out.EmitWatermark(p, st.Watermark)
			}
		}
		r.polls++
		r.verify(out)
		r.recheck(out, 0)
		for p := range r.state {
			r.sync(out, p)
		}
	}
	if r.ended == len(r.state) {
		return runtime.Done, nil
	}
	r.tap.out = out
	r.polls++
	st, err := r.inner.Poll(&r.tap)
	if err != nil {
		return st, err
	}
	if r.err != nil {
		return runtime.Done, r.err
	}
	if r.ended == len(r.state) {
		return runtime.Done, nil
	}
	if st == runtime.Done {
		return runtime.Done, fmt.Errorf("cluster: the exchange topic's reader ended before every producer did")
	}
	return st, nil
}

// verify checks that every producer idle at a named position still has
// nothing past it in its source partition (W7), once per poll: the
// records being applied were fetched before it, so a producer found idle
// here was idle when the other producers read what moves the watermark
// now. A producer whose partition has more (its task is down, or has not
// committed what it read since) is held: active again, at the watermark
// the task has reached (it cannot go back), until it reports anew.
func (r *exchangeReader[T]) verify(out runtime.SourceOutput[T]) {
	due := false
	for p, st := range r.state {
		if st.Idle && !st.Ended && st.IdlePos >= 0 && r.checked[p] != r.polls {
			due = true
			break
		}
	}
	if !due {
		return
	}
	ends, err := r.ends.list()
	for p := range r.state {
		st := &r.state[p]
		if !st.Idle || st.Ended || st.IdlePos < 0 || r.checked[p] == r.polls {
			continue
		}
		r.checked[p] = r.polls
		end, ok := ends[int32(p)]
		if err == nil && ok && end <= st.IdlePos {
			continue
		}
		st.Idle = false
		if err != nil || !ok {
			r.log.Warn("cluster: cannot check an idle source task's partition; it holds the watermark until it reports again",
				"producer", p, "topic", r.ends.topic, "err", err)
		} else {
			r.log.Debug("cluster: an idle source task's partition has records it has not sent (the task is down, or behind); "+
				"it holds the watermark until it reports again", "producer", p, "topic", r.ends.topic, "idleAt", st.IdlePos, "end", end)
		}
		r.sync(out, p)
	}
}

func (r *exchangeReader[T]) Ready() <-chan struct{} { return r.inner.Ready() }

func (r *exchangeReader[T]) Close() error {
	r.ends.close()
	return r.inner.Close()
}

// SnapshotState implements runtime.Snapshotter: the inner reader's
// position, and every producer's state.
func (r *exchangeReader[T]) SnapshotState(w *runtime.SnapshotWriter) error {
	if s, ok := r.inner.(runtime.Snapshotter); ok {
		if err := s.SnapshotState(w); err != nil {
			return err
		}
	}
	items := make([][]byte, 0, len(r.state))
	for _, st := range r.state {
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		items = append(items, b)
	}
	w.List(producersList, checkpoint.Union, items)
	return nil
}

// SnapshotSplits implements runtime.SplitSnapshotter.
func (r *exchangeReader[T]) SnapshotSplits(id int64) ([][]byte, error) {
	if s, ok := r.inner.(runtime.SplitSnapshotter); ok {
		return s.SnapshotSplits(id)
	}
	return nil, nil
}

// NotifyCheckpointComplete implements runtime.CheckpointListener.
func (r *exchangeReader[T]) NotifyCheckpointComplete(id int64) error {
	if l, ok := r.inner.(runtime.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

// NotifyCheckpointAborted implements runtime.CheckpointListener.
func (r *exchangeReader[T]) NotifyCheckpointAborted(id int64) {
	if l, ok := r.inner.(runtime.CheckpointListener); ok {
		l.NotifyCheckpointAborted(id)
	}
}

// tap is the SourceOutput the inner Kafka reader writes to: it turns
// exchange records into records and split events of the producers. The
// inner reader's own split (the one exchange partition) is not shown to
// the runtime.
type tap[T any] struct {
	r   *exchangeReader[T]
	out runtime.SourceOutput[T]
}

func (t *tap[T]) Collect(_ int, v inRec[T], ts int64) {
	r := t.r
	if v.producer < 0 || int(v.producer) >= len(r.state) {
		r.fail(fmt.Errorf("cluster: exchange record of producer %d, but the source topic has %d partitions", v.producer, len(r.state)))
		return
	}
	p := int(v.producer)
	st := &r.state[p]
	if st.Ended {
		if v.kind == kindData || v.kind == kindBatch {
			r.fail(fmt.Errorf("cluster: data from producer %d after its end of input", p))
		}
		// A restored source task may end again: its end records repeat.
		return
	}
	switch v.kind {
	case kindData:
		t.out.Collect(p, v.v, ts)
	case kindBatch:
		t.batch(p, v.ver, v.batch)
	case kindWatermark:
		if v.wm > st.Watermark {
			r.verify(t.out)
			st.Watermark = v.wm
			t.out.EmitWatermark(p, v.wm)
		}
	case kindIdle:
		st.Idle, st.IdlePos = true, v.pos
		r.checked[p] = 0
		r.verify(t.out)
		r.sync(t.out, p)
	case kindActive:
		st.Idle = false
		r.sync(t.out, p)
	case kindCaughtUp:
		st.CaughtUp = true
		r.verify(t.out)
		r.recheck(t.out, p)
	case kindBehind:
		st.CaughtUp, st.Idle = false, false
		r.recheck(t.out, p)
	case kindEnd:
		st.Ended = true
		r.ended++
		r.verify(t.out)
		t.out.FinishSplit(p)
		r.recheck(t.out, p)
	}
}

// batch emits the values of a batch record of producer p, in order, each
// at its own timestamp. A value that does not decode is a dead letter, as
// a data record that does not decode is; a batch whose framing is broken
// fails the task (it was not written by this package).
func (t *tap[T]) batch(p int, ver byte, b []byte) {
	bin := t.r.bin
	if ver == batchVersionBinary && bin == nil {
		t.r.fail(fmt.Errorf("cluster: a batch of binary-encoded values (version %d) of a type (%T) this build's binary codec does not encode; has the job's type changed?", ver, *new(T)))
		return
	}
	var prev int64
	for len(b) > 0 {
		ts, enc, rest, err := nextBatchValue(b, prev)
		if err != nil {
			t.r.fail(err)
			return
		}
		b, prev = rest, ts
		var v T
		if ver == batchVersionBinary {
			v, err = bin.decodeWith(enc, &t.r.keys)
		} else {
			v, err = t.r.codec.Decode(enc)
		}
		if err != nil {
			t.out.DeadLetter(runtime.DeadLetter{Source: "exchange-in", Split: p, Position: -1, Raw: enc,
				Reason: fmt.Sprintf("cluster: decode exchange record: %v", err)})
			continue
		}
		t.out.Collect(p, v, ts)
	}
}

func (r *exchangeReader[T]) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (t *tap[T]) AddSplit(int)                    {}
func (t *tap[T]) FinishSplit(int)                 {}
func (t *tap[T]) SetSplitIdle(int, bool)          {}
func (t *tap[T]) EmitWatermark(int, int64)        {}
func (t *tap[T]) DeadLetter(d runtime.DeadLetter) { t.out.DeadLetter(d) }
