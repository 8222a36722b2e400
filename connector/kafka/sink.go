package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/internal/mutant"
	"github.com/weirproject/weir/runtime"
)

// SinkOptions configure Sink and ExactlyOnceSink. Brokers and Serialize are
// required.
type SinkOptions[T any] struct {
	// Brokers are the bootstrap servers.
	Brokers []string
	// Topic receives records whose Serialize leaves Record.Topic empty.
	Topic string
	// Serialize turns a value into a Kafka record: key, value, headers,
	// and optionally topic, partition and timestamp. A zero Timestamp is
	// replaced by the record's event time. An error fails the job.
	Serialize func(v T) (*kgo.Record, error)
	// TransactionalIDPrefix names the transactions of ExactlyOnceSink:
	// subtask s of parallelism p draws its transactional ids from the pool
	// "<prefix>-<p>-<s>-pool-<n>", n = 0, 1, ... (below
	// TransactionalIDPoolSize), and reuses them, producers open, from one
	// checkpoint to the next; while checkpoints complete in order a
	// subtask uses 3 or 4 ids. (Before the pool the ids were
	// "<prefix>-<p>-<s>-<n>", one per checkpoint; a restore from such a
	// checkpoint still aborts what they left open.) The prefix must be
	// unique to the job: two jobs with one prefix fence each other.
	TransactionalIDPrefix string
	// TransactionalIDPoolSize bounds the transactional ids of one subtask
	// of ExactlyOnceSink, which needs one for the open transaction, one
	// per pre-committed transaction waiting for its checkpoint to
	// complete, and one per committed transaction that the latest
	// completed checkpoint still lists. A subtask that needs more
	// (checkpoints keep failing or complete late) fails the job, saying
	// so. Each restore may add one id to the ids a subtask has used, never
	// beyond this bound. Default 16, at least 3.
	TransactionalIDPoolSize int
	// TransactionTimeout is how long the broker keeps a transaction open;
	// it must cover the checkpoint interval plus a restart, or pre-committed
	// transactions are aborted by the broker before they can be committed
	// (the job then fails, saying so). Default 10 minutes; brokers cap it
	// at transaction.max.timeout.ms (15 minutes by default).
	TransactionTimeout time.Duration
	// FlushTimeout bounds a flush at a checkpoint or end of input; default
	// 1 minute.
	FlushTimeout time.Duration
	// Security is TLS and SASL to the brokers (package kafkasec), applied
	// to every producer and admin client before ClientOptions. The zero
	// value is plaintext without authentication.
	Security Security
	// ClientOptions are added to the producer clients (linger,
	// compression, ...).
	ClientOptions []kgo.Opt

	secOpts []kgo.Opt // Security's options, made once by withDefaults
}

// validate checks the options as given (before defaults).
func (o SinkOptions[T]) validate() error {
	var errs []error
	if len(o.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: SinkOptions.Brokers is empty; give the bootstrap servers"))
	}
	if o.Serialize == nil {
		errs = append(errs, errors.New("kafka: SinkOptions.Serialize is nil; use SerializeJSON, SerializeString or your own function"))
	}
	if o.TransactionTimeout < 0 {
		errs = append(errs, fmt.Errorf("kafka: SinkOptions.TransactionTimeout %v: want 0 (meaning 10m) or a positive duration", o.TransactionTimeout))
	}
	if o.FlushTimeout < 0 {
		errs = append(errs, fmt.Errorf("kafka: SinkOptions.FlushTimeout %v: want 0 (meaning 1m) or a positive duration", o.FlushTimeout))
	}
	if err := o.Security.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("kafka: SinkOptions.Security: %w", err))
	}
	if o.TransactionalIDPoolSize < 0 || (o.TransactionalIDPoolSize > 0 && o.TransactionalIDPoolSize < minPoolSize) {
		errs = append(errs, fmt.Errorf("kafka: SinkOptions.TransactionalIDPoolSize %d is too small; give at least %d (0 means %d)",
			o.TransactionalIDPoolSize, minPoolSize, defaultPoolSize))
	}
	return errors.Join(errs...)
}

