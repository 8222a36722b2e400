package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/internal/retry"
	"github.com/weirproject/weir/runtime"
)

// unionList is the operator-state list (checkpoint.Union: every subtask
// receives all of it on restore) holding every split's position, so that a
// restored reader can find the positions of the partitions it is assigned
// whatever the old parallelism was.
const unionList = "kafka-splits"

// Offsets with a special meaning in split states.
const (
	// offsetUnresolved: the reader had not yet resolved its start offset
	// when the checkpoint was taken; resolve it with Options.Start again.
	offsetUnresolved int64 = -1
	// offsetEarliest: the partition was to start at its earliest offset.
	offsetEarliest int64 = -2
)

// Source reads Kafka topics into a weir stream; give it to weir.FromSource.
// It implements runtime.Source. See the package documentation for the
// guarantees (K1-K15).
//
// A Source keeps the catch-up state of the job run it serves (Status), so
// use one Source per job; a job restarted in the same process (after a
// failure) may reuse it.
type Source[T any] struct {
	opts  Options
	deser Deserializer[T]
	// re and optsErr are what validate gave for the options as passed to
	// NewSource (before defaults).
	re      *regexp.Regexp
	optsErr error
	secOpts []kgo.Opt // Options.Security's options, made once by NewSource

	mu  sync.Mutex
	cur *run
}

// NewSource returns a source reading with opts and turning records into
// values with deser. Options are checked here, as given, and a mistake is
// reported when the job starts (by Validate, before any reader is created).
func NewSource[T any](opts Options, deser Deserializer[T]) *Source[T] {
	re, err := opts.validate()
	var sec []kgo.Opt
	if err == nil {
		// Once per source: the clients share the caches of file secrets
		// and OAuth tokens, and an insecure TLS setting warns once.
		if sec, err = opts.Security.Opts(); err != nil {
			err = fmt.Errorf("kafka: Options.Security: %w", err)
		}
	}
	return &Source[T]{opts: opts.withDefaults(), deser: deser, re: re, optsErr: err, secOpts: sec}
}

// Validate reports what is wrong with the options given to NewSource and
// the deserializer (nil if nothing is).
func (s *Source[T]) Validate() error {
	if s.optsErr != nil {
		return s.optsErr
	}
	if s.deser == nil {
		return errors.New("kafka: NewSource with a nil Deserializer; use Bytes(), String() or JSON[T]()")
	}
	return nil
}

// topicPartition names a partition.
type topicPartition struct {
	topic     string
	partition int32
}

// run is what the readers of one run of a job share: the partition list
// they divide among themselves (taken once, so that all readers divide the
// same list) and the catch-up tracker.
type run struct {
	re      *regexp.Regexp  // TopicPattern, or nil
	topics  map[string]bool // the topics of the plan
	par     int
	seen    map[int]bool
	parts   []topicPartition // sorted by topic, then partition
	counts  map[string]int
	ids     map[string][16]byte
	tracker *tracker
}

// Status returns the catch-up state of every partition of the current run,
// sorted by topic and partition; nil before the job has started.
func (s *Source[T]) Status() []PartitionStatus {
	s.mu.Lock()
	r := s.cur
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.tracker.status()
}

// CaughtUp reports whether every partition of every topic of the current
// run has caught up (false before the job has started).
func (s *Source[T]) CaughtUp() bool {
	st := s.Status()
	for _, p := range st {
		if !p.TopicCaughtUp {
			return false
		}
	}
	return len(st) > 0
}

