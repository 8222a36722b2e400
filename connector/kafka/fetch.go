package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/retry"
	"github.com/weirproject/weir/keygroup"
)

// The reader's fetch loop is written against the Kafka protocol (fetch
// requests through franz-go's client, records parsed by franz-go's
// ProcessFetchPartition) rather than with franz-go's consumer, because the
// catch-up rule needs the consumer position (the next offset to fetch)
// exactly: franz-go's consumer advances it past transaction markers,
// aborted batches and compaction gaps without telling the caller, and does
// not deliver fetches that carry no records. Here every fetch response
// that moves a partition's position is handed to Poll, records or not.

// fetchMain resolves start offsets, takes the end-offset snapshot, hands
// both to Poll, and then fetches until ctx ends.
func (r *reader[T]) fetchMain(ctx context.Context) error {
	adm := kadm.NewClient(r.cl)
	if r.opts.BeforeStart != nil {
		if err := r.opts.BeforeStart(ctx, r.ctx.Subtask); err != nil {
			return fmt.Errorf("kafka: Options.BeforeStart: %w", err)
		}
	}
	inits, err := r.resolveOffsets(ctx, adm)
	if err != nil {
		return err
	}
	// Until the first fetch, the snapshot is the latest log end known
	// (stored before Poll sees the snapshot, so Poll never reads -1).
	for _, in := range inits {
		r.splits[in.split].track.logEnd.Store(in.end)
	}
	select {
	case r.msgs <- fetchMsg{init: inits}:
		r.wake()
	case <-ctx.Done():
		return nil
	}
	f := &fetcher[T]{r: r, adm: adm, workers: map[int32]*fetchWorker{}, relocate: newPartBox(), nextSplit: len(r.splits)}
	var parts []*fetchPart
	for _, in := range inits {
		s := r.splits[in.split]
		parts = append(parts, &fetchPart{split: s.id, topic: s.topic, id: s.topicID, partition: s.partition, offset: in.start,
			track: s.track, sentLogEnd: in.end})
	}
	return f.run(ctx, parts)
}

// resolveOffsets takes the end-offset snapshot (once, before any record
// is read: K5) and resolves where each split starts. Failed attempts (a
// leader moving, a broker starting) are retried for up to RequestTimeout.
func (r *reader[T]) resolveOffsets(ctx context.Context, adm *kadm.Client) ([]splitInit, error) {
	if len(r.splits) == 0 {
		return []splitInit{}, nil // (listing no topics would list all of them)
	}
	rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		inits, err := r.resolveOnce(rctx, adm)
		if err == nil || ctx.Err() != nil {
			return inits, err
		}
		// kadm routes by cached metadata; refresh it before retrying.
		r.cl.ForceMetadataRefresh()
		if !sleepCtx(rctx, retryDelay(attempt)) {
			return nil, err
		}
	}
}