func (o SinkOptions[T]) withDefaults() (SinkOptions[T], error) {
	if err := o.validate(); err != nil {
		return o, err
	}
	if o.TransactionTimeout <= 0 {
		o.TransactionTimeout = 10 * time.Minute
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = time.Minute
	}
	sec, err := o.Security.Opts()
	if err != nil {
		return o, fmt.Errorf("kafka: SinkOptions.Security: %w", err)
	}
	o.secOpts = sec
	return o, nil
}

// defaultPoolSize is the default SinkOptions.TransactionalIDPoolSize.
const defaultPoolSize = 16

func (o SinkOptions[T]) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	var seeds []string
	for _, b := range o.Brokers {
		for _, x := range strings.Split(b, ",") {
			if x = strings.TrimSpace(x); x != "" {
				seeds = append(seeds, x)
			}
		}
	}
	// No RecordDeliveryTimeout: franz-go measures it from the record's
	// timestamp, which here is event time (possibly long past).
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, o.secOpts...)
	if o.Topic != "" {
		opts = append(opts, kgo.DefaultProduceTopic(o.Topic))
	}
	return append(append(opts, o.ClientOptions...), extra...)
}

// SerializeJSON returns a Serialize function that writes values as JSON,
// with key(v) as record key (key may be nil: no key).
func SerializeJSON[T any](key func(v T) []byte) func(T) (*kgo.Record, error) {
	return func(v T) (*kgo.Record, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		r := &kgo.Record{Value: b}
		if key != nil {
			r.Key = key(v)
		}
		return r, nil
	}
}

// SerializeString returns a Serialize function that writes strings as
// values, with key(v) as record key (key may be nil).
func SerializeString(key func(v string) []byte) func(string) (*kgo.Record, error) {
	return func(v string) (*kgo.Record, error) {
		r := &kgo.Record{Value: []byte(v)}
		if key != nil {
			r.Key = key(v)
		}
		return r, nil
	}
}

// toRecord serializes r and stamps the event time.
func toRecord[T any](ser func(T) (*kgo.Record, error), r runtime.Record[T]) (*kgo.Record, error) {
	rec, err := ser(r.Value)
	if err != nil {
		return nil, fmt.Errorf("kafka: serialize: %w", err)
	}
	if rec == nil {
		return nil, errors.New("kafka: Serialize returned a nil record")
	}
	if rec.Timestamp.IsZero() && r.Timestamp != runtime.NoTimestamp {
		rec.Timestamp = time.UnixMilli(r.Timestamp)
	}
	return rec, nil
}

// produceErr keeps the first asynchronous produce error.
type produceErr struct {
	mu  sync.Mutex
	err error
}