// CreateReader implements runtime.Source.
func (s *Source[T]) CreateReader(ctx runtime.SourceContext) (runtime.Reader[T], error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	re := s.re
	par := max(ctx.Parallelism, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The readers of one run are created one after the other for subtasks
	// 0..par-1 before any is polled; seeing a subtask again (or another
	// parallelism) means a new run of the job.
	if s.cur == nil || s.cur.par != par || s.cur.seen[ctx.Subtask] {
		r, err := s.newRun(ctx, re, par)
		if err != nil {
			return nil, err
		}
		s.cur = r
	}
	run := s.cur
	run.seen[ctx.Subtask] = true
	restored, err := restoredPositions(ctx)
	if err != nil {
		return nil, err
	}
	r := newReader(s, ctx, run)
	for i, tp := range run.parts {
		if i%par != ctx.Subtask {
			continue
		}
		sp := &split{id: len(r.splits), topic: tp.topic, partition: tp.partition, topicID: run.ids[tp.topic],
			initial: offsetUnresolved, pos: -1, end: -1}
		if restored != nil {
			if off, ok := restored[tp]; ok {
				sp.initial = off
			} else {
				// Not in the checkpoint: the partition appeared after it
				// was taken, so all of it is new.
				sp.initial = offsetEarliest
			}
		}
		sp.track = run.tracker.register(tp.topic, run.counts[tp.topic], tp.partition, ctx.Subtask, r)
		sp.track.gauges = newPartGauges(ctx, tp.topic, tp.partition)
		r.splits = append(r.splits, sp)
	}
	return r, nil
}

func (s *Source[T]) newClient(extra ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, b := range s.opts.Brokers {
		for _, x := range strings.Split(b, ",") {
			if x = strings.TrimSpace(x); x != "" {
				seeds = append(seeds, x)
			}
		}
	}
	opts := append(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, s.secOpts...), s.opts.ClientOptions...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	return cl, nil
}

// newRun lists the topics' partitions once for all readers of a run.
func (s *Source[T]) newRun(ctx runtime.SourceContext, re *regexp.Regexp, par int) (*run, error) {
	cl, err := s.newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	rctx, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
	defer cancel()
	topics := append([]string(nil), s.opts.Topics...)
	if re != nil {
		all, err := adm.ListTopics(rctx)
		if err != nil {
			return nil, fmt.Errorf("kafka: source %q: list topics on %v to match TopicPattern: %w (are the brokers reachable?)", ctx.Name, s.opts.Brokers, err)
		}
		for name := range all {
			if !strings.HasPrefix(name, "__") && re.MatchString(name) {
				topics = append(topics, name)
			}
		}
	}
	sort.Strings(topics)
	topics = compact(topics)
	if len(topics) == 0 {
		return nil, fmt.Errorf("kafka: source %q: TopicPattern %q matches no topic on %v", ctx.Name, s.opts.TopicPattern, s.opts.Brokers)
	}
	md, err := adm.Metadata(rctx, topics...)
	now := time.Now
	if ctx.Clock != nil {
		now = ctx.Clock.Now
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: source %q: metadata of %v from %v: %w (are the brokers reachable?)", ctx.Name, topics, s.opts.Brokers, err)
	}
	r := &run{re: re, topics: map[string]bool{}, par: par, seen: map[int]bool{}, counts: map[string]int{}, ids: map[string][16]byte{},
		tracker: newTracker(now, s.opts.CatchUp == CatchUpEndOffsets)}
	for _, t := range topics {
		td, ok := md.Topics[t]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("kafka: source %q: topic %q does not exist on %v; create it first or fix Options.Topics", ctx.Name, t, s.opts.Brokers)
		}
		if td.Err != nil {
			return nil, fmt.Errorf("kafka: source %q: metadata of topic %q: %w", ctx.Name, t, td.Err)
		}
		r.topics[t] = true
		r.ids[t] = td.ID
		if len(s.opts.Partitions) == 0 {
			r.counts[t] = len(td.Partitions)
			for p := range td.Partitions {
				r.parts = append(r.parts, topicPartition{t, p})
			}
			continue
		}
		for _, p := range s.opts.Partitions {
			if _, ok := td.Partitions[p]; !ok {
				return nil, fmt.Errorf("kafka: source %q: topic %q has no partition %d (it has %d); fix Options.Partitions", ctx.Name, t, p, len(td.Partitions))
			}
			if !slices.Contains(r.parts, topicPartition{t, p}) {
				r.parts = append(r.parts, topicPartition{t, p})
				r.counts[t]++
			}
		}
	}
	sort.Slice(r.parts, func(i, j int) bool {
		a, b := r.parts[i], r.parts[j]
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.partition < b.partition
	})
	return r, nil
}

func compact(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// splitState is one split's checkpointed position, stored as JSON.
type splitState struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the next offset to read; -1: resolve with Options.Start;
	// -2: the partition's earliest offset.
	Offset int64 `json:"offset"`
}

// restoredPositions returns the positions of every split of the restored
// checkpoint (nil on a fresh start, or when the checkpoint holds none for
// this source).
func restoredPositions(ctx runtime.SourceContext) (map[topicPartition]int64, error) {
	if ctx.Restored == nil {
		return nil, nil
	}
	items, err := ctx.Restored.List(unionList)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		// A checkpoint written without the union list: only this
		// subtask's share of the splits is known.
		if items, err = ctx.Restored.List(runtime.SplitsList); err != nil {
			return nil, err
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[topicPartition]int64, len(items))
	for _, it := range items {
		var st splitState
		if err := json.Unmarshal(it, &st); err != nil {
			return nil, fmt.Errorf("kafka: source %q: corrupt split state in checkpoint %d: %w", ctx.Name, ctx.Restored.CheckpointID, err)
		}
		if st.Offset < offsetEarliest {
			return nil, fmt.Errorf("kafka: source %q: checkpoint %d holds offset %d for topic %q partition %d, which no Kafka partition has "+
				"(offsets are >= 0); the checkpoint or savepoint is corrupt or was edited: restore from another one, or start without restoring",
				ctx.Name, ctx.Restored.CheckpointID, st.Offset, st.Topic, st.Partition)
		}
		if st.Partition < 0 {
			return nil, fmt.Errorf("kafka: source %q: checkpoint %d holds partition %d of topic %q (partitions are >= 0); "+
				"the checkpoint or savepoint is corrupt or was edited: restore from another one, or start without restoring",
				ctx.Name, ctx.Restored.CheckpointID, st.Partition, st.Topic)
		}
		out[topicPartition{st.Topic, st.Partition}] = st.Offset
	}
	return out, nil
}

// requestRetry is the back-off of the connector's retried requests: 100ms
// doubled up to 1s, without jitter (each loop retries one request of its
// own; franz-go's client jitters its own retries underneath).
var requestRetry = retry.Policy{Initial: 100 * time.Millisecond, Max: time.Second}

// retryDelay is the pause after the attempt-th failed request (from 1)
// before the next attempt.
func retryDelay(attempt int) time.Duration { return requestRetry.Delay(attempt) }
