package kafkastore

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/agent/internal/groupcommit"
	"github.com/weirproject/weir/keygroup"
)

// kgHeader names the record header holding the key group (uint32 big
// endian); posHeader the one holding the run's position (sequence
// number, event and action, int64 big endian each); horizonHeader the
// one marking a prune-horizon record (the checkpoint id, int64 big
// endian; see KT8).
const (
	kgHeader      = "kg"
	posHeader     = "pos"
	horizonHeader = "horizon"
)

func appendPos(b []byte, p agent.Position) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(p.Seq))
	b = binary.BigEndian.AppendUint64(b, uint64(p.EventID))
	return binary.BigEndian.AppendUint64(b, uint64(p.Action))
}

// outRec is a record of a state, with its headers and the bytes of its
// key, value and header values in one buffer; a batch acknowledged in
// full hands its outRecs back to the store for the next writes.
type outRec struct {
	rec kgo.Record
	hdr [2]kgo.RecordHeader
	buf []byte
}

// batch is the records of one produce round.
type batch struct {
	recs    []*kgo.Record
	entries []*entry  // per record: the state it writes, nil for a tombstone
	outs    []*outRec // the records of Put, to reuse once acknowledged
	// acked says the client has called back for every record: it holds
	// none of outs any more (set by Flush).
	acked bool
}

func (s *Store) record(key []byte, kg int, value []byte) *kgo.Record {
	r := &kgo.Record{Topic: s.opts.Topic, Partition: s.partitionOf(kg), Key: key, Value: value,
		Headers: []kgo.RecordHeader{{Key: kgHeader, Value: binary.BigEndian.AppendUint32(nil, uint32(kg))}}}
	return r
}

// write queues records (apply changes memory, under the lock, and returns
// the records with their entries) and waits until they are acknowledged.
func (s *Store) write(apply func() ([]*kgo.Record, []*entry)) error {
	s.mu.Lock()
	if err := s.w.ErrLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	recs, ents := apply()
	if len(recs) == 0 {
		s.mu.Unlock()
		return nil
	}
	b := s.w.QueueLocked()
	s.sizeLocked(&b.Data)
	b.Data.recs = append(b.Data.recs, recs...)
	b.Data.entries = append(b.Data.entries, ents...)
	s.writes += int64(len(recs))
	s.mu.Unlock()
	s.w.Wake()
	return b.Wait()
}

// sizeLocked gives a new batch room for about as many records as the
// last one flushed (callers hold mu).
func (s *Store) sizeLocked(b *batch) {
	if b.recs == nil && s.hint > 0 {
		b.recs = make([]*kgo.Record, 0, s.hint)
		b.entries = make([]*entry, 0, s.hint)
		b.outs = make([]*outRec, 0, s.hint)
	}
}

// flusher produces the store's batches for its group-commit writer (a
// type of its own, so that Flush is not in Store's API).
//
// One batch in flight makes batches as large as the concurrency allows: a
// broker handles the requests of one connection one after the other, so a
// second batch in flight would only wait behind the first and split the
// writers into smaller batches (with a millisecond of broker latency, two
// in flight gave a third of the throughput).
type flusher Store

// Flush produces the batch's records and waits for their
// acknowledgements. A batch the client holds beyond DeliveryTimeout fails
// (an idempotent producer keeps retrying a request whose fate it does not
// know).
func (f *flusher) Flush(b *batch) error {
	s := (*Store)(f)
	deadline := time.Now().Add(s.opts.DeliveryTimeout + time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.DeliveryTimeout)
	defer cancel()
	acked := make(chan struct{})
	var mu sync.Mutex
	var perr error
	left := len(b.recs)
	promise := func(r *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && perr == nil {
			perr = fmt.Errorf("kafkastore: writing to %s[%d]: %w (the action-state store cannot record; check the cluster and the topic)", s.opts.Topic, r.Partition, err)
		}
		if left--; left == 0 {
			close(acked)
		}
	}
	for _, r := range b.recs {
		s.cl.Produce(ctx, r, promise)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-acked:
		b.acked = true
		mu.Lock()
		defer mu.Unlock()
		return perr
	case <-t.C:
		return fmt.Errorf("kafkastore: the cluster did not acknowledge %d records to topic %s within Options.DeliveryTimeout (%v); whether they were written is unknown; check the brokers", len(b.recs), s.opts.Topic, s.opts.DeliveryTimeout)
	}
}