func (p *produceErr) set(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

func (p *produceErr) get() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Sink writes s to Kafka at least once (KS1, KS2 in the package
// documentation): records are produced asynchronously, and
// every checkpoint waits until all records before its barrier are
// acknowledged, so a restore from it loses nothing (records after it may be
// written twice).
func Sink[T any](s weir.Stream[T], name string, opts SinkOptions[T]) weir.Stream[struct{}] {
	return weir.Transform(s, name, func() runtime.OneInputOperator[T, struct{}] {
		return &sinkOp[T]{opts: opts}
	})
}

// Validate implements runtime.Validator: the job does not start with bad
// options.
func (o *sinkOp[T]) Validate() error { return o.opts.validate() }

type sinkOp[T any] struct {
	runtime.Base[struct{}]
	opts    SinkOptions[T]
	cl      *kgo.Client
	errs    produceErr
	promise func(*kgo.Record, error)
	written *runtime.Counter
}

func (o *sinkOp[T]) Open(ctx *runtime.Context, out runtime.Output[struct{}]) error {
	o.Base.Open(ctx, out)
	opts, err := o.opts.withDefaults()
	if err != nil {
		return err
	}
	o.opts = opts
	o.cl, err = kgo.NewClient(opts.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka: sink client: %w", err)
	}
	o.written = ctx.Counter("recordsWritten")
	o.promise = func(r *kgo.Record, err error) {
		if err != nil {
			o.errs.set(fmt.Errorf("kafka: produce to %s[%d]: %w", r.Topic, r.Partition, err))
		}
	}
	return nil
}

func (o *sinkOp[T]) ProcessRecord(r runtime.Record[T]) error {
	if err := o.errs.get(); err != nil {
		return err
	}
	rec, err := toRecord(o.opts.Serialize, r)
	if err != nil {
		return err
	}
	o.cl.Produce(context.Background(), rec, o.promise)
	o.written.Inc()
	return nil
}

func (o *sinkOp[T]) flush() error {
	ctx, cancel := context.WithTimeout(context.Background(), o.opts.FlushTimeout)
	defer cancel()
	if err := o.cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka: flush: %w (are the brokers %v reachable?)", err, o.opts.Brokers)
	}
	return o.errs.get()
}

// SnapshotState implements runtime.Snapshotter: the checkpoint waits for
// every record before it to be acknowledged (KS2).
func (o *sinkOp[T]) SnapshotState(*runtime.SnapshotWriter) error { return o.flush() }

func (o *sinkOp[T]) EndInput() error { return o.flush() }

func (o *sinkOp[T]) Close() error {
	if o.cl != nil {
		o.cl.Close()
	}
	return nil
}

// Txn is one transaction of ExactlyOnceSink, as stored in checkpoints.
type Txn struct {
	// TransactionalID of the producer that wrote it.
	TransactionalID string `json:"transactionalId"`
	// Parallelism, Subtask and Seq are the parts of the id: Seq is the
	// id's number in the subtask's pool. In checkpoints written before
	// the pool (Pool 0) it numbered the subtask's transactions instead.
	Parallelism int   `json:"parallelism"`
	Subtask     int   `json:"subtask"`
	Seq         int64 `json:"seq"`
	// ProducerID and Epoch identify the transaction on the broker; set at
	// pre-commit. With them any process can commit it (EndTxn).
	ProducerID int64 `json:"producerId"`
	Epoch      int16 `json:"epoch"`
	// Empty: no record was written; there is nothing to commit.
	Empty bool `json:"empty"`
	// Pool is how many ids of the subtask's pool had been used when the
	// transaction began (0 in checkpoints written before the pool).
	// Pending are the pool numbers of the transactions pre-committed and
	// not yet committed at that moment. For the transaction open at a
	// checkpoint they tell Recover which ids to fence: every id below
	// Pool (and any later one used since) but those in Pending, which the
	// restore commits.
	Pool    int   `json:"pool,omitempty"`
	Pending []int `json:"pending,omitempty"`
}

// ExactlyOnceSink writes s to Kafka in transactions through
// weir.TwoPhaseCommit: one transaction per checkpoint and subtask,
// pre-committed (flushed) at the checkpoint and committed when the
// checkpoint completes. Readers with read_committed isolation see each
// record once, after the checkpoint that covers it has completed.
//
// A pre-committed transaction is committed after a crash by the restored
// job, from the producer id and epoch stored in the checkpoint (an EndTxn
// request, as Flink's resumeTransaction does): franz-go's producer cannot
// resume another process's transaction, so the commit is sent at the
// protocol level. Transactions that were open at the crash are aborted on
// restore (KS5). Set the transactional-id prefix in opts.
//
// Each subtask reuses a small pool of transactional ids, and keeps their
// producers open (KS6): after a commit, the next transaction of the same
// producer has the same producer id, and on brokers without KIP-890 part 2
// the same epoch, so a restore that committed the old transaction again by
// EndTxn would commit the new one's records instead. An id therefore goes
// back to the pool only after a checkpoint or savepoint taken after the
// last one that listed its transaction as pending has completed
// (weir.TransactionReleaser); until then no transaction runs on it. Hence:
//
//   - A restore from the latest completed checkpoint or savepoint is always
//     safe: every id it lists as pending has been idle since.
//   - A restore from an older retained checkpoint b is exactly-once only if
//     the job never processed the completion of a checkpoint or savepoint
//     later than b (one completed on disk just before a crash is fine): then
//     no id b lists has been reused either. If it did, that later one
//     committed the output produced after b, which the restore repeats (as
//     without the pool), and in addition the ids b lists as pending may have
//     been reused: committing them again is refused by brokers with KIP-890
//     part 2 (Kafka 4 with transaction.version 2; the embedded broker), so
//     the restore fails, and on older brokers it may commit records of a
//     transaction of the failed run.
func ExactlyOnceSink[T any](s weir.Stream[T], name string, opts SinkOptions[T]) weir.Stream[struct{}] {
	check := func() error {
		if err := opts.validate(); err != nil {
			return err
		}
		if opts.TransactionalIDPrefix == "" {
			return errors.New("kafka: ExactlyOnceSink needs SinkOptions.TransactionalIDPrefix, unique to the job")
		}
		return nil
	}
	return weir.TwoPhaseCommitChecked(s, name, check, func(ctx *runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
		if err := check(); err != nil {
			return nil, err
		}
		o, err := opts.withDefaults()
		if err != nil {
			return nil, err
		}
		admin, err := kgo.NewClient(o.clientOpts()...)
		if err != nil {
			return nil, fmt.Errorf("kafka: sink client: %w", err)
		}
		return &txnSink[T]{opts: o, ctx: ctx, admin: admin}, nil
	})
}

// txnSink is the TwoPhaseCommitter of one subtask, with its pool of
// transactional ids: slot n holds id n of the subtask.
type txnSink[T any] struct {
	opts  SinkOptions[T]
	ctx   *runtime.Context
	admin *kgo.Client // sends EndTxn for transactions of other processes
	slots []*txnSlot  // the ids used so far
	// recovered: Recover has fenced this subtask's pool.
	recovered bool
}

type slotState uint8

const (
	slotFree slotState = iota
	// slotOpen: a transaction is open on the id.
	slotOpen
	// slotPreCommitted: flushed, waiting for its checkpoint to complete.
	slotPreCommitted
	// slotCommitted: committed, but a restore may commit it again (the
	// latest completed checkpoint lists it): it waits for Release.
	slotCommitted
)

// txnSlot is one transactional id of the pool and its producer.
type txnSlot struct {
	id    string
	cl    *kgo.Client // nil until the id is used in this process
	state slotState
	// txn is the transaction on the id (nil if free, or if it was
	// committed by a restore).
	txn     *Txn
	n       int64 // records written to txn
	errs    *produceErr
	promise func(*kgo.Record, error)
}

// minPoolSize is the least pool that serves checkpoints completing in
// order: one open transaction, one pre-committed, one committed that the
// latest checkpoint lists.
const minPoolSize = 3

func (s *txnSink[T]) poolSize() int {
	if s.opts.TransactionalIDPoolSize > 0 {
		return s.opts.TransactionalIDPoolSize
	}
	return defaultPoolSize
}

func (s *txnSink[T]) id(par, sub, n int) string {
	return fmt.Sprintf("%s-%d-%d-pool-%d", s.opts.TransactionalIDPrefix, par, sub, n)
}

// legacyID is the id of transaction seq of a subtask before the pool.
func (s *txnSink[T]) legacyID(par, sub int, seq int64) string {
	return fmt.Sprintf("%s-%d-%d-%d", s.opts.TransactionalIDPrefix, par, sub, seq)
}

func (s *txnSink[T]) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.FlushTimeout)
}

