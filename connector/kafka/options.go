package kafka

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// StartOffset says where a partition is read from when the job does not
// restore a position for it from a checkpoint. The zero value is
// StartEarliest.
type StartOffset struct {
	kind     startKind
	millis   int64
	fallback *StartOffset
}

type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startTimestamp
	startCommitted
)

// StartEarliest reads each partition from its log start offset (the oldest
// record still kept).
func StartEarliest() StartOffset { return StartOffset{kind: startEarliest} }

// StartLatest reads only records produced after the job starts: each
// partition starts at its end offset (the last stable offset under
// read_committed). Every partition is then caught up at once.
func StartLatest() StartOffset { return StartOffset{kind: startLatest} }

// StartAt starts each partition at its first record with a timestamp at or
// after t (its end offset if there is none).
func StartAt(t time.Time) StartOffset { return StartAtMillis(t.UnixMilli()) }

// StartAtMillis is StartAt with Unix milliseconds.
func StartAtMillis(ms int64) StartOffset { return StartOffset{kind: startTimestamp, millis: ms} }

// StartCommitted starts each partition at the offset Options.Group has
// committed for it, and partitions without a committed offset at fallback.
func StartCommitted(fallback StartOffset) StartOffset {
	if fallback.kind == startCommitted {
		fallback = *fallback.fallback
	}
	return StartOffset{kind: startCommitted, fallback: &fallback}
}

// String describes the start position.
func (s StartOffset) String() string {
	switch s.kind {
	case startLatest:
		return "latest"
	case startTimestamp:
		return fmt.Sprintf("timestamp %d", s.millis)
	case startCommitted:
		return "committed (else " + s.fallback.String() + ")"
	default:
		return "earliest"
	}
}

// CatchUp selects how the source decides that a partition has caught up
// with the history that existed when the job started.
type CatchUp int

const (
	// CatchUpEndOffsets (the default) snapshots each assigned partition's
	// end offset once, when the reader starts (the last stable offset
	// under read_committed), and counts a partition as caught up when its
	// consumer position reaches that offset. A topic's splits go idle when
	// every partition of the topic has caught up (see the package
	// documentation, K5-K8).
	CatchUpEndOffsets CatchUp = iota
	// CatchUpOff never marks splits idle: the watermark.Strategy alone
	// decides (its generators and, with WithIdleness, time-outs).
	CatchUpOff
)

// Live selects what a caught-up split does when records arrive after the
// catch-up (live traffic).
type Live int

const (
	// LiveRejoin (the default): a caught-up split stays idle while it is
	// silent; its first record after the catch-up makes it active again,
	// and from then on its own watermark generator (and the strategy's
	// time-out idleness, if any) drive it, as in Flink. The split rejoins
	// the minimum only once its watermark has reached the subtask's (no
	// watermark goes back). Use it when no clock stream drives event time.
	LiveRejoin Live = iota
	// LiveStayIdle: a caught-up split stays idle for the rest of the run,
	// records or not, so it never holds event time back again. Event time
	// is then driven by the other inputs of the job, typically a clock
	// stream (package ordering's Clock): the clock's lag bounds how late a
	// live record may be and still be in order. Without such an input, a
	// job whose sources have all caught up has no event-time progress.
	LiveStayIdle
)

// Options configure a Source. Brokers and Topics (or TopicPattern) are
// required; every other field has a default.
type Options struct {
	// Brokers are the bootstrap servers (host:port). A single string may
	// hold several, separated by commas.
	Brokers []string
	// Topics to read.
	Topics []string
	// Partitions, if set, restricts the source to these partition numbers
	// of each topic (a topic lacking one of them fails the job at start);
	// the catch-up of a topic (K6) then counts only these partitions.
	// Package cluster reads one partition per task this way. It cannot be
	// combined with DiscoveryInterval. Empty: every partition.
	Partitions []int32
	// TopicPattern, if set, adds every topic whose name it matches (as a
	// regular expression anchored at both ends), as listed when the job
	// starts. Internal topics (starting with "__") are never matched.
	TopicPattern string
	// Start says where partitions without a restored position start.
	// Default StartEarliest. After a restore, partitions that the
	// checkpoint does not know (they appeared after it was taken) start
	// at their earliest offset.
	Start StartOffset
	// Group is the consumer group whose committed offsets StartCommitted
	// reads, and to which the source commits its checkpointed offsets when
	// a checkpoint completes (for monitoring tools such as lag
	// exporters; the source itself restores from checkpoints, not from
	// these commits). The source never joins the group: partitions are
	// assigned by the job. Empty: no commits.
	Group string
	// ReadCommitted reads with read_committed isolation: records of
	// aborted transactions are skipped and open transactions hold reading
	// back at the last stable offset, which is also the end offset the
	// catch-up snapshots.
	ReadCommitted bool
	// CatchUp is the catch-up policy; default CatchUpEndOffsets.
	CatchUp CatchUp
	// Live is what caught-up splits do with live records; default
	// LiveRejoin.
	Live Live
	// Security is TLS and SASL to the brokers (package kafkasec). The zero
	// value is plaintext without authentication. It is applied to every
	// client the source creates, before ClientOptions.
	Security Security
	// ClientOptions are added to every franz-go client the source creates
	// (client id, ...). Options that make a client consume or join a group
	// must not be given.
	ClientOptions []kgo.Opt
	// RecordsPerPoll bounds the records one Poll emits. Default 512.
	RecordsPerPoll int
	// FetchMaxWait is how long a fetch waits on the broker for data.
	// Default 500ms.
	FetchMaxWait time.Duration
	// FetchMaxBytes bounds one fetch response. Default 16 MiB.
	FetchMaxBytes int32
	// PartitionMaxBytes bounds one partition's data in a fetch response.
	// Default 1 MiB.
	PartitionMaxBytes int32
	// BufferedFetches is how many fetched partition batches a reader
	// buffers before its fetchers stop (back-pressure). Default 16.
	BufferedFetches int
	// DiscoveryInterval, when positive, makes every reader look for
	// partitions (and, with TopicPattern, topics) created after the job
	// started, this often. A discovered partition is read from its
	// beginning by subtask (start(topic) + partition) % parallelism (Flink's
	// rule), and is live from birth (K13). 0: no discovery.
	DiscoveryInterval time.Duration
	// RequestTimeout bounds each metadata and offset request. Default 30s.
	RequestTimeout time.Duration
	// BeforeStart, if set, runs in each reader's fetch goroutine before
	// the reader takes its end-offset snapshot and starts fetching (the
	// reader's splits exist and hold the watermark meanwhile). Tests and
	// experiments use it to simulate a slow connection set-up (a topic
	// that starts late); an error fails the job.
	BeforeStart func(ctx context.Context, subtask int) error
	// Stop, if set, makes the source end on demand (K14): once it is
	// closed, each reader lists the end offsets of its partitions (the
	// last stable offsets under read_committed), emits the records before
	// them and no others, and then ends, so its subtask emits the final
	// watermark and downstream windows and timers fire. Nil: the source
	// never ends.
	Stop <-chan struct{}
}

