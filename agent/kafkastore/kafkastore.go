// Package kafkastore is an action-state store (agent.ActionStateStore)
// kept in a compacted Kafka topic (after Flink Agents'
// KafkaActionStateStore): a job restored on another machine finds the
// states its actions recorded and does not repeat their side effects,
// which the embedded write-ahead log (package agent/wal), on one machine's
// disk, cannot promise. It works with any Kafka-protocol cluster, the
// embedded broker (package broker) included, through franz-go.
//
// # Layout
//
// One topic per job (Options.Topic), with cleanup.policy=compact. A
// record's key is the run's identity (agent.RunID.Encode), its value a
// binary encoding of the agent.ActionState (see codec.go; records of
// earlier versions hold its JSON, which is still read), or nothing (a
// tombstone) when the state was pruned or discarded. A header "kg" holds the key group (4 bytes, big
// endian) and, on states, a header "pos" the run's position (sequence
// number, event, action: 8 bytes big endian each), so that a restore skips
// the records of other key groups and indexes its own without decoding
// their values (a state is decoded when first asked for). Compaction keeps
// the latest record of every run and, after delete.retention.ms, drops the
// runs that were pruned.
//
// Records are partitioned by key group, in contiguous ranges: key group kg
// goes to partition kg × P / maxParallelism for a topic of P partitions
// (P ≤ maxParallelism; with more, key group kg goes to partition kg), the
// same rule that gives subtasks their key groups. A subtask therefore
// writes and reads only the partitions holding its own key groups: with P
// equal to the parallelism, one. Partitioning by a hash of the run identity
// would spread every subtask's states over every partition, and a restore
// of one subtask would read the whole topic. P must not change for the
// life of the topic (a restore refuses a marker taken with another P).
//
// The keyed tasks of a clustered job (package cluster) are separate jobs
// of parallelism 1, each one slice of the job's key groups
// (runtime.Config.Slice), and share the job's topic the same way: Factory
// opens each task's store on its slice's key groups
// (runtime.Context.OwnedKeyGroups), and a topic it creates has one
// partition per keyed task. So whichever process runs a keyed task, its
// store rebuilds, marks and prunes that task's key groups only, in that
// task's partition.
//
// # Guarantees
//
//  1. Durability. Put, DiscardFrom and Prune return once their records are
//     acknowledged by all in-sync replicas (acks=all) of an idempotent
//     producer: a retried request is not written twice, and the records of
//     one partition are written in the order the store handed them over.
//  2. Group commit. Writes queue into the current batch; one goroutine
//     hands a batch to the producer at once and waits for all its
//     acknowledgements, and the writes queued meanwhile form the next
//     batch. N actions completing together cost one produce round, not N
//     (Flink Agents flushes the producer after every write; the
//     benchmarks compare). PutQueued
//     (agent.Queuer) queues a state without waiting; its Pending's Wait
//     returns once it is acknowledged. One batch is in flight at a time
//     and a failed one fails every later one, so a record is durable only
//     once every earlier one is (the writer is agent/internal/groupcommit's,
//     invariants G1-G5).
//  3. Errors. A failed batch fails every write in it with the cause, and
//     every later write of the store fails with it too (the operator fails
//     the job), the batch queued while it was in flight included, which is
//     not produced; nothing is swallowed by a later success. Writes that the
//     cluster cannot take time out after Options.DeliveryTimeout.
//  4. Recovery marker (agent.Checkpointed). Marker returns, per partition
//     of the subtask's key groups, the lowest offset of a live state (not
//     pruned or discarded) or, when there is none, the end of the log as
//     last seen by the store; a Put in progress lands at or after it.
//  5. Restore. Restore lists the end offsets of the subtask's partitions
//     once, then reads every partition from the lowest offset the markers
//     give it until its position (the next offset to fetch, moved past
//     compaction gaps too) reaches that end; no duration takes part. It
//     keeps the records of the subtask's key groups, in log order, so a
//     tombstone removes the state before it. Without markers (the
//     operator's fresh start) it reads every partition from its start, so
//     a job that fails before its first checkpoint does not repeat what its
//     first run recorded; a store opened and never restored is empty.
//  6. Pruning. Prune and DiscardFrom remove from memory and write
//     tombstones for exactly the runs of the keys they name that match (a
//     key's runs up to a sequence number, or from a position on); other
//     keys' runs are never touched. The operator calls PruneCheckpoint
//     (Prune and a prune horizon, guarantee 8) in the background after a
//     checkpoint completes, off the action path.
//  7. Topic. Open creates the topic if it is missing, with
//     cleanup.policy=compact, and fails with an error saying what to do if
//     it cannot, or if an existing topic is not compacted.
//  8. Which checkpoints restore. PruneCheckpoint writes, with its
//     tombstones, a prune-horizon record (the checkpoint id) to each of
//     the subtask's partitions, keyed by the subtask's key groups;
//     Restore reads back the highest horizon its partitions hold from
//     stores whose key groups overlap its own (PruneHorizon), and the
//     operator refuses a checkpoint older than it. Horizons of other key
//     groups do not count: another slice of a clustered job numbers its
//     checkpoints apart. Restore checks the log against the
//     markers: a topic of another id (deleted and created again), a
//     partition ending before a marker's offset or starting after it
//     (records deleted) make it return, once it has rebuilt what there is,
//     an error wrapping agent.ErrStatesMissing.
//
// # Limits
//
// One state must fit in a record the topic accepts (max.message.bytes,
// about 1 MB by default); a larger one fails its Put, and the job.
//
// The store keeps the live states of its key groups in memory, as the WAL
// does. A restore loads the states of inputs that finished before the
// checkpoint but were not pruned yet; they go when their key's next input
// finishes (its prune covers every earlier sequence number).
package kafkastore

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/agent/internal/groupcommit"
	"github.com/weirproject/weir/internal/killpoint"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
)