func (s *txnSink[T]) newProducer(id string) (*kgo.Client, error) {
	cl, err := kgo.NewClient(s.opts.clientOpts(kgo.TransactionalID(id),
		kgo.TransactionTimeout(s.opts.TransactionTimeout))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: transactional client %s: %w", id, err)
	}
	return cl, nil
}

// own returns the slot of this subtask's pool that holds t, or nil.
func (s *txnSink[T]) own(t *Txn) *txnSlot {
	if t == nil || t.Pool == 0 || t.Parallelism != s.ctx.Parallelism || t.Subtask != s.ctx.Subtask ||
		t.Seq < 0 || t.Seq >= int64(len(s.slots)) {
		return nil
	}
	if sl := s.slots[t.Seq]; sl.id == t.TransactionalID {
		return sl
	}
	return nil
}

// live returns the slot on which t runs in this process, or nil.
func (s *txnSink[T]) live(t *Txn) *txnSlot {
	if sl := s.own(t); sl != nil && sl.txn == t {
		return sl
	}
	return nil
}

// Begin implements weir.TwoPhaseCommitter: the lowest free id of the pool,
// its producer reused, or a new id if every one is busy.
func (s *txnSink[T]) Begin() (*Txn, error) {
	var sl *txnSlot
	n := 0
	for i, x := range s.slots {
		if x.state == slotFree {
			sl, n = x, i
			break
		}
	}
	if sl == nil {
		if len(s.slots) >= s.poolSize() {
			pre := 0
			for _, x := range s.slots {
				if x.state == slotPreCommitted {
					pre++
				}
			}
			return nil, fmt.Errorf("kafka: ExactlyOnceSink subtask %d has all %d transactional ids in use (%d transactions "+
				"pre-committed and waiting for their checkpoint to complete): checkpoints fail or complete late; "+
				"fix that, or raise SinkOptions.TransactionalIDPoolSize", s.ctx.Subtask, len(s.slots), pre)
		}
		n = len(s.slots)
		sl = &txnSlot{id: s.id(s.ctx.Parallelism, s.ctx.Subtask, n)}
		s.slots = append(s.slots, sl)
	}
	if sl.cl == nil {
		cl, err := s.newProducer(sl.id)
		if err != nil {
			return nil, err
		}
		sl.cl = cl
	}
	if err := sl.cl.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("kafka: begin transaction %s: %w", sl.id, err)
	}
	t := &Txn{TransactionalID: sl.id, Parallelism: s.ctx.Parallelism, Subtask: s.ctx.Subtask, Seq: int64(n),
		Pool: len(s.slots)}
	for i, x := range s.slots {
		if x.state == slotPreCommitted {
			t.Pending = append(t.Pending, i)
		}
	}
	errs := &produceErr{}
	sl.state, sl.txn, sl.n, sl.errs = slotOpen, t, 0, errs
	sl.promise = func(r *kgo.Record, err error) {
		if err != nil {
			errs.set(fmt.Errorf("kafka: produce to %s[%d] in transaction %s: %w", r.Topic, r.Partition, t.TransactionalID, err))
		}
	}
	return t, nil
}

