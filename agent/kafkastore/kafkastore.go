package kafkastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/internal/actionindex"
	"github.com/weirproject/weir/agent/internal/groupcommit"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/keygroup"
	"github.com/weirproject/weir/runtime"
)

// Options configure a store. Brokers and Topic are required.
type Options struct {
	// Brokers are the bootstrap servers (host:port).
	Brokers []string
	// Topic is the job's state topic, created if missing (KT7).
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
	// topic, listing offsets) and each fetch of a restore, and is how long
	// retriable errors (a leader election) are waited out, with back-off,
	// in a listing of offsets or a restore without progress before the
	// store gives up; 0 means 30 s.
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
		// The job's cancellation ends an open its brokers do not answer.
		octx, stop := ctx.JobContext()
		defer stop()
		return OpenContext(octx, o, rng, ctx.MaxParallelism)
	}
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
	// w is the group-commit writer (KT2): one produce round in
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

// Open connects to the cluster, makes sure the topic exists and is
// compacted, and returns the empty store of key groups rng (of
// maxParallelism); call Restore to rebuild it from a checkpoint's markers.
// It is OpenContext with a context that never ends: each request is still
// bounded by Options.RequestTimeout.
func Open(opts Options, rng keygroup.Range, maxParallelism int) (*Store, error) {
	return OpenContext(context.Background(), opts, rng, maxParallelism)
}

// OpenContext is Open that gives up, closing what it opened and returning
// an error wrapping ctx's, once ctx ends (a job cancelled while its
// brokers do not answer). Waits between tries run on the clock ctx
// carries (clock.FromContext).
func OpenContext(ctx context.Context, opts Options, rng keygroup.Range, maxParallelism int) (*Store, error) {
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
	if err := s.ensureTopic(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	s.first, s.last = s.partitionOf(rng.Start), s.partitionOf(rng.End)
	ends, err := s.listOffsets(ctx, false)
	if err != nil {
		cl.Close()
		return nil, err
	}
	s.end = ends
	s.w = groupcommit.New(&s.mu, (*flusher)(s), "kafkastore")
	return s, nil
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