func (o Options) withDefaults() Options {
	if o.RecordsPerPoll <= 0 {
		o.RecordsPerPoll = 512
	}
	if o.FetchMaxWait <= 0 {
		o.FetchMaxWait = 500 * time.Millisecond
	}
	if o.FetchMaxBytes <= 0 {
		o.FetchMaxBytes = 16 << 20
	}
	if o.PartitionMaxBytes <= 0 {
		o.PartitionMaxBytes = 1 << 20
	}
	if o.BufferedFetches <= 0 {
		o.BufferedFetches = 16
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	return o
}

// validate checks the options as given (before withDefaults): required
// fields, sizes and durations that must not be negative, and the topic
// pattern, which it compiles.
func (o Options) validate() (*regexp.Regexp, error) {
	if len(o.Brokers) == 0 {
		return nil, errors.New("kafka: Options.Brokers is empty; give the bootstrap servers, such as 127.0.0.1:9092")
	}
	if len(o.Topics) == 0 && o.TopicPattern == "" {
		return nil, errors.New("kafka: no topics; set Options.Topics or Options.TopicPattern")
	}
	if o.Start.kind == startCommitted && o.Group == "" {
		return nil, errors.New("kafka: StartCommitted needs Options.Group, the consumer group whose offsets to start from")
	}
	var errs []error
	negative := func(field string, v any, dflt string) {
		errs = append(errs, fmt.Errorf("kafka: Options.%s %v: want 0 (%s) or a positive value", field, v, dflt))
	}
	if o.RecordsPerPoll < 0 {
		negative("RecordsPerPoll", o.RecordsPerPoll, "meaning 512")
	}
	if o.FetchMaxWait < 0 {
		negative("FetchMaxWait", o.FetchMaxWait, "meaning 500ms")
	}
	if o.FetchMaxBytes < 0 {
		negative("FetchMaxBytes", o.FetchMaxBytes, "meaning 16 MiB")
	}
	if o.PartitionMaxBytes < 0 {
		negative("PartitionMaxBytes", o.PartitionMaxBytes, "meaning 1 MiB")
	}
	if o.BufferedFetches < 0 {
		negative("BufferedFetches", o.BufferedFetches, "meaning 16")
	}
	if o.DiscoveryInterval < 0 {
		negative("DiscoveryInterval", o.DiscoveryInterval, "no discovery")
	}
	if o.RequestTimeout < 0 {
		negative("RequestTimeout", o.RequestTimeout, "meaning 30s")
	}
	for _, p := range o.Partitions {
		if p < 0 {
			errs = append(errs, fmt.Errorf("kafka: Options.Partitions holds %d: want partition numbers >= 0", p))
		}
	}
	if err := o.Security.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("kafka: Options.Security: %w", err))
	}
	if len(o.Partitions) > 0 && o.DiscoveryInterval > 0 {
		errs = append(errs, errors.New("kafka: Options.Partitions and Options.DiscoveryInterval cannot be combined; drop one"))
	}
	if o.CatchUp != CatchUpEndOffsets && o.CatchUp != CatchUpOff {
		errs = append(errs, fmt.Errorf("kafka: Options.CatchUp %d: want CatchUpEndOffsets or CatchUpOff", o.CatchUp))
	}
	if o.Live != LiveRejoin && o.Live != LiveStayIdle {
		errs = append(errs, fmt.Errorf("kafka: Options.Live %d: want LiveRejoin or LiveStayIdle", o.Live))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if o.TopicPattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + o.TopicPattern + ")$")
	if err != nil {
		return nil, fmt.Errorf("kafka: Options.TopicPattern: %w", err)
	}
	return re, nil
}