// Write implements weir.TwoPhaseCommitter.
func (s *txnSink[T]) Write(t *Txn, r runtime.Record[T]) error {
	sl := s.live(t)
	if sl == nil || sl.state != slotOpen {
		return fmt.Errorf("kafka: write to transaction %s, which is not open", t.TransactionalID)
	}
	if err := sl.errs.get(); err != nil {
		return err
	}
	rec, err := toRecord(s.opts.Serialize, r)
	if err != nil {
		return err
	}
	sl.cl.Produce(context.Background(), rec, sl.promise)
	sl.n++
	return nil
}

// PreCommit implements weir.TwoPhaseCommitter: every record is
// acknowledged, and the producer id and epoch are recorded so that any
// process can commit the transaction. An empty transaction frees its id at
// once: nothing will commit it.
func (s *txnSink[T]) PreCommit(t *Txn) error {
	sl := s.live(t)
	if sl == nil || sl.state != slotOpen {
		return fmt.Errorf("kafka: pre-commit of transaction %s, which is not open", t.TransactionalID)
	}
	ctx, cancel := s.timeout()
	defer cancel()
	if sl.n == 0 {
		t.Empty = true
		// Nothing was produced: franz-go ends the transaction without a
		// request.
		if err := sl.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return fmt.Errorf("kafka: end empty transaction %s: %w", t.TransactionalID, err)
		}
		sl.state, sl.txn = slotFree, nil
		return nil
	}
	if err := sl.cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka: flush transaction %s: %w", t.TransactionalID, err)
	}
	if err := sl.errs.get(); err != nil {
		return err
	}
	pid, epoch, err := sl.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("kafka: producer id of transaction %s: %w", t.TransactionalID, err)
	}
	t.ProducerID, t.Epoch = pid, epoch
	sl.state = slotPreCommitted
	if mutant.On(mutant.KafkaCommitAtPreCommit) {
		if err := sl.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka: commit transaction %s: %w", t.TransactionalID, err)
		}
		sl.state = slotCommitted
	}
	return nil
}