func (r *reader[T]) resolveOnce(rctx context.Context, adm *kadm.Client) ([]splitInit, error) {
	var topics []string
	seen := map[string]bool{}
	need := map[startKind]bool{}
	for _, s := range r.splits {
		if !seen[s.topic] {
			seen[s.topic] = true
			topics = append(topics, s.topic)
		}
		switch {
		case s.initial == offsetEarliest:
			need[startEarliest] = true
		case s.initial == offsetUnresolved:
			need[r.opts.Start.kind] = true
			if r.opts.Start.kind == startCommitted {
				need[r.opts.Start.fallback.kind] = true
			}
		}
	}
	// The end-offset snapshot and the start offsets are listed at the
	// same time (each listing is a metadata and a ListOffsets round trip;
	// a reader's start-up is a chain of such trips, and the broker may be
	// busy serving other readers). A start at "latest" is the snapshot
	// itself, so it is never behind it; an earliest or timestamp offset
	// listed a little after the snapshot may lie past it, which K5 treats
	// as caught up at once, as it would a start listed after the snapshot.
	what := "end offsets (high watermarks)"
	if r.opts.ReadCommitted {
		what = "last stable offsets"
	}
	var ends, starts, atTime kadm.ListedOffsets
	var endErr, startErr, timeErr error
	var wg sync.WaitGroup
	if need[startEarliest] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			starts, startErr = adm.ListStartOffsets(rctx, topics...)
		}()
	}
	ms := r.opts.Start.millis
	if r.opts.Start.kind == startCommitted {
		ms = r.opts.Start.fallback.millis
	}
	if need[startTimestamp] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			atTime, timeErr = adm.ListOffsetsAfterMilli(rctx, ms, topics...)
		}()
	}
	if r.opts.ReadCommitted {
		ends, endErr = adm.ListCommittedOffsets(rctx, topics...)
	} else {
		ends, endErr = adm.ListEndOffsets(rctx, topics...)
	}
	wg.Wait()
	if endErr != nil {
		return nil, fmt.Errorf("kafka: list %s of %v: %w (are the brokers %v reachable?)", what, topics, endErr, r.opts.Brokers)
	}
	if startErr != nil {
		return nil, fmt.Errorf("kafka: list start offsets of %v: %w", topics, startErr)
	}
	if timeErr != nil {
		return nil, fmt.Errorf("kafka: list offsets after %d ms of %v: %w", ms, topics, timeErr)
	}
	var committed kadm.OffsetResponses
	if need[startCommitted] {
		var err error
		committed, err = adm.FetchOffsetsForTopics(rctx, r.opts.Group, topics...)
		if errors.Is(err, kerr.GroupIDNotFound) {
			// A group that never committed: every partition falls back.
			committed, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kafka: fetch offsets of group %q for %v: %w", r.opts.Group, topics, err)
		}
	}
	lookup := func(l kadm.ListedOffsets, what string, s *split) (int64, error) {
		o, ok := l.Lookup(s.topic, s.partition)
		if !ok {
			return 0, fmt.Errorf("kafka: no %s for %s[%d]: the topic changed while the job started; restart it", what, s.topic, s.partition)
		}
		if o.Err != nil {
			return 0, fmt.Errorf("kafka: %s of %s[%d]: %w", what, s.topic, s.partition, o.Err)
		}
		return o.Offset, nil
	}
	inits := make([]splitInit, 0, len(r.splits))
	for _, s := range r.splits {
		end, err := lookup(ends, what, s)
		if err != nil {
			return nil, err
		}
		start := s.initial
		kind := r.opts.Start
		if start == offsetEarliest {
			kind = StartEarliest()
		}
		if start < 0 && kind.kind == startCommitted {
			if o, ok := committed.Lookup(s.topic, s.partition); ok && o.Err == nil && o.At >= 0 {
				start = o.At
			} else {
				kind = *kind.fallback
			}
		}
		if start < 0 {
			switch kind.kind {
			case startEarliest:
				if start, err = lookup(starts, "start offset", s); err != nil {
					return nil, err
				}
			case startLatest:
				start = end
			case startTimestamp:
				if start, err = lookup(atTime, "offset after a timestamp", s); err != nil {
					return nil, err
				}
				if start < 0 {
					start = end
				}
			}
		}
		inits = append(inits, splitInit{split: s.id, start: start, end: end})
	}
	return inits, nil
}

// partBox hands partitions from one goroutine to another without ever
// blocking the sender.
type partBox struct {
	mu    sync.Mutex
	parts []*fetchPart
	note  chan struct{}
}

func newPartBox() *partBox { return &partBox{note: make(chan struct{}, 1)} }

func (b *partBox) put(ps ...*fetchPart) {
	b.mu.Lock()
	b.parts = append(b.parts, ps...)
	b.mu.Unlock()
	select {
	case b.note <- struct{}{}:
	default:
	}
}

func (b *partBox) take() []*fetchPart {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := b.parts
	b.parts = nil
	return ps
}

// fetchPart is a partition as the fetchers see it.
type fetchPart struct {
	split     int
	topic     string
	id        [16]byte
	partition int32
	offset    int64 // next offset to fetch
	leader    int32
	// track is the partition's catch-up record (nil for a partition
	// discovered after the start: live from birth); sentLogEnd the log
	// end last stored in it.
	track      *partTrack
	sentLogEnd int64
}

