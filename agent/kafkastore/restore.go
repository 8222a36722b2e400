package kafkastore

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/internal/retry"
)

// marker is the recovery marker of one subtask's store.
type marker struct {
	Version    int              `json:"v"`
	Topic      string           `json:"topic"`
	Partitions int32            `json:"partitions"`
	Offsets    map[string]int64 `json:"offsets"` // partition -> offset
	// TopicID is the topic's id (hex) when the marker was taken; empty in
	// markers of earlier versions.
	TopicID string `json:"topicId,omitempty"`
}

// Marker implements agent.Checkpointed (KT4).
func (s *Store) Marker() ([]byte, error) {
	s.mu.Lock()
	m := marker{Version: 1, Topic: s.opts.Topic, Partitions: s.parts, Offsets: map[string]int64{}, TopicID: s.topicIDString()}
	low := make(map[int32]int64, len(s.end))
	for p, o := range s.end {
		low[p] = o
	}
	for _, r := range s.idx.All() {
		if e := r.V; e.off >= 0 && e.off < low[e.part] {
			low[e.part] = e.off
		}
	}
	s.mu.Unlock()
	for p, o := range low {
		m.Offsets[strconv.Itoa(int(p))] = o
	}
	return json.Marshal(m)
}

// topicIDString is the topic's id in hex, or "" when the cluster gives
// none (all zeros).
func (s *Store) topicIDString() string {
	if s.topicID == ([16]byte{}) {
		return ""
	}
	return hex.EncodeToString(s.topicID[:])
}

// Restore implements agent.Checkpointed (KT5 and KT8): it replaces
// the store's states with those its key groups have in the log from the
// markers on. Call it before any write. It is RestoreContext with a
// context that never ends.
func (s *Store) Restore(markers [][]byte) error {
	return s.RestoreContext(context.Background(), markers)
}

// RestoreContext implements agent.ContextRestorer: Restore, whose
// requests and waits between retries end with ctx. Once ctx is done it
// returns an error wrapping ctx.Err() (the store is then unusable: its
// states are partly rebuilt). The waits between retries, and
// RequestTimeout as a limit on a restore that makes no progress, are
// measured on the clock ctx carries (clock.FromContext; the system clock
// when it carries none); each request's own RequestTimeout is on the
// system clock, as the network's.
func (s *Store) RestoreContext(ctx context.Context, markers [][]byte) error {
	from := map[int32]int64{}
	var missing []string // why states the markers refer to are gone
	for _, raw := range markers {
		var m marker
		if err := json.Unmarshal(raw, &m); err != nil || m.Version != 1 {
			return fmt.Errorf("kafkastore: unreadable recovery marker %q (written by a newer weir?)", raw)
		}
		if m.Topic != s.opts.Topic {
			return fmt.Errorf("kafkastore: the checkpoint's states are in topic %q, the store is configured with %q; restore with the same topic", m.Topic, s.opts.Topic)
		}
		if m.Partitions != s.parts {
			return fmt.Errorf("kafkastore: topic %q had %d partitions when the checkpoint was taken and has %d now; the key-group layout changed, restore the partition count", s.opts.Topic, m.Partitions, s.parts)
		}
		if id := s.topicIDString(); m.TopicID != "" && id != "" && m.TopicID != id {
			missing = append(missing, fmt.Sprintf("topic %q has id %s, the checkpoint's states were written to the topic of id %s (deleted and created again?)", s.opts.Topic, id, m.TopicID))
		}
		for ps, o := range m.Offsets {
			p, err := strconv.Atoi(ps)
			if err != nil {
				return fmt.Errorf("kafkastore: recovery marker with partition %q", ps)
			}
			if cur, ok := from[int32(p)]; !ok || o < cur {
				from[int32(p)] = o
			}
		}
	}
	starts, err := s.listOffsets(ctx, true)
	if err != nil {
		return err
	}
	ends, err := s.listOffsets(ctx, false)
	if err != nil {
		return err
	}
	pos := map[int32]int64{}
	for p := s.first; p <= s.last; p++ {
		o, ok := from[p]
		if !ok {
			if len(markers) > 0 {
				s.log.Warn("kafkastore: no recovery marker covers a partition; reading it from its start", "topic", s.opts.Topic, "partition", p)
			}
			o = starts[p]
		}
		switch {
		case ok && o > ends[p]:
			missing = append(missing, fmt.Sprintf("partition %d ends at offset %d, before offset %d where the checkpoint's states start (topic deleted and created again?)", p, ends[p], o))
		case ok && o < starts[p]:
			missing = append(missing, fmt.Sprintf("partition %d starts at offset %d, after offset %d where the checkpoint's states start (records deleted, or removed by retention?)", p, starts[p], o))
		}
		pos[p] = max(o, starts[p])
	}
	s.mu.Lock()
	s.idx.Clear()
	s.horizon = 0
	s.mu.Unlock()
	killpoint.Hit("agent.rebuild") // crash tests: a restore that dies while it reads the log
	n, err := s.read(ctx, pos, ends)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for p, e := range ends {
		s.end[p] = max(s.end[p], e)
	}
	live := s.idx.Len()
	s.mu.Unlock()
	s.log.Info("kafkastore: rebuilt the action states", "topic", s.opts.Topic, "keyGroups", s.rng.String(), "records", n, "states", live)
	if len(missing) > 0 {
		return fmt.Errorf("kafkastore: %w: %s; the states of the checkpoint's unfinished actions are not in topic %q (was it deleted, or does its retention remove records? the store's topic must be compacted and never deleted)",
			agent.ErrStatesMissing, strings.Join(missing, "; "), s.opts.Topic)
	}
	return nil
}