// FlushedLocked records where an acknowledged batch's records landed (the
// offsets Marker needs, KT4) and keeps its records for reuse.
func (f *flusher) FlushedLocked(b *batch, err error) error {
	s := (*Store)(f)
	s.hint = len(b.recs)
	if err == nil {
		for i, r := range b.recs {
			if e := b.entries[i]; e != nil {
				e.off = r.Offset
			}
			if r.Offset+1 > s.end[r.Partition] {
				s.end[r.Partition] = r.Offset + 1
			}
		}
	}
	return err
}

// Released keeps an acknowledged batch's records for reuse, once its
// writers are released (outside mu: queuing writers do not wait for it).
func (f *flusher) Released(b *batch) {
	if b.acked {
		// The client has called back for every record: it holds none.
		(*Store)(f).giveOut(b.outs...)
	}
}

// Put implements agent.ActionStateStore. The state must not be modified
// after the call.
func (s *Store) Put(st *agent.ActionState) error {
	b, err := s.queuePut(st)
	if err != nil {
		return err
	}
	s.w.Wake()
	return b.Wait()
}

// PutQueued implements agent.Queuer: Put without waiting for the
// acknowledgement. The state must not be modified after the call.
func (s *Store) PutQueued(st *agent.ActionState) (agent.Pending, error) {
	b, err := s.queuePut(st)
	if err != nil {
		return nil, err
	}
	s.w.Wake()
	return b, nil
}

// queuePut puts st into memory and its record into the current batch,
// which it returns.
func (s *Store) queuePut(st *agent.ActionState) (*groupcommit.Batch[batch], error) {
	if !s.rng.Contains(st.KeyGroup) {
		return nil, fmt.Errorf("kafkastore: state of key group %d put into the store of key groups %v (in a clustered job, key the agent by the job's key)", st.KeyGroup, s.rng)
	}
	o := s.takeOut()
	// One buffer: the value, then the key, then the header values.
	b, err := appendState(o.buf[:0], st)
	if err != nil {
		s.giveOut(o)
		return nil, fmt.Errorf("kafkastore: %w", err)
	}
	nv := len(b)
	b = st.ID.AppendEncode(b)
	nk := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(st.KeyGroup))
	b = appendPos(b, st.Pos)
	o.buf = b
	// The run's identity as a map key, and the key's bytes within it.
	id := string(b[nv:nk])
	part := s.partitionOf(st.KeyGroup)
	o.hdr = [2]kgo.RecordHeader{{Key: kgHeader, Value: b[nk : nk+4 : nk+4]}, {Key: posHeader, Value: b[nk+4:]}}
	o.rec = kgo.Record{Topic: s.opts.Topic, Partition: part, Key: b[nv:nk:nk], Value: b[:nv:nv], Headers: o.hdr[:]}
	key := keyIn(id)
	if key == "" && len(st.ID.Key) > 0 {
		key = string(st.ID.Key)
	}
	e := &entry{id: id, key: key, pos: st.Pos, kg: st.KeyGroup, st: st, part: part, off: -1}
	s.mu.Lock()
	if err := s.w.ErrLocked(); err != nil {
		s.mu.Unlock()
		s.giveOut(o)
		return nil, err
	}
	gb := s.w.QueueLocked()
	s.sizeLocked(&gb.Data)
	bt := &gb.Data
	e.batch = gb.Seq()
	if prev, ok := s.idx.Get(st.ID.Key, id); ok && prev.batch == e.batch && prev.pos == e.pos {
		// The run's earlier state (a call's record) has not been sent
		// yet: this one, which supersedes it, takes its place in the
		// batch, and the batch writes one record of the run, not two.
		// The earlier state's writer waits for the same batch.
		e.idx = prev.idx
		bt.recs[e.idx] = &o.rec
		bt.entries[e.idx] = e
		s.coalesced++
	} else {
		e.idx = len(bt.recs)
		bt.recs = append(bt.recs, &o.rec)
		bt.entries = append(bt.entries, e)
		s.writes++
	}
	// The earlier state's outRec, if replaced, is handed back with the
	// batch's: the client never saw it.
	bt.outs = append(bt.outs, o)
	s.add(e)
	s.mu.Unlock()
	return gb, nil
}

// takeOut returns a record to fill, reused from an acknowledged batch when
// there is one.
func (s *Store) takeOut() *outRec {
	s.outMu.Lock()
	if n := len(s.free); n > 0 {
		o := s.free[n-1]
		s.free = s.free[:n-1]
		s.outMu.Unlock()
		return o
	}
	s.outMu.Unlock()
	return &outRec{buf: make([]byte, 0, 256)}
}