// fetched records a fetch of p that ended at next (the position after its
// batch) in a log that ended at logEnd, with n records, and reports whether
// the fetch must be handed to Poll. The log end is stored before the batch
// is handed over (checkCaughtUp reads it after emitting the batch), and a
// fetch that moves it is handed over even without records or progress, so
// that Poll checks the catch-up again with the new evidence.
func (p *fetchPart) fetched(next, logEnd int64, n int) bool {
	moved := logEnd >= 0 && logEnd != p.sentLogEnd && p.track != nil
	if moved {
		p.sentLogEnd = logEnd
		p.track.logEnd.Store(logEnd)
	}
	return n > 0 || next > p.offset || moved
}

// fetcher places partitions on one worker per leader broker (a broker
// serves the requests of one connection one at a time, so one long-polling
// fetch per broker and reader) and moves them when leadership moves.
type fetcher[T any] struct {
	r        *reader[T]
	adm      *kadm.Client
	workers  map[int32]*fetchWorker
	relocate *partBox
	// nextSplit is the split id of the next discovered partition.
	nextSplit int
	known     map[topicPartition]bool
}

func (f *fetcher[T]) run(ctx context.Context, pending []*fetchPart) error {
	var discover <-chan time.Time
	if iv := f.r.opts.DiscoveryInterval; iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		discover = t.C
	}
	attempt := 0
	for {
		if len(pending) > 0 {
			var err error
			pending, err = f.place(ctx, pending)
			if err != nil {
				f.r.log.Warn("kafka: cannot find partition leaders; retrying", "err", err)
			}
		}
		var retry <-chan time.Time
		if len(pending) > 0 {
			attempt++
			retry = time.After(retryDelay(attempt))
		} else {
			attempt = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.relocate.note:
			pending = append(pending, f.relocate.take()...)
		case <-retry:
		case <-discover:
			found, err := f.discover(ctx)
			if err != nil {
				f.r.log.Warn("kafka: partition discovery failed; retrying at the next interval", "err", err)
			}
			pending = append(pending, found...)
		}
	}
}

// discover finds partitions (and, with a pattern, topics) created after the
// run started that this subtask owns (K13), announces them to Poll and
// returns them to be placed.
func (f *fetcher[T]) discover(ctx context.Context) ([]*fetchPart, error) {
	r := f.r
	if f.known == nil {
		f.known = map[topicPartition]bool{}
		for _, tp := range r.run.parts {
			f.known[tp] = true
		}
	}
	req := kmsg.NewPtrMetadataRequest()
	if r.run.re == nil {
		for _, t := range r.opts.Topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // every topic
	}
	rctx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	resp, err := req.RequestWith(rctx, r.cl)
	cancel()
	if err != nil {
		return nil, err
	}
	var found []*fetchPart
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		name := *t.Topic
		if r.run.re != nil && !r.run.topics[name] && (strings.HasPrefix(name, "__") || !r.run.re.MatchString(name)) {
			continue
		}
		for _, p := range t.Partitions {
			tp := topicPartition{name, p.Partition}
			if f.known[tp] {
				continue
			}
			f.known[tp] = true
			if discoveredOwner(name, p.Partition, r.run.par) != r.ctx.Subtask {
				continue
			}
			// A new partition starts at 0 (or, if retention already
			// removed records, at its log start: K7).
			fp := &fetchPart{split: f.nextSplit, topic: name, id: t.TopicID, partition: p.Partition}
			f.nextSplit++
			m := fetchMsg{discovered: &discovered{split: fp.split, topic: name, topicID: t.TopicID, partition: p.Partition}}
			if !f.send(ctx, m) {
				return nil, nil
			}
			found = append(found, fp)
		}
	}
	return found, nil
}

// discoveredOwner is the subtask that reads a partition discovered after
// the start: Flink's KafkaSourceEnumerator rule, which every subtask can
// compute alone and which spreads a topic's partitions over consecutive
// subtasks.
func discoveredOwner(topic string, partition int32, par int) int {
	start := int((int64(keygroup.HashString(topic))*31)&0x7FFFFFFF) % par
	return (start + int(partition)) % par
}