// read fetches the partitions from pos until each position reaches its
// end, applying the records of the store's key groups; it returns the
// number of records read. Failed fetches, retriable partition errors (a
// leader election) and rounds without progress are tried again with
// back-off until RequestTimeout has passed without progress: a count of
// failures gave up on six retriable errors in a row (the simulator's seed
// 4800376196970880383), each counted twice. The waits and the limit are on
// the clock ctx carries; once ctx is done read returns an error wrapping
// ctx.Err().
func (s *Store) read(ctx context.Context, pos, ends map[int32]int64) (int, error) {
	n := 0
	decomp := kgo.DefaultDecompressor()
	clk := clock.FromContext(ctx)
	b := brokerRetry.Start()
	stuckSince := clk.Now()
	// stuck reports whether RequestTimeout has passed since the last
	// progress, and otherwise waits before the next try; it returns
	// ctx's error once ctx is done.
	stuck := func() (bool, error) {
		if clk.Now().Sub(stuckSince) > s.opts.RequestTimeout {
			return true, nil
		}
		if err := retry.Sleep(ctx, clk, b.Next(0)); err != nil {
			return false, fmt.Errorf("kafkastore: restoring from topic %q: %w", s.opts.Topic, err)
		}
		return false, nil
	}
	for {
		var todo []int32
		for p, o := range pos {
			if o < ends[p] {
				todo = append(todo, p)
			}
		}
		if len(todo) == 0 {
			return n, nil
		}
		slices.Sort(todo)
		leaders, err := s.leaders(ctx)
		if err != nil {
			return n, err
		}
		byLeader := map[int32][]int32{}
		for _, p := range todo {
			byLeader[leaders[p]] = append(byLeader[leaders[p]], p)
		}
		progress := false
		for leader, ps := range byLeader {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID = -1
			req.MaxWaitMillis = 100
			req.MinBytes = 1
			req.MaxBytes = 32 << 20
			req.SessionEpoch = -1
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = s.opts.Topic, s.topicID
			for _, p := range ps {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition = p
				rp.FetchOffset = pos[p]
				rp.CurrentLeaderEpoch = -1
				rp.LogStartOffset = -1
				rp.PartitionMaxBytes = 8 << 20
				t.Partitions = append(t.Partitions, rp)
			}
			req.Topics = append(req.Topics, t)
			rctx, cancel := s.reqCtx(ctx)
			kresp, err := s.cl.Broker(int(leader)).Request(rctx, req)
			cancel()
			if err == nil {
				if resp := kresp.(*kmsg.FetchResponse); resp.ErrorCode != 0 {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
			}
			if err != nil {
				if give, cerr := stuck(); cerr != nil {
					return n, cerr
				} else if give {
					return n, fmt.Errorf("kafkastore: fetching %s from broker %d: %w", s.opts.Topic, leader, err)
				}
				continue
			}
			for _, rt := range kresp.(*kmsg.FetchResponse).Topics {
				for i := range rt.Partitions {
					rp := &rt.Partitions[i]
					p := rp.Partition
					if _, ok := pos[p]; !ok {
						continue
					}
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						if errors.Is(err, kerr.OffsetOutOfRange) && rp.LogStartOffset > pos[p] {
							// Compaction or retention removed the start.
							pos[p] = rp.LogStartOffset
							progress = true
							continue
						}
						if kerr.IsRetriable(err) {
							continue // no progress: retried below
						}
						return n, fmt.Errorf("kafkastore: fetching %s[%d] at offset %d: %w", s.opts.Topic, p, pos[p], err)
					}
					fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
						Offset: pos[p], Topic: s.opts.Topic, Partition: p}, rp, decomp, nil)
					if fp.Err != nil && len(fp.Records) == 0 {
						return n, fmt.Errorf("kafkastore: reading %s[%d] at offset %d: %w", s.opts.Topic, p, pos[p], fp.Err)
					}
					for _, r := range fp.Records {
						if err := s.replay(r); err != nil {
							return n, err
						}
						n++
					}
					if next > pos[p] {
						pos[p] = next
						progress = true
					}
				}
			}
		}
		if progress {
			b, stuckSince = brokerRetry.Start(), clk.Now()
			continue
		}
		// A broker with records below the end returns at least one batch:
		// no progress is a failure, retried until RequestTimeout.
		if give, cerr := stuck(); cerr != nil {
			return n, cerr
		} else if give {
			return n, fmt.Errorf("kafkastore: fetching %s makes no progress for %v (positions %v, ends %v); check the brokers", s.opts.Topic, s.opts.RequestTimeout, pos, ends)
		}
	}
}