// giveOut keeps records for reuse, up to a bound.
func (s *Store) giveOut(os ...*outRec) {
	s.outMu.Lock()
	for _, o := range os {
		if len(s.free) >= maxFree {
			break
		}
		if cap(o.buf) > 64<<10 {
			continue // let an unusually large buffer go
		}
		o.rec = kgo.Record{}
		s.free = append(s.free, o)
	}
	s.outMu.Unlock()
}

// maxFree bounds the records kept for reuse.
const maxFree = 4096

// tombstones returns the tombstones of the runs the index removed, in the
// order of their record keys (deterministic records; callers hold mu).
func (s *Store) tombstones(recs []*kgo.Record, gone []*entry) []*kgo.Record {
	slices.SortFunc(gone, func(a, b *entry) int { return strings.Compare(a.id, b.id) })
	for _, e := range gone {
		recs = append(recs, s.record([]byte(e.id), e.kg, nil))
	}
	return recs
}

// pruned removes the runs of upTo's keys up to their sequence numbers and
// returns their tombstones (callers hold mu).
func (s *Store) pruned(upTo []agent.KeySeq) []*kgo.Record {
	var recs []*kgo.Record
	var gone []*entry
	collect := func(r actionindex.Run[string, *entry]) { gone = append(gone, r.V) }
	for _, ks := range upTo {
		gone = gone[:0]
		s.idx.Prune(ks.Key, ks.Seq, collect)
		recs = s.tombstones(recs, gone)
	}
	return recs
}

// DiscardFrom implements agent.ActionStateStore (KT6).
func (s *Store) DiscardFrom(key []byte, pos agent.Position) error {
	return s.write(func() ([]*kgo.Record, []*entry) {
		var gone []*entry
		s.idx.DiscardFrom(key, actionindex.Position(pos), func(r actionindex.Run[string, *entry]) { gone = append(gone, r.V) })
		recs := s.tombstones(nil, gone)
		return recs, make([]*entry, len(recs))
	})
}

// Prune implements agent.ActionStateStore (KT6).
func (s *Store) Prune(upTo []agent.KeySeq) error {
	return s.write(func() ([]*kgo.Record, []*entry) {
		recs := s.pruned(upTo)
		return recs, make([]*entry, len(recs))
	})
}

// PruneCheckpoint implements agent.Checkpointed (KT8): Prune, with
// a prune-horizon record in each of the subtask's partitions in the same
// batch.
func (s *Store) PruneCheckpoint(checkpoint int64, upTo []agent.KeySeq) error {
	return s.write(func() ([]*kgo.Record, []*entry) {
		recs := s.pruned(upTo)
		if checkpoint > s.horizon {
			s.horizon = checkpoint
			for p := s.first; p <= s.last; p++ {
				recs = append(recs, &kgo.Record{Topic: s.opts.Topic, Partition: p, Key: horizonKey(s.rng, p),
					Value:   binary.BigEndian.AppendUint64(nil, uint64(checkpoint)),
					Headers: []kgo.RecordHeader{{Key: horizonHeader, Value: binary.BigEndian.AppendUint64(nil, uint64(checkpoint))}}})
			}
		}
		return recs, make([]*entry, len(recs))
	})
}

// horizonKey is the record key of the prune horizon of the store of key
// groups rng in partition p; compaction keeps the latest of each.
func horizonKey(rng keygroup.Range, p int32) []byte {
	return fmt.Appendf(nil, "%s%d-%d/%d", horizonPrefix, rng.Start, rng.End, p)
}

const horizonPrefix = "weir.prune-horizon/"

// horizonRange returns the key groups of the store that wrote the
// prune-horizon record of key k (horizonKey), ok false when k is not one.
func horizonRange(k []byte) (keygroup.Range, bool) {
	rest, ok := strings.CutPrefix(string(k), horizonPrefix)
	if !ok {
		return keygroup.Range{}, false
	}
	rs, _, ok := strings.Cut(rest, "/")
	a, b, ok2 := strings.Cut(rs, "-")
	start, err1 := strconv.Atoi(a)
	end, err2 := strconv.Atoi(b)
	if !ok || !ok2 || err1 != nil || err2 != nil || end < start {
		return keygroup.Range{}, false
	}
	return keygroup.Range{Start: start, End: end}, true
}

// PruneHorizon implements agent.Checkpointed (KT8).
func (s *Store) PruneHorizon() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.horizon
}