// Options configure a store. Brokers and Topic are required.
type Options struct {
	// Brokers are the bootstrap servers (host:port).
	Brokers []string
	// Topic is the job's state topic, created if missing (guarantee 7).
	// Give every job its own.
	Topic string
	// Partitions is the partition count of a topic the store creates; 0
	// means the operator's parallelism (Factory) or 1 (Open).
	Partitions int32
	// ReplicationFactor of a topic the store creates; 0 means the
	// cluster's default.
	ReplicationFactor int16
	// DeliveryTimeout bounds how long a write may wait for the cluster
	// before it fails (and with it the job); 0 means two minutes.
	DeliveryTimeout time.Duration
	// RequestTimeout bounds each administrative request (creating the
	// topic, listing offsets) and each fetch of a restore; 0 means 30 s.
	RequestTimeout time.Duration
	// Security is TLS and SASL to the brokers (package kafkasec), applied
	// before the store's own options. The zero value is plaintext without
	// authentication.
	Security kafkasec.Security
	// ClientOptions are added to the franz-go client's after the store's
	// own: kgo.ProducerBatchCompression here compresses
	// the batches, which the store otherwise writes uncompressed.
	ClientOptions []kgo.Opt
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = 2 * time.Minute
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Factory returns an agent.StoreFactory opening a store on opts.Topic for
// each subtask of the operator, with the key groups whose keys can reach
// it (runtime.Context.OwnedKeyGroups: its own, narrowed to its slice when
// the job is one slice of a larger job, as a keyed task of package
// cluster is). A topic it creates gets, unless Options.Partitions, one
// partition per subtask of every slice (the parallelism times the slices,
// at most the key groups), so each subtask of a whole job, and each keyed
// task of a clustered job, writes and rebuilds its own partition.
func Factory(opts Options) agent.StoreFactory {
	return func(ctx *runtime.Context) (agent.ActionStateStore, error) {
		o := opts
		if o.Partitions <= 0 {
			o.Partitions = int32(min(max(ctx.Parallelism, 1)*max(ctx.Slices, 1), max(ctx.MaxParallelism, 1)))
		}
		if ctx.Logger != nil && o.Logger == nil {
			o.Logger = ctx.Logger
		}
		rng := ctx.OwnedKeyGroups()
		if rng.Empty() {
			return nil, fmt.Errorf("kafkastore: subtask %d of operator %q owns no key group of its job's slice %d of %d (key groups %v): run a sliced job's keyed operators at parallelism 1",
				ctx.Subtask, ctx.Name, ctx.Slice, ctx.Slices, ctx.KeyGroups)
		}
		return Open(o, rng, ctx.MaxParallelism)
	}
}

// kgHeader names the record header holding the key group (uint32 big
// endian); posHeader the one holding the run's position (sequence
// number, event and action, int64 big endian each); horizonHeader the
// one marking a prune-horizon record (the checkpoint id, int64 big
// endian; see guarantee 8).
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

// Store is the action-state store of one operator subtask.
type Store struct {
	opts  Options
	rng   keygroup.Range
	maxP  int
	cl    *kgo.Client
	adm   *kadm.Client
	parts int32 // the topic's partition count
	// topicID is the topic's id (fetch requests from version 13 on name
	// topics by id); set by topicMeta, used by Restore only.
	topicID [16]byte
	first   int32 // the subtask's partitions: first..last
	last    int32
	log     *slog.Logger

	outMu sync.Mutex
	free  []*outRec // records of acknowledged batches, for reuse

	// mu guards the fields below and the batch accumulating in w: a write
	// changes the index and queues its records in one critical section,
	// so memory and log see concurrent writes in the same order.
	mu sync.Mutex
	// idx holds the live states, by encoded key and record key (the
	// run's identity, agent.RunID.Encode).
	idx *actionindex.Index[string, *entry]
	end map[int32]int64 // per partition: the end of the log as last seen
	// horizon is the highest prune horizon recorded (PruneCheckpoint) or
	// read back (Restore).
	horizon int64
	// w is the group-commit writer (guarantee 2): one produce round in
	// flight, acknowledged in full before the next.
	w *groupcommit.Writer[batch]
	// hint is the size of the last batch flushed: the next is likely
	// about as large.
	hint int

	writes int64
	// coalesced counts Puts that took the place of an earlier state of
	// the same run in a batch not sent yet.
	coalesced int64
}

// entry is one live state. A restore fills key, pos and kg from the
// record's key and headers and keeps the value in raw; Get decodes it on
// first use, so a rebuild does not decode states nobody asks for.
type entry struct {
	id   string         // the record key (the run's identity)
	key  string         // the encoded key
	pos  agent.Position // the run's position
	kg   int
	st   *agent.ActionState // nil until decoded from raw
	raw  []byte
	part int32
	off  int64 // -1 until acknowledged
	// batch is the groupcommit.Batch.Seq of the batch holding the record
	// of a Put, and idx the record's place in it; 0 (no batch's) for
	// states read by a restore.
	batch int64
	idx   int
}

// state returns e's state, decoding it if needed (callers hold mu).
func (e *entry) state() (*agent.ActionState, error) {
	if e.st == nil {
		st, err := decodeState(e.raw)
		if err != nil {
			return nil, fmt.Errorf("kafkastore: the state recorded at offset %d of partition %d: %w", e.off, e.part, err)
		}
		e.st, e.raw = st, nil
	}
	return e.st, nil
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

// Open connects to the cluster, makes sure the topic exists and is
// compacted, and returns the empty store of key groups rng (of
// maxParallelism); call Restore to rebuild it from a checkpoint's markers.
func Open(opts Options, rng keygroup.Range, maxParallelism int) (*Store, error) {
	opts = opts.withDefaults()
	if len(opts.Brokers) == 0 || opts.Topic == "" {
		return nil, errors.New("kafkastore: Options.Brokers and Options.Topic are required")
	}
	if maxParallelism <= 0 || rng.Start < 0 || rng.End >= maxParallelism {
		return nil, fmt.Errorf("kafkastore: key groups %v outside max parallelism %d", rng, maxParallelism)
	}
	sec, err := opts.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("kafkastore: Options.Security: %w", err)
	}
	kopts := append(append(sec,
		kgo.SeedBrokers(opts.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(opts.DeliveryTimeout),
		// States are small and mostly distinct: compressing their
		// batches costs the producer and the broker more CPU than it
		// saves bytes.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	), opts.ClientOptions...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafkastore: creating the Kafka client: %w", err)
	}
	s := &Store{opts: opts, rng: rng, maxP: maxParallelism, cl: cl, adm: kadm.NewClient(cl), log: opts.Logger,
		idx: actionindex.New[string, *entry](), end: map[int32]int64{}}
	if err := s.ensureTopic(); err != nil {
		cl.Close()
		return nil, err
	}
	s.first, s.last = s.partitionOf(rng.Start), s.partitionOf(rng.End)
	ends, err := s.listOffsets(false)
	if err != nil {
		cl.Close()
		return nil, err
	}
	s.end = ends
	s.w = groupcommit.New(&s.mu, (*flusher)(s), "kafkastore")
	return s, nil
}

// partitionOf returns the partition of key group kg (see Layout).
func (s *Store) partitionOf(kg int) int32 {
	if int(s.parts) > s.maxP {
		return int32(kg)
	}
	return int32(kg * int(s.parts) / s.maxP)
}

func (s *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.RequestTimeout)
}

// topicMeta asks the cluster (not the client's cache, which would miss a
// topic created a moment ago) for the leader of every partition of the
// topic; it returns the topic's error code otherwise.
func (s *Store) topicMeta() (map[int32]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(s.opts.Topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := s.ctx()
	defer cancel()
	kresp, err := s.cl.Request(ctx, req)
	if err != nil {
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
// compacted (guarantee 7).
func (s *Store) ensureTopic() error {
	t := s.opts.Topic
	for attempt := 0; ; attempt++ {
		parts, err := s.topicMeta()
		if err == nil && len(parts) > 0 {
			s.parts = int32(len(parts))
			return s.checkCompacted()
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) {
			return fmt.Errorf("kafkastore: topic %q: %w", t, err)
		}
		if attempt > 0 {
			if attempt >= 100 {
				return fmt.Errorf("kafkastore: topic %q was created but the cluster's metadata does not show it", t)
			}
			time.Sleep(20 * time.Millisecond)
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
		ctx, cancel := s.ctx()
		_, err = s.adm.CreateTopic(ctx, n, rf, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, t)
		cancel()
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafkastore: creating topic %q (cleanup.policy=compact, %d partitions) failed; create it yourself or grant the CREATE permission: %w", t, n, err)
		}
	}
}

func (s *Store) checkCompacted() error {
	ctx, cancel := s.ctx()
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
func (s *Store) listOffsets(start bool) (map[int32]int64, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var lo kadm.ListedOffsets
	var err error
	what := "end"
	if start {
		what = "start"
		lo, err = s.adm.ListStartOffsets(ctx, s.opts.Topic)
	} else {
		lo, err = s.adm.ListEndOffsets(ctx, s.opts.Topic)
	}
	if err == nil {
		err = lo.Error()
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
// offsets Marker needs, guarantee 4) and keeps its records for reuse.
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
	if b.acked {
		// The client has called back for every record: it holds none.
		s.giveOut(b.outs...)
	}
	return err
}

// add puts e into memory, replacing the state of the same run (callers
// hold mu).
func (s *Store) add(e *entry) {
	s.idx.Put(bytesOf(e.key), e.id, actionindex.Position(e.pos), e)
}

// remove deletes run id of key from memory (callers hold mu). A record
// key that does not parse (keyIn "") may be a state's whose key came from
// its value: it is looked for among every key's runs.
func (s *Store) remove(key, id string) {
	if _, ok := s.idx.Remove(bytesOf(key), id); ok || key != "" {
		return
	}
	for k, r := range s.idx.All() {
		if r.ID == id {
			s.idx.Remove(bytesOf(k), id)
			return
		}
	}
}

// bytesOf returns the bytes of s without copying them: for the index's
// lookups, which neither keep nor modify them (Put copies the key).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Get implements agent.ActionStateStore.
func (s *Store) Get(id agent.RunID) (*agent.ActionState, error) {
	var buf [128]byte
	k := id.AppendEncode(buf[:0])
	s.mu.Lock()
	defer s.mu.Unlock()
	// The record key as a string over k: the index only compares it.
	if e, ok := s.idx.Get(id.Key, unsafe.String(unsafe.SliceData(k), len(k))); ok {
		return e.state()
	}
	return nil, nil
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

// keyIn returns the encoded key inside a record key (agent.RunID.Encode:
// a length-prefixed tag, then the length-prefixed key) as a substring of
// it, or "" when id is not one.
func keyIn(id string) string {
	rest := id
	var field string
	for range 2 { // the tag, then the key
		n, w := uvarintString(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			return ""
		}
		field, rest = rest[w:w+int(n)], rest[w+int(n):]
	}
	return field
}

// uvarintString is binary.Uvarint of a string's bytes.
func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
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

// Latest implements agent.ActionStateStore.
func (s *Store) Latest(key []byte) (agent.Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.idx.Latest(key)
	return agent.Position(p), ok
}

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

// DiscardFrom implements agent.ActionStateStore (guarantee 6).
func (s *Store) DiscardFrom(key []byte, pos agent.Position) error {
	return s.write(func() ([]*kgo.Record, []*entry) {
		var gone []*entry
		s.idx.DiscardFrom(key, actionindex.Position(pos), func(r actionindex.Run[string, *entry]) { gone = append(gone, r.V) })
		recs := s.tombstones(nil, gone)
		return recs, make([]*entry, len(recs))
	})
}

// Prune implements agent.ActionStateStore (guarantee 6).
func (s *Store) Prune(upTo []agent.KeySeq) error {
	return s.write(func() ([]*kgo.Record, []*entry) {
		recs := s.pruned(upTo)
		return recs, make([]*entry, len(recs))
	})
}

// PruneCheckpoint implements agent.Checkpointed (guarantee 8): Prune, with
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

// PruneHorizon implements agent.Checkpointed (guarantee 8).
func (s *Store) PruneHorizon() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.horizon
}

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

// Marker implements agent.Checkpointed (guarantee 4).
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

// Restore implements agent.Checkpointed (guarantees 5 and 8): it replaces
// the store's states with those its key groups have in the log from the
// markers on. Call it before any write.
func (s *Store) Restore(markers [][]byte) error {
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
	starts, err := s.listOffsets(true)
	if err != nil {
		return err
	}
	ends, err := s.listOffsets(false)
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
	n, err := s.read(pos, ends)
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
// number of records read.
func (s *Store) read(pos, ends map[int32]int64) (int, error) {
	n := 0
	decomp := kgo.DefaultDecompressor()
	failures := 0
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
		leaders, err := s.leaders()
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
			ctx, cancel := s.ctx()
			kresp, err := s.cl.Broker(int(leader)).Request(ctx, req)
			cancel()
			if err == nil {
				if resp := kresp.(*kmsg.FetchResponse); resp.ErrorCode != 0 {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
			}
			if err != nil {
				failures++
				if failures > 10 {
					return n, fmt.Errorf("kafkastore: fetching %s from broker %d: %w", s.opts.Topic, leader, err)
				}
				time.Sleep(time.Duration(failures) * 50 * time.Millisecond)
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
							failures++
							continue
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
			failures = 0
			continue
		}
		// A broker with records below the end returns at least one batch:
		// no progress is a failure, retried a few times.
		if failures++; failures > 10 {
			return n, fmt.Errorf("kafkastore: fetching %s makes no progress (positions %v, ends %v); check the brokers", s.opts.Topic, pos, ends)
		}
		time.Sleep(time.Duration(failures) * 50 * time.Millisecond)
	}
}

// leaders returns the leader broker of every partition of the topic.
func (s *Store) leaders() (map[int32]int32, error) {
	m, err := s.topicMeta()
	if err != nil {
		return nil, fmt.Errorf("kafkastore: finding the leaders of topic %q: %w", s.opts.Topic, err)
	}
	return m, nil
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

// Close waits for queued writes and closes the client. It returns the
// store's write error, if any.
func (s *Store) Close() error {
	return s.w.Close(func() error { s.cl.Close(); return nil })
}

// Stats reports the records written, the produce rounds they took and the
// live states.
func (s *Store) Stats() (writes, rounds int64, states int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.w.BatchesLocked(), s.idx.Len()
}

var (
	_ agent.ActionStateStore = (*Store)(nil)
	_ agent.Checkpointed     = (*Store)(nil)
)