// Commit implements weir.TwoPhaseCommitter. It is idempotent: committing a
// committed transaction again succeeds. The id stays busy until Release.
func (s *txnSink[T]) Commit(t *Txn) error {
	if t.Empty {
		return nil
	}
	ctx, cancel := s.timeout()
	defer cancel()
	if sl := s.live(t); sl != nil {
		switch sl.state {
		case slotCommitted:
			return nil
		case slotPreCommitted:
			if err := sl.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				if mutant.On(mutant.KafkaCommitUnknownAsDone) {
					if _, answered := errors.AsType[*kerr.Error](err); !answered {
						sl.state = slotCommitted
						return nil
					}
				}
				return fmt.Errorf("kafka: commit transaction %s: %w", t.TransactionalID, err)
			}
			sl.state = slotCommitted
			return nil
		default:
			return fmt.Errorf("kafka: commit of transaction %s, which was not pre-committed", t.TransactionalID)
		}
	}
	return s.endTxn(ctx, t, true)
}

// Release implements weir.TransactionReleaser: t's id goes back to the
// pool, since no restore from the latest completed checkpoint commits t
// again.
func (s *txnSink[T]) Release(t *Txn) error {
	if t.Empty {
		return nil
	}
	// sl.txn is nil for a transaction committed by the restore.
	if sl := s.own(t); sl != nil && sl.state == slotCommitted && (sl.txn == t || sl.txn == nil) {
		sl.state, sl.txn = slotFree, nil
	}
	return nil
}

// endTxn ends another process's transaction by its producer id and epoch.
func (s *txnSink[T]) endTxn(ctx context.Context, t *Txn, commit bool) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = t.TransactionalID
	req.ProducerID = t.ProducerID
	req.ProducerEpoch = t.Epoch
	req.Commit = commit
	for attempt := 1; ; attempt++ {
		resp, err := req.RequestWith(ctx, s.admin)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
			errors.Is(err, kerr.InvalidTxnState), errors.Is(err, kerr.InvalidProducerIDMapping):
			return fmt.Errorf("kafka: commit of pre-committed transaction %s (producer %d, epoch %d) refused: %w; "+
				"the broker aborted it (TransactionTimeout shorter than the time to recover?), another producer took the id, "+
				"or the job restored a checkpoint older than the latest completed one after the id was reused; "+
				"the records of that checkpoint are not committed", t.TransactionalID, t.ProducerID, t.Epoch, err)
		case kerr.IsRetriable(err) || errors.Is(err, kerr.ConcurrentTransactions):
			if !sleepCtx(ctx, retryDelay(attempt)) {
				return fmt.Errorf("kafka: commit transaction %s: %w", t.TransactionalID, err)
			}
		default:
			return fmt.Errorf("kafka: commit transaction %s: %w", t.TransactionalID, err)
		}
	}
}