// replay applies one record read from the log.
func (s *Store) replay(r *kgo.Record) error {
	kg := -1
	var pos []byte
	for _, h := range r.Headers {
		switch {
		case h.Key == horizonHeader && len(h.Value) == 8:
			// A horizon counts when the key groups of the store that
			// wrote it overlap this store's: within one job, the
			// subtasks before a change of parallelism whose states this
			// store takes over (their checkpoint ids are this job's).
			// Another slice of a clustered job (a keyed task of package
			// cluster) numbers its checkpoints apart, and its horizon
			// says nothing of this store's states.
			if r, ok := horizonRange(r.Key); ok && r.Intersect(s.rng).Empty() {
				return nil
			}
			s.mu.Lock()
			s.horizon = max(s.horizon, int64(binary.BigEndian.Uint64(h.Value)))
			s.mu.Unlock()
			return nil
		case h.Key == kgHeader && len(h.Value) == 4:
			kg = int(binary.BigEndian.Uint32(h.Value))
		case h.Key == posHeader && len(h.Value) == 24:
			pos = h.Value
		}
	}
	if kg < 0 {
		return fmt.Errorf("kafkastore: record at %s[%d]@%d has no key-group header; is the topic shared with something else?", r.Topic, r.Partition, r.Offset)
	}
	if !s.rng.Contains(kg) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Value == nil {
		id := string(r.Key)
		s.remove(keyIn(id), id)
		return nil
	}
	// One copy of the record's key and value: the run's identity (a
	// string over the key's bytes) and the raw state. Neither is ever
	// modified.
	buf := make([]byte, 0, len(r.Key)+len(r.Value))
	buf = append(append(buf, r.Key...), r.Value...)
	if len(r.Key) == 0 {
		return fmt.Errorf("kafkastore: record at %s[%d]@%d has no key; is the topic shared with something else?", r.Topic, r.Partition, r.Offset)
	}
	id := unsafe.String(&buf[0], len(r.Key))
	e := &entry{id: id, kg: kg, part: r.Partition, off: r.Offset, raw: buf[len(r.Key):]}
	if key := keyIn(id); key != "" && pos != nil {
		e.key = key
		e.pos = agent.Position{Seq: int64(binary.BigEndian.Uint64(pos[0:8])),
			EventID: int64(binary.BigEndian.Uint64(pos[8:16])), Action: int(binary.BigEndian.Uint64(pos[16:24]))}
	} else {
		st, err := e.state()
		if err != nil {
			return err
		}
		e.key, e.pos = string(st.ID.Key), st.Pos
	}
	s.add(e)
	return nil
}