// place looks up the leaders of pending partitions and hands each to its
// leader's worker; it returns those it could not place.
func (f *fetcher[T]) place(ctx context.Context, pending []*fetchPart) ([]*fetchPart, error) {
	var topics []string
	seen := map[string]bool{}
	for _, p := range pending {
		if !seen[p.topic] {
			seen[p.topic] = true
			topics = append(topics, p.topic)
		}
	}
	// A fresh metadata request: kadm's Metadata answers from a cache
	// that may still show the leader that just refused us.
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, f.r.opts.RequestTimeout)
	resp, err := req.RequestWith(rctx, f.r.cl)
	cancel()
	if err != nil {
		return pending, err
	}
	type leader struct {
		id  int32
		tid [16]byte
		err error
	}
	leaders := map[topicPartition]leader{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		terr := kerr.ErrorForCode(t.ErrorCode)
		for _, p := range t.Partitions {
			err := terr
			if err == nil {
				err = kerr.ErrorForCode(p.ErrorCode)
			}
			leaders[topicPartition{*t.Topic, p.Partition}] = leader{p.Leader, t.TopicID, err}
		}
	}
	var left []*fetchPart
	var firstErr error
	for _, p := range pending {
		l, ok := leaders[topicPartition{p.topic, p.partition}]
		if !ok || l.err != nil || l.id < 0 {
			left = append(left, p)
			if firstErr == nil {
				firstErr = fmt.Errorf("%s[%d]: no leader (%v)", p.topic, p.partition, l.err)
			}
			continue
		}
		p.leader, p.id = l.id, l.tid
		w := f.workers[l.id]
		if w == nil {
			w = &fetchWorker{leader: l.id, add: newPartBox()}
			f.workers[l.id] = w
			f.r.wg.Add(1)
			go func() {
				defer f.r.wg.Done()
				if err := f.work(ctx, w); err != nil && ctx.Err() == nil {
					f.r.fail(err)
				}
			}()
		}
		w.add.put(p)
	}
	return left, firstErr
}

type fetchWorker struct {
	leader int32
	add    *partBox
	parts  []*fetchPart
}

// work fetches the partitions led by one broker until ctx ends.
func (f *fetcher[T]) work(ctx context.Context, w *fetchWorker) error {
	r := f.r
	iso := kgo.ReadUncommitted()
	var level int8
	if r.opts.ReadCommitted {
		iso, level = kgo.ReadCommitted(), 1
	}
	decomp := kgo.DefaultDecompressor()
	failures := 0
	for {
		// Take partitions handed to this worker.
		w.parts = append(w.parts, w.add.take()...)
		for len(w.parts) == 0 {
			select {
			case <-w.add.note:
				w.parts = append(w.parts, w.add.take()...)
			case <-ctx.Done():
				return nil
			}
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = int32(r.opts.FetchMaxWait.Milliseconds())
		req.MinBytes = 1
		req.MaxBytes = r.opts.FetchMaxBytes
		req.IsolationLevel = level
		req.SessionID = 0
		req.SessionEpoch = -1
		byTopic := map[string]int{}
		for _, p := range w.parts {
			i, ok := byTopic[p.topic]
			if !ok {
				i = len(req.Topics)
				byTopic[p.topic] = i
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = p.topic, p.id
				req.Topics = append(req.Topics, t)
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p.partition
			rp.FetchOffset = p.offset
			rp.CurrentLeaderEpoch = -1
			rp.LogStartOffset = -1
			rp.PartitionMaxBytes = r.opts.PartitionMaxBytes
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		kresp, err := r.cl.Broker(int(w.leader)).Request(ctx, req)
		if err == nil {
			if resp := kresp.(*kmsg.FetchResponse); resp.ErrorCode != 0 {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			if failures >= 3 {
				// The broker may be gone: find the leaders again.
				r.log.Warn("kafka: fetches from a broker keep failing; looking up partition leaders again", "broker", w.leader, "err", err)
				f.relocate.put(w.parts...)
				w.parts = nil
				failures = 0
				continue
			}
			if !sleepCtx(ctx, retryDelay(failures)) {
				return nil
			}
			continue
		}
		failures = 0
		resp := kresp.(*kmsg.FetchResponse)
		if err := f.handle(ctx, w, resp, iso, decomp); err != nil {
			return err
		}
	}
}

func (f *fetcher[T]) handle(ctx context.Context, w *fetchWorker, resp *kmsg.FetchResponse, iso kgo.IsolationLevel, decomp kgo.Decompressor) error {
	find := func(t *kmsg.FetchResponseTopic, partition int32) *fetchPart {
		for _, p := range w.parts {
			if p.partition == partition && (p.topic == t.Topic || (t.Topic == "" && p.id == t.TopicID)) {
				return p
			}
		}
		return nil
	}
	var moved []*fetchPart
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			rp := &t.Partitions[pi]
			p := find(t, rp.Partition)
			if p == nil {
				continue
			}
			switch err := kerr.ErrorForCode(rp.ErrorCode); {
			case err == nil:
				fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
					Offset: p.offset, IsolationLevel: iso, Topic: p.topic, Partition: p.partition,
					Pools: f.r.pools,
				}, rp, decomp, nil)
				if fp.Err != nil && len(fp.Records) == 0 {
					return fmt.Errorf("kafka: %s[%d] at offset %d: %w (the batch cannot be read; skip it by restarting from a later offset)", p.topic, p.partition, p.offset, fp.Err)
				}
				// Where the log ended when the broker answered: records
				// below it not in this batch are a backlog (K5).
				logEnd := rp.HighWatermark
				if f.r.opts.ReadCommitted && rp.LastStableOffset >= 0 {
					logEnd = rp.LastStableOffset
				}
				if !p.fetched(next, logEnd, len(fp.Records)) {
					continue
				}
				m := fetchMsg{split: p.split, records: fp.Records, next: max(next, p.offset)}
				p.offset = max(next, p.offset)
				if !f.send(ctx, m) {
					return nil
				}
			case errors.Is(err, kerr.OffsetOutOfRange):
				to, err := f.outOfRange(ctx, p, rp)
				if err != nil {
					return err
				}
				if to < 0 {
					continue // retried at the next fetch
				}
				m := fetchMsg{split: p.split, next: to, reset: true, from: p.offset}
				p.offset = to
				if !f.send(ctx, m) {
					return nil
				}
			case kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.InconsistentTopicID):
				// Leadership moved, the broker is not ready, or the topic
				// id is stale: look the partition up again.
				moved = append(moved, p)
			default:
				return fmt.Errorf("kafka: fetch %s[%d] at offset %d: %w", p.topic, p.partition, p.offset, err)
			}
		}
	}
	if len(moved) > 0 {
		keep := w.parts[:0]
		for _, p := range w.parts {
			found := false
			for _, m := range moved {
				if m == p {
					found = true
				}
			}
			if !found {
				keep = append(keep, p)
			}
		}
		w.parts = keep
		f.relocate.put(moved...)
		// Do not spin on a broker that refuses everything.
		if len(w.parts) == 0 {
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}
	return nil
}