// Recover implements weir.TwoPhaseCommitter. Any id of a pool may hold a
// transaction the failed run left open, so it fences (initializes a
// producer with, which aborts what the id left open) every id of the pool
// of the open transaction's subtask below its Pool, and every later one up
// to the first that was never used (ids are first used in order), except
// the ids in its Pending: the restore has just committed those, and must
// be able to commit them again if it fails before its first checkpoint.
// For this subtask's own pool the fenced ids, producers open, become the
// pool, and the Pending ones rejoin it at Release. On a fresh start (ok
// false), and on a restore at another parallelism, this subtask's ids are
// fenced from 0 on. A checkpoint written before the pool names its
// transactions by a sequence: its open transaction and every later one of
// that sequence, up to the first id never used, are fenced.
func (s *txnSink[T]) Recover(open *Txn, ok bool) error {
	if ok && open != nil {
		own := open.Parallelism == s.ctx.Parallelism && open.Subtask == s.ctx.Subtask
		switch {
		case open.Pool == 0:
			if err := s.fenceLegacy(open.Parallelism, open.Subtask, open.Seq); err != nil {
				return err
			}
		case own && s.recovered:
			return fmt.Errorf("kafka: subtask %d restored a second open transaction of its own (%s); "+
				"the checkpoint does not come from ExactlyOnceSink", s.ctx.Subtask, open.TransactionalID)
		case own:
			s.recovered = true
			return s.fencePool(open, true)
		default:
			if err := s.fencePool(open, false); err != nil {
				return err
			}
		}
	}
	if !s.recovered {
		s.recovered = true
		return s.fencePool(&Txn{Parallelism: s.ctx.Parallelism, Subtask: s.ctx.Subtask}, true)
	}
	return nil
}

// fencePool fences the ids of open's pool (see Recover). With keep (this
// subtask's pool) the producers become the pool's.
func (s *txnSink[T]) fencePool(open *Txn, keep bool) error {
	skip := map[int]bool{}
	for _, n := range open.Pending {
		skip[n] = true
	}
	limit := max(open.Pool, s.poolSize())
	for n := 0; n < limit; n++ {
		id := s.id(open.Parallelism, open.Subtask, n)
		if skip[n] {
			if keep {
				// Committed by the restore; free at Release.
				s.slots = append(s.slots, &txnSlot{id: id, state: slotCommitted})
			}
			continue
		}
		cl, epoch, err := s.fence(id)
		if err != nil {
			return err
		}
		if keep {
			s.slots = append(s.slots, &txnSlot{id: id, cl: cl})
		} else {
			cl.Close()
		}
		if n >= open.Pool && epoch == 0 {
			// Never used before this call: nothing later was either.
			return nil
		}
	}
	return nil
}

// fence initializes a producer with id, which aborts what the id left open,
// and returns it with its epoch (0: the id was never used).
func (s *txnSink[T]) fence(id string) (*kgo.Client, int16, error) {
	cl, err := s.newProducer(id)
	if err != nil {
		return nil, 0, err
	}
	// The open ends with the job: a cancelled job (a clustered member
	// stopping the tasks of a lost session, say) must not wait out
	// FlushTimeout for a broker that does not answer.
	jctx, stop := s.ctx.JobContext()
	defer stop()
	ctx, cancel := context.WithTimeout(jctx, s.opts.FlushTimeout)
	defer cancel()
	_, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		cl.Close()
		return nil, 0, fmt.Errorf("kafka: abort lingering transaction %s: %w (are the brokers %v reachable?)", id, err, s.opts.Brokers)
	}
	return cl, epoch, nil
}

// fenceLegacy fences the ids of a sequence of a checkpoint written before
// the pool, from seq on, up to the first id that was never used.
func (s *txnSink[T]) fenceLegacy(par, sub int, seq int64) error {
	for ; ; seq++ {
		cl, epoch, err := s.fence(s.legacyID(par, sub, seq))
		if err != nil {
			return err
		}
		cl.Close()
		if epoch == 0 {
			return nil
		}
	}
}

// Close releases the producers without ending their transactions: a
// pre-committed one is committed by the restored job (KS4).
func (s *txnSink[T]) Close() error {
	for _, sl := range s.slots {
		if sl.cl != nil {
			sl.cl.Close()
			sl.cl = nil
		}
	}
	s.admin.Close()
	return nil
}
