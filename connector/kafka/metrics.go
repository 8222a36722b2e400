package kafka

import (
	"strconv"

	"github.com/weirproject/weir/runtime"
)

// Catch-up metrics (K15). The names are runtime metric names; the
// Prometheus adapter (package metrics) turns them into weir_snake_case with
// the labels operator and subtask, followed by topic (and partition).
//
// Invariants:
//   - partition gauges are created by the reader that owns the partition,
//     when it is created, and only ever written by that reader's subtask
//     goroutine (position, end) or by markCaughtUp (caught-up), which that
//     goroutine calls;
//   - topic gauges are created by exactly one reader per topic (the owner of
//     the topic's lowest partition), at its first Poll, when every reader of
//     the run has registered; they are written under tracker.mu, so the
//     creation (which publishes the state so far) and markCaughtUp cannot
//     interleave badly.
const (
	// MetricPartitionEndOffset is the end offset snapshotted at start
	// (the last stable offset under read_committed); -1 until taken.
	MetricPartitionEndOffset = "kafkaPartitionEndOffset"
	// MetricPartitionStartOffset is the offset the run started reading the
	// partition at (the restored or resolved start offset); -1 until
	// resolved. With the position and the end offset it tells how much of
	// the catch-up is done.
	MetricPartitionStartOffset = "kafkaPartitionStartOffset"
	// MetricPartitionPosition is the consumer position: the next offset
	// the source will emit, all records before it emitted; -1 until the
	// start offset is resolved. It is updated once per fetched batch.
	MetricPartitionPosition = "kafkaPartitionPosition"
	// MetricPartitionLag is how far the source is behind the partition's
	// log: the log end the latest fetch reported (the high watermark, or
	// the last stable offset under read_committed) minus the position, in
	// offsets (transaction markers count as one each); -1 until both are
	// known. It is live, unlike the end-offset snapshot, and is what an
	// autoscaler reads (docs/deploy.md, "Autoscaling"): the total is
	// sum(weir_kafka_partition_lag) in Prometheus. Updated once per
	// fetched batch, as the position is.
	MetricPartitionLag = "kafkaPartitionLag"
	// MetricPartitionCaughtUp is 1 once the position has reached the end
	// offset snapshot (or started at or past it), else 0. Partitions
	// discovered after the start (K13) are 1 from birth.
	MetricPartitionCaughtUp = "kafkaPartitionCaughtUp"
	// MetricPartitionCatchUpMillis is how long the partition took to
	// catch up, measured as MetricTopicCatchUpMillis is (from the run's
	// first reader start); -1 until then, and for partitions discovered
	// after the start.
	MetricPartitionCatchUpMillis = "kafkaPartitionCatchUpMillis"
	// MetricTopicCaughtUp is 1 once every partition of the topic, across
	// all subtasks, has caught up, else 0.
	MetricTopicCaughtUp = "kafkaTopicCaughtUp"
	// MetricTopicCatchUpMillis is how long the topic took to catch up, in
	// milliseconds of the job's clock from the first Poll of the run's
	// first reader (the earliest reader start) to the catch-up of the
	// topic's last partition; -1 until then.
	MetricTopicCatchUpMillis = "kafkaTopicCatchUpMillis"
)

// gaugeSet sets g if it exists (readers built outside a job have no
// metrics).
func gaugeSet(g *runtime.Gauge, v int64) {
	if g != nil {
		g.Set(v)
	}
}

func boolValue(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// partGauges are one partition's catch-up gauges.
type partGauges struct {
	start, end, position, lag, caughtUp, millis *runtime.Gauge
}

func newPartGauges(ctx runtime.SourceContext, topic string, partition int32) partGauges {
	if ctx.LabeledGauge == nil {
		return partGauges{}
	}
	ls := []runtime.Label{{Name: "topic", Value: topic}, {Name: "partition", Value: strconv.Itoa(int(partition))}}
	g := partGauges{start: ctx.LabeledGauge(MetricPartitionStartOffset, ls...),
		end:      ctx.LabeledGauge(MetricPartitionEndOffset, ls...),
		position: ctx.LabeledGauge(MetricPartitionPosition, ls...),
		lag:      ctx.LabeledGauge(MetricPartitionLag, ls...),
		caughtUp: ctx.LabeledGauge(MetricPartitionCaughtUp, ls...),
		millis:   ctx.LabeledGauge(MetricPartitionCatchUpMillis, ls...)}
	g.start.Set(-1)
	g.millis.Set(-1)
	g.end.Set(-1)
	g.position.Set(-1)
	g.lag.Set(-1)
	g.caughtUp.Set(0)
	return g
}

// topicGauges are one topic's catch-up gauges.
type topicGauges struct {
	caughtUp, millis *runtime.Gauge
}

// publishTopicGauges creates, for every topic whose lowest partition this
// reader owns, the topic's gauges and sets them from the state so far.
func (t *tracker) publishTopicGauges(ctx runtime.SourceContext, splits []*split) {
	if ctx.LabeledGauge == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range splits {
		tt := s.track.topic
		if s.track.born || tt.gauges.caughtUp != nil || tt.parts[s.partition] != s.track || s.partition != tt.lowest() {
			continue
		}
		l := runtime.Label{Name: "topic", Value: tt.name}
		tt.gauges = topicGauges{caughtUp: ctx.LabeledGauge(MetricTopicCaughtUp, l),
			millis: ctx.LabeledGauge(MetricTopicCatchUpMillis, l)}
		t.setTopicGaugesLocked(tt)
	}
}

// setTopicGaugesLocked publishes tt's state; t.mu is held.
func (t *tracker) setTopicGaugesLocked(tt *topicTrack) {
	if tt.gauges.caughtUp == nil {
		return
	}
	ms := int64(-1)
	if tt.caughtUp.Load() {
		ms = max(tt.at.Sub(t.started).Milliseconds(), 0)
	}
	tt.gauges.caughtUp.Set(boolValue(tt.caughtUp.Load()))
	tt.gauges.millis.Set(ms)
}

// lowest returns the lowest partition number of the topic's plan.
func (tt *topicTrack) lowest() int32 {
	low := int32(-1)
	for p := range tt.parts {
		if low < 0 || p < low {
			low = p
		}
	}
	return low
}
