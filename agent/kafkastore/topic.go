package kafkastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
)

// brokerRetry is the back-off between tries of a listing of offsets or a
// restore's fetch that failed with a retriable error or made no progress
// (within RequestTimeout).
var brokerRetry = retry.Policy{Initial: 20 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2}

// partitionOf returns the partition of key group kg (see Layout).
func (s *Store) partitionOf(kg int) int32 {
	if int(s.parts) > s.maxP {
		return int32(kg)
	}
	return int32(kg * int(s.parts) / s.maxP)
}

// reqCtx bounds one request to the cluster by RequestTimeout, and by
// parent (a restore's context; context.Background elsewhere).
func (s *Store) reqCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.opts.RequestTimeout)
}

// topicMeta asks the cluster (not the client's cache, which would miss a
// topic created a moment ago) for the leader of every partition of the
// topic; it returns the topic's error code otherwise.
func (s *Store) topicMeta(parent context.Context) (map[int32]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(s.opts.Topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := s.reqCtx(parent)
	defer cancel()
	kresp, err := s.cl.Request(ctx, req)
	if err != nil {
		if parent.Err() != nil {
			return nil, fmt.Errorf("kafkastore: reading the metadata of topic %q: %w", s.opts.Topic, parent.Err())
		}
		if cause := s.opts.Security.Diagnose(context.Background(), s.opts.Brokers); cause != nil && !errors.Is(cause, context.DeadlineExceeded) {
			err = cause // why the request ran out of time: a refused authentication, a TLS mismatch
		}
		return nil, fmt.Errorf("kafkastore: reading the metadata of topic %q (are Options.Brokers %v reachable?): %w", s.opts.Topic, s.opts.Brokers, s.opts.Security.Explain(err))
	}
	for _, t := range kresp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil || *t.Topic != s.opts.Topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, err
		}
		s.topicID = t.TopicID
		out := make(map[int32]int32, len(t.Partitions))
		for _, p := range t.Partitions {
			out[p.Partition] = p.Leader
		}
		return out, nil
	}
	return nil, kerr.UnknownTopicOrPartition
}

// ensureTopic creates the topic if it is missing and checks that it is
// compacted (KT7). It returns ctx's error once ctx ends.
func (s *Store) ensureTopic(ctx context.Context) error {
	t := s.opts.Topic
	for attempt := 0; ; attempt++ {
		parts, err := s.topicMeta(ctx)
		if err == nil && len(parts) > 0 {
			s.parts = int32(len(parts))
			return s.checkCompacted(ctx)
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) {
			return fmt.Errorf("kafkastore: topic %q: %w", t, err)
		}
		if attempt > 0 {
			if attempt >= 100 {
				return fmt.Errorf("kafkastore: topic %q was created but the cluster's metadata does not show it", t)
			}
			if err := retry.Sleep(ctx, clock.FromContext(ctx), 20*time.Millisecond); err != nil {
				return fmt.Errorf("kafkastore: waiting for topic %q to show in the cluster's metadata: %w", t, err)
			}
			continue
		}
		n := s.opts.Partitions
		if n <= 0 {
			n = 1
		}
		rf := s.opts.ReplicationFactor
		if rf == 0 {
			rf = -1
		}
		cctx, cancel := s.reqCtx(ctx)
		_, err = s.adm.CreateTopic(cctx, n, rf, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, t)
		cancel()
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("kafkastore: creating topic %q: %w", t, ctx.Err())
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafkastore: creating topic %q (cleanup.policy=compact, %d partitions) failed; create it yourself or grant the CREATE permission: %w", t, n, err)
		}
	}
}

func (s *Store) checkCompacted(parent context.Context) error {
	ctx, cancel := s.reqCtx(parent)
	defer cancel()
	rcs, err := s.adm.DescribeTopicConfigs(ctx, s.opts.Topic)
	if err != nil {
		return fmt.Errorf("kafkastore: describing topic %q: %w", s.opts.Topic, err)
	}
	rc, err := rcs.On(s.opts.Topic, nil)
	if err != nil {
		return fmt.Errorf("kafkastore: describing topic %q: %w", s.opts.Topic, err)
	}
	if rc.Err != nil {
		return fmt.Errorf("kafkastore: describing topic %q: %w", s.opts.Topic, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			if c.Value != nil && strings.Contains(*c.Value, "compact") {
				return nil
			}
			v := "<unset>"
			if c.Value != nil {
				v = *c.Value
			}
			return fmt.Errorf("kafkastore: topic %q has cleanup.policy=%s; action states must not expire: set cleanup.policy=compact on it, or use another topic", s.opts.Topic, v)
		}
	}
	return fmt.Errorf("kafkastore: topic %q reports no cleanup.policy; set cleanup.policy=compact on it", s.opts.Topic)
}

// listOffsets lists the start (or end) offsets of the subtask's partitions.
// A retriable error (a leader being elected, a broker not yet aware of the
// topic) is tried again with back-off within RequestTimeout, as the
// producer and fetches do; the simulator found Open and Restore failing at
// once on one LEADER_NOT_AVAILABLE. The waits between tries are on the
// clock parent carries (clock.FromContext), and end with parent: a
// cancelled restore returns an error wrapping parent.Err().
func (s *Store) listOffsets(parent context.Context, start bool) (map[int32]int64, error) {
	ctx, cancel := s.reqCtx(parent)
	defer cancel()
	var lo kadm.ListedOffsets
	var err error
	what := "end"
	if start {
		what = "start"
	}
	b := brokerRetry.Start()
	for {
		if start {
			lo, err = s.adm.ListStartOffsets(ctx, s.opts.Topic)
		} else {
			lo, err = s.adm.ListEndOffsets(ctx, s.opts.Topic)
		}
		if err == nil {
			err = lo.Error()
		}
		if err == nil || !kerr.IsRetriable(err) || retry.Sleep(ctx, clock.FromContext(parent), b.Next(0)) != nil {
			break
		}
	}
	if parent.Err() != nil {
		err = parent.Err() // why the listing stopped: not the last retriable error
	}
	if err != nil {
		return nil, fmt.Errorf("kafkastore: listing the %s offsets of topic %q: %w", what, s.opts.Topic, err)
	}
	out := map[int32]int64{}
	for p := s.first; p <= s.last; p++ {
		o, ok := lo.Lookup(s.opts.Topic, p)
		if !ok {
			return nil, fmt.Errorf("kafkastore: no %s offset listed for %s[%d]", what, s.opts.Topic, p)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// leaders returns the leader broker of every partition of the topic.
func (s *Store) leaders(ctx context.Context) (map[int32]int32, error) {
	m, err := s.topicMeta(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafkastore: finding the leaders of topic %q: %w", s.opts.Topic, err)
	}
	return m, nil
}