// outOfRange finds where a partition whose fetch offset the broker does not
// have continues: at the log start if the offset was deleted (retention,
// DeleteRecords), at the end if it is past the end. It returns -1 to retry.
func (f *fetcher[T]) outOfRange(ctx context.Context, p *fetchPart, rp *kmsg.FetchResponseTopicPartition) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, f.r.opts.RequestTimeout)
	defer cancel()
	starts, err := f.adm.ListStartOffsets(rctx, p.topic)
	if err != nil {
		return -1, nil
	}
	var ends kadm.ListedOffsets
	if f.r.opts.ReadCommitted {
		ends, err = f.adm.ListCommittedOffsets(rctx, p.topic)
	} else {
		ends, err = f.adm.ListEndOffsets(rctx, p.topic)
	}
	if err != nil {
		return -1, nil
	}
	s, ok1 := starts.Lookup(p.topic, p.partition)
	e, ok2 := ends.Lookup(p.topic, p.partition)
	if !ok1 || !ok2 || s.Err != nil || e.Err != nil {
		return -1, nil
	}
	switch {
	case p.offset < s.Offset:
		return s.Offset, nil
	case p.offset > e.Offset:
		return e.Offset, nil
	default:
		return -1, nil // in range again (a race with the broker): refetch
	}
}

// send hands m to Poll, blocking while the reader's buffer is full
// (back-pressure).
func (f *fetcher[T]) send(ctx context.Context, m fetchMsg) bool {
	select {
	case f.r.msgs <- m:
		f.r.wake()
		return true
	case <-ctx.Done():
		return false
	}
}

// sleepCtx waits d, or until ctx is done (false). It waits on the system
// clock, not the job's: the waits are for a broker (a leader elected, a
// coordinator loaded), which a job's manual clock does not drive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	return retry.Sleep(ctx, clock.Real, d) == nil
}
