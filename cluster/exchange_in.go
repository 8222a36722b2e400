package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"

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
	src       *kafka.Source[inRec[T]]
	producers int
}

func newExchangeSource[T any](cfg Config, codec Codec[T], topic string, part int32, producers int) *exchangeSource[T] {
	deser := kafka.DeserializerFunc[inRec[T]](func(r *kgo.Record) (inRec[T], error) { return decode(codec, r) })
	src := kafka.NewSource(kafka.Options{Brokers: cfg.Brokers, Topics: []string{topic}, Partitions: []int32{part},
		ReadCommitted: true, CatchUp: kafka.CatchUpOff, Security: cfg.Security, ClientOptions: cfg.ClientOptions}, deser)
	return &exchangeSource[T]{src: src, producers: producers}
}

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
	r := &exchangeReader[T]{inner: inner, state: make([]producerState, s.producers), applied: make([]bool, s.producers), log: log}
	for p := range r.state {
		r.state[p] = producerState{Producer: int32(p), Watermark: watermark.Min}
	}
	if ctx.Restored != nil {
		items, err := ctx.Restored.List(producersList)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var st producerState
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
type exchangeReader[T any] struct {
	inner   runtime.Reader[inRec[T]]
	state   []producerState
	applied []bool
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

// sync tells the runtime producer p's idleness if it changed.
func (r *exchangeReader[T]) sync(out runtime.SourceOutput[T], p int) {
	if r.state[p].Ended {
		return
	}
	if want := r.idleWanted(p); want != r.applied[p] {
		r.applied[p] = want
		out.SetSplitIdle(p, want)
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
		r.recheck(out, 0)
		for p := range r.state {
			r.sync(out, p)
		}
	}
	if r.ended == len(r.state) {
		return runtime.Done, nil
	}
	r.tap.out = out
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

func (r *exchangeReader[T]) Ready() <-chan struct{} { return r.inner.Ready() }
func (r *exchangeReader[T]) Close() error           { return r.inner.Close() }

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
		if v.kind == kindData {
			r.fail(fmt.Errorf("cluster: data from producer %d after its end of input", p))
		}
		// A restored source task may end again: its end records repeat.
		return
	}
	switch v.kind {
	case kindData:
		t.out.Collect(p, v.v, ts)
	case kindWatermark:
		if v.wm > st.Watermark {
			st.Watermark = v.wm
			t.out.EmitWatermark(p, v.wm)
		}
	case kindIdle:
		st.Idle = true
		r.sync(t.out, p)
	case kindActive:
		st.Idle = false
		r.sync(t.out, p)
	case kindCaughtUp:
		st.CaughtUp = true
		r.recheck(t.out, p)
	case kindBehind:
		st.CaughtUp, st.Idle = false, false
		r.recheck(t.out, p)
	case kindEnd:
		st.Ended = true
		r.ended++
		t.out.FinishSplit(p)
		r.recheck(t.out, p)
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
