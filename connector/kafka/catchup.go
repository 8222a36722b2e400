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
// its partitions is, at once: then every reader owning a partition of it is
// woken to mark its splits idle (K6).
//
// A partition's state, until its topic has caught up:
//
//	behind --(position >= snapshot end and >= log end of latest fetch)--> caught up
//	caught up --(a later fetch shows records not read yet)--> behind
//
// The way back matters when records keep arriving during the replay (a
// loader still writing): a partition that reached its log end between two
// writes is caught up for a moment, and the topic must not take that moment
// for good while its other partitions still replay. Once the topic has
// caught up, every state is final: later records are live (K8).
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
	// logEnd is the end of the partition's log as the latest fetch
	// reported it (its high watermark, or last stable offset under
	// read_committed), the end-offset snapshot before the first fetch,
	// -1 until then. The fetch goroutines store it before they hand the
	// fetch's batch over; Poll reads it (backlogAt).
	logEnd   atomic.Int64
	caughtUp atomic.Bool
	resets   atomic.Int64
	born     bool
	gauges   partGauges
	// logged: the partition's catch-up was logged (once; guarded by
	// tracker.mu).
	logged bool
}

// setPosition records the partition's consumer position.
func (p *partTrack) setPosition(pos int64) {
	p.position.Store(pos)
	gaugeSet(p.gauges.position, pos)
	if end := p.logEnd.Load(); end >= 0 && pos >= 0 {
		gaugeSet(p.gauges.lag, max(end-pos, 0))
	}
}

// setStart records the resolved start offset and the end-offset snapshot.
func (p *partTrack) setStart(start, end int64) {
	p.start.Store(start)
	p.end.Store(end)
	gaugeSet(p.gauges.start, start)
	gaugeSet(p.gauges.end, end)
	p.setPosition(start)
}

// caughtUpAt is the catch-up rule (K5) for a partition whose consumer
// position is pos, whose end-offset snapshot is end (-1 until taken) and
// whose log ended at logEnd when it was last fetched (see partTrack.logEnd):
// the position has reached the snapshot, and no backlog is known. The
// second half matters when records are written while the job replays: the
// snapshot's end is then behind the log's, and a partition declared caught
// up at the snapshot goes idle with those records still to read, so that
// the other inputs carry event time past them (they arrive late). A fetch
// response says where the log ends; a position at that end has read
// everything written before the fetch. Records written after it are live.
func caughtUpAt(pos, end, logEnd int64) bool {
	return end >= 0 && pos >= end && pos >= logEnd
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
	p.logEnd.Store(-1)
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
	p.logEnd.Store(-1)
	p.caughtUp.Store(true)
	tt.born[partition] = p
	return p
}

// markCaughtUp records that p has caught up (caughtUpAt). It logs the
// partition (its first catch-up only), and the topic when this made every
// partition of it caught up at once (on log, the logger of the reader that
// saw it), and wakes the topic's readers then.
func (t *tracker) markCaughtUp(p *partTrack, log *slog.Logger) {
	t.mu.Lock()
	tt := p.topic
	if tt.parts[p.partition] != p || p.caughtUp.Load() { // replaced by a newer run's reader, or nothing new
		t.mu.Unlock()
		return
	}
	p.caughtUp.Store(true)
	first := !p.logged
	p.logged = true
	gaugeSet(p.gauges.caughtUp, 1)
	if !t.started.IsZero() {
		gaugeSet(p.gauges.millis, max(t.now().Sub(t.started).Milliseconds(), 0))
	}
	tt.done++
	if !tt.caughtUp.Load() && tt.done == tt.total && len(tt.parts) == tt.total {
		t.recheckLocked(tt)
	}
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
	if first {
		log.Info("kafka partition caught up with its end offset and the log end of its latest fetch",
			"topic", tt.name, "partition", p.partition,
			"start", p.start.Load(), "end", p.end.Load(), "position", p.position.Load(), "logEnd", p.logEnd.Load())
	}
	if complete {
		msg := "kafka topic caught up: every partition reached its end offset with no backlog; its splits go idle"
		if !t.idles {
			msg = "kafka topic caught up: every partition reached its end offset with no backlog (CatchUpOff: splits stay as the strategy decides)"
		}
		log.Info(msg, "topic", tt.name, "partitions", tt.total)
		for _, o := range owners {
			o.topicCaughtUp()
		}
	}
}

// recheckLocked withdraws the catch-up of every partition of tt that is
// behind now: its position, as its reader last set it, is below the log
// end its fetch goroutine last stored. Another reader's state can be
// older than the latest fetch (the batch that shows the backlog is still
// queued for it): the topic is complete only if every partition is caught
// up at this moment. A partition withdrawn here has that batch coming, and
// its reader checks again when it has emitted it.
func (t *tracker) recheckLocked(tt *topicTrack) {
	for _, q := range tt.parts {
		if q.caughtUp.Load() && !caughtUpAt(q.position.Load(), q.end.Load(), q.logEnd.Load()) {
			q.caughtUp.Store(false)
			tt.done--
			gaugeSet(q.gauges.caughtUp, 0)
		}
	}
}

// markBehind withdraws p's catch-up: a fetch after it found records p has
// not read yet (records written while its topic's other partitions still
// replay). It reports false, and changes nothing, once p's topic has caught
// up: from then on the topic is live and records are live records.
func (t *tracker) markBehind(p *partTrack) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tt := p.topic
	if tt.caughtUp.Load() || tt.parts[p.partition] != p {
		return false
	}
	if p.caughtUp.Load() {
		p.caughtUp.Store(false)
		tt.done--
		gaugeSet(p.gauges.caughtUp, 0)
	}
	return true
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
	// LogEnd is where the partition's log ended when it was last fetched
	// (its high watermark, or last stable offset under read_committed;
	// End before the first fetch, -1 before that): Position below it is
	// a backlog.
	LogEnd int64 `json:"logEnd"`
	// CaughtUp: Position has reached End (or Start was at or past it)
	// and LogEnd, so no backlog was left (K5).
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
					Start: p.start.Load(), End: p.end.Load(), Position: p.position.Load(), LogEnd: p.logEnd.Load(),
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
