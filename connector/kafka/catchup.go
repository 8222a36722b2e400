package kafka

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// tracker is the catch-up state of one run of a Source, shared by the
// readers of that run (all subtasks of a job live in one process). Readers
// register every partition they own when they are created, before any of
// them reads, so a topic can never look caught up while one of its
// partitions is still unregistered. A topic is caught up when every one of
// its partitions is: then every reader owning a partition of it is woken to
// mark its splits idle (K6).
type tracker struct {
	// idles: the policy marks caught-up topics idle (for the log line).
	idles  bool
	mu     sync.Mutex
	now    func() time.Time
	topics map[string]*topicTrack
	// started is when the run's first reader started (its first Poll):
	// the origin of MetricTopicCatchUpMillis.
	started time.Time
}

type topicTrack struct {
	name     string
	total    int // partitions of the topic in the run's plan
	parts    map[int32]*partTrack
	born     map[int32]*partTrack // discovered after the start (K13)
	done     int                  // parts caught up
	caughtUp atomic.Bool
	at       time.Time
	gauges   topicGauges // zero unless a reader publishes them (metrics.go)
}

// partTrack is one partition's catch-up record. start and end are set once
// (by the reader's start-up), position as the reader emits.
type partTrack struct {
	topic     *topicTrack
	partition int32
	subtask   int
	owner     waker

	start, end atomic.Int64 // -1 until known
	position   atomic.Int64 // next offset the reader will emit; -1 until known
	caughtUp   atomic.Bool
	resets     atomic.Int64
	born       bool
	gauges     partGauges
}

// setPosition records the partition's consumer position.
func (p *partTrack) setPosition(pos int64) {
	p.position.Store(pos)
	gaugeSet(p.gauges.position, pos)
}

// setStart records the resolved start offset and the end-offset snapshot.
func (p *partTrack) setStart(start, end int64) {
	p.start.Store(start)
	p.end.Store(end)
	gaugeSet(p.gauges.start, start)
	gaugeSet(p.gauges.end, end)
	p.setPosition(start)
}

// readerStarted records the first reader start of the run.
func (t *tracker) readerStarted() {
	t.mu.Lock()
	if t.started.IsZero() {
		t.started = t.now()
	}
	t.mu.Unlock()
}

// waker is told when a topic it owns partitions of has caught up.
type waker interface{ topicCaughtUp() }

func newTracker(now func() time.Time, idles bool) *tracker {
	return &tracker{now: now, idles: idles, topics: map[string]*topicTrack{}}
}

// register records that subtask (through owner) reads partition of topic,
// a topic with total partitions.
func (t *tracker) register(topic string, total int, partition int32, subtask int, owner waker) *partTrack {
	t.mu.Lock()
	defer t.mu.Unlock()
	tt := t.topics[topic]
	if tt == nil {
		tt = &topicTrack{name: topic, parts: map[int32]*partTrack{}}
		t.topics[topic] = tt
	}
	tt.total = max(tt.total, total)
	p := &partTrack{topic: tt, partition: partition, subtask: subtask, owner: owner}
	p.start.Store(-1)
	p.end.Store(-1)
	p.position.Store(-1)
	if old := tt.parts[partition]; old != nil && old.caughtUp.Load() {
		tt.done--
		tt.caughtUp.Store(false)
	}
	tt.parts[partition] = p
	return p
}

// registerBorn records a partition discovered after the start: it is
// reported by status but takes no part in its topic's catch-up.
func (t *tracker) registerBorn(topic string, partition int32, subtask int) *partTrack {
	t.mu.Lock()
	defer t.mu.Unlock()
	tt := t.topics[topic]
	if tt == nil {
		tt = &topicTrack{name: topic, parts: map[int32]*partTrack{}}
		t.topics[topic] = tt
	}
	if tt.born == nil {
		tt.born = map[int32]*partTrack{}
	}
	p := &partTrack{topic: tt, partition: partition, subtask: subtask, born: true}
	p.start.Store(0)
	p.end.Store(-1)
	p.position.Store(0)
	p.caughtUp.Store(true)
	tt.born[partition] = p
	return p
}

// markCaughtUp records that p's position reached its end offset snapshot.
// It logs the partition, and the topic when this was its last partition
// (on log, the logger of the reader that saw it), and wakes the topic's
// readers then.
func (t *tracker) markCaughtUp(p *partTrack, log *slog.Logger) {
	if p.caughtUp.Swap(true) {
		return
	}
	gaugeSet(p.gauges.caughtUp, 1)
	log.Info("kafka partition caught up with its end offset",
		"topic", p.topic.name, "partition", p.partition,
		"start", p.start.Load(), "end", p.end.Load(), "position", p.position.Load())
	t.mu.Lock()
	if !t.started.IsZero() {
		gaugeSet(p.gauges.millis, max(t.now().Sub(t.started).Milliseconds(), 0))
	}
	tt := p.topic
	if tt.parts[p.partition] != p { // replaced by a newer run's reader
		t.mu.Unlock()
		return
	}
	tt.done++
	complete := !tt.caughtUp.Load() && tt.done == tt.total && len(tt.parts) == tt.total
	var owners []waker
	if complete {
		tt.caughtUp.Store(true)
		tt.at = t.now()
		t.setTopicGaugesLocked(tt)
		seen := map[waker]bool{}
		for _, q := range tt.parts {
			if !seen[q.owner] {
				seen[q.owner] = true
				owners = append(owners, q.owner)
			}
		}
	}
	t.mu.Unlock()
	if complete {
		msg := "kafka topic caught up: every partition reached its end offset; its splits go idle"
		if !t.idles {
			msg = "kafka topic caught up: every partition reached its end offset (CatchUpOff: splits stay as the strategy decides)"
		}
		log.Info(msg, "topic", tt.name, "partitions", tt.total)
		for _, o := range owners {
			o.topicCaughtUp()
		}
	}
}

// PartitionStatus is the catch-up state of one partition of a running
// Source.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Subtask is the source subtask reading the partition.
	Subtask int `json:"subtask"`
	// Start is the offset reading started at, End the end offset
	// snapshotted at start (-1 until the reader has asked Kafka).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Position is the next offset the source will emit (-1 until known).
	Position int64 `json:"position"`
	// CaughtUp: Position has reached End (or Start was at or past it).
	CaughtUp bool `json:"caughtUp"`
	// TopicCaughtUp: every partition of the topic has caught up, so the
	// topic's splits are idle.
	TopicCaughtUp bool `json:"topicCaughtUp"`
	// Resets counts jumps of the position because the broker no longer
	// had (or never had) the offset asked for (retention, deletion).
	Resets int64 `json:"resets"`
	// Discovered: the partition appeared after the start (it is live
	// from birth and End is -1).
	Discovered bool `json:"discovered,omitempty"`
	// TopicCaughtUpAt is when the topic caught up (the job's clock), zero
	// until then.
	TopicCaughtUpAt time.Time `json:"topicCaughtUpAt,omitzero"`
}

func (t *tracker) status() []PartitionStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []PartitionStatus
	for _, tt := range t.topics {
		for _, ps := range []map[int32]*partTrack{tt.parts, tt.born} {
			for _, p := range ps {
				out = append(out, PartitionStatus{Topic: tt.name, Partition: p.partition, Subtask: p.subtask,
					Start: p.start.Load(), End: p.end.Load(), Position: p.position.Load(),
					CaughtUp: p.caughtUp.Load(), TopicCaughtUp: tt.caughtUp.Load() || len(tt.parts) == 0,
					Resets: p.resets.Load(), Discovered: p.born, TopicCaughtUpAt: tt.at})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
