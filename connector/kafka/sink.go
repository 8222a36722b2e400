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
	// subtask s of parallelism p uses the transactional ids
	// "<prefix>-<p>-<s>-<n>", n = 0, 1, 2, ... (one per checkpoint). It
	// must be unique to the job: two jobs with one prefix fence each other.
	TransactionalIDPrefix string
	// TransactionTimeout is how long the broker keeps a transaction open;
	// it must cover the checkpoint interval plus a restart, or pre-committed
	// transactions are aborted by the broker before they can be committed
	// (the job then fails, saying so). Default 10 minutes; brokers cap it
	// at transaction.max.timeout.ms (15 minutes by default).
	TransactionTimeout time.Duration
	// FlushTimeout bounds a flush at a checkpoint or end of input; default
	// 1 minute.
	FlushTimeout time.Duration
	// ClientOptions are added to the producer clients (TLS, SASL, linger,
	// compression, ...).
	ClientOptions []kgo.Opt
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
	return o, nil
}

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
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
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
	// Parallelism, Subtask and Seq are the parts of the id.
	Parallelism int   `json:"parallelism"`
	Subtask     int   `json:"subtask"`
	Seq         int64 `json:"seq"`
	// ProducerID and Epoch identify the transaction on the broker; set at
	// pre-commit. With them any process can commit it (EndTxn).
	ProducerID int64 `json:"producerId"`
	Epoch      int16 `json:"epoch"`
	// Empty: no record was written; there is nothing to commit.
	Empty bool `json:"empty"`
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
func ExactlyOnceSink[T any](s weir.Stream[T], name string, opts SinkOptions[T]) weir.Stream[struct{}] {
	return weir.TwoPhaseCommit(s, name, func(ctx *runtime.Context) (weir.TwoPhaseCommitter[T, *Txn], error) {
		o, err := opts.withDefaults()
		if err != nil {
			return nil, err
		}
		if o.TransactionalIDPrefix == "" {
			return nil, errors.New("kafka: ExactlyOnceSink needs SinkOptions.TransactionalIDPrefix, unique to the job")
		}
		admin, err := kgo.NewClient(o.clientOpts()...)
		if err != nil {
			return nil, fmt.Errorf("kafka: sink client: %w", err)
		}
		return &txnSink[T]{opts: o, ctx: ctx, admin: admin, live: map[string]*liveTxn{}}, nil
	})
}

// txnSink is the TwoPhaseCommitter of one subtask.
type txnSink[T any] struct {
	opts  SinkOptions[T]
	ctx   *runtime.Context
	admin *kgo.Client // sends EndTxn for transactions of other processes
	live  map[string]*liveTxn
	next  int64 // next Seq to use
	// probedOwn: lingering transactions of this subtask's own id
	// sequence have been aborted.
	probedOwn bool
}

type liveTxn struct {
	cl      *kgo.Client
	errs    produceErr
	promise func(*kgo.Record, error)
	n       int64
}

func (s *txnSink[T]) id(par, sub int, seq int64) string {
	return fmt.Sprintf("%s-%d-%d-%d", s.opts.TransactionalIDPrefix, par, sub, seq)
}

func (s *txnSink[T]) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.FlushTimeout)
}

// Begin implements weir.TwoPhaseCommitter: a new producer with the next
// transactional id of this subtask.
func (s *txnSink[T]) Begin() (*Txn, error) {
	t := &Txn{Parallelism: s.ctx.Parallelism, Subtask: s.ctx.Subtask, Seq: s.next}
	t.TransactionalID = s.id(t.Parallelism, t.Subtask, t.Seq)
	s.next++
	cl, err := kgo.NewClient(s.opts.clientOpts(kgo.TransactionalID(t.TransactionalID),
		kgo.TransactionTimeout(s.opts.TransactionTimeout))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: transactional client %s: %w", t.TransactionalID, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: begin transaction %s: %w", t.TransactionalID, err)
	}
	lt := &liveTxn{cl: cl}
	lt.promise = func(r *kgo.Record, err error) {
		if err != nil {
			lt.errs.set(fmt.Errorf("kafka: produce to %s[%d] in transaction %s: %w", r.Topic, r.Partition, t.TransactionalID, err))
		}
	}
	s.live[t.TransactionalID] = lt
	return t, nil
}

// Write implements weir.TwoPhaseCommitter.
func (s *txnSink[T]) Write(t *Txn, r runtime.Record[T]) error {
	lt := s.live[t.TransactionalID]
	if lt == nil {
		return fmt.Errorf("kafka: write to transaction %s, which is not open", t.TransactionalID)
	}
	if err := lt.errs.get(); err != nil {
		return err
	}
	rec, err := toRecord(s.opts.Serialize, r)
	if err != nil {
		return err
	}
	lt.cl.Produce(context.Background(), rec, lt.promise)
	lt.n++
	return nil
}

// PreCommit implements weir.TwoPhaseCommitter: every record is
// acknowledged, and the producer id and epoch are recorded so that any
// process can commit the transaction.
func (s *txnSink[T]) PreCommit(t *Txn) error {
	lt := s.live[t.TransactionalID]
	if lt == nil {
		return fmt.Errorf("kafka: pre-commit of transaction %s, which is not open", t.TransactionalID)
	}
	if lt.n == 0 {
		t.Empty = true
		return nil
	}
	ctx, cancel := s.timeout()
	defer cancel()
	if err := lt.cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka: flush transaction %s: %w", t.TransactionalID, err)
	}
	if err := lt.errs.get(); err != nil {
		return err
	}
	pid, epoch, err := lt.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("kafka: producer id of transaction %s: %w", t.TransactionalID, err)
	}
	t.ProducerID, t.Epoch = pid, epoch
	return nil
}

// Commit implements weir.TwoPhaseCommitter. It is idempotent: committing a
// committed transaction again succeeds.
func (s *txnSink[T]) Commit(t *Txn) error {
	lt := s.live[t.TransactionalID]
	delete(s.live, t.TransactionalID)
	if lt != nil {
		defer lt.cl.Close()
	}
	if t.Empty {
		return nil
	}
	ctx, cancel := s.timeout()
	defer cancel()
	if lt != nil {
		if err := lt.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka: commit transaction %s: %w", t.TransactionalID, err)
		}
		return nil
	}
	return s.endTxn(ctx, t, true)
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
				"the broker aborted it (TransactionTimeout shorter than the time to recover?) or another producer took the id, "+
				"so the records of that checkpoint are not committed", t.TransactionalID, t.ProducerID, t.Epoch, err)
		case kerr.IsRetriable(err) || errors.Is(err, kerr.ConcurrentTransactions):
			if !sleepCtx(ctx, retryDelay(attempt)) {
				return fmt.Errorf("kafka: commit transaction %s: %w", t.TransactionalID, err)
			}
		default:
			return fmt.Errorf("kafka: commit transaction %s: %w", t.TransactionalID, err)
		}
	}
}

// Recover implements weir.TwoPhaseCommitter: it aborts the transaction
// that was open at the checkpoint and every later one of its sequence, up
// to the first id never used, by initializing a producer with each id
// (which fences and aborts what that id left open). On a fresh start (ok
// false) it does the same for this subtask's own sequence from 0.
func (s *txnSink[T]) Recover(open *Txn, ok bool) error {
	if ok && open != nil {
		if err := s.abortFrom(open.Parallelism, open.Subtask, open.Seq); err != nil {
			return err
		}
		if open.Parallelism == s.ctx.Parallelism && open.Subtask == s.ctx.Subtask {
			// Reuse the aborted ids from there.
			s.next = max(s.next, open.Seq)
			s.probedOwn = true
		}
	}
	if !s.probedOwn {
		// This subtask's own sequence: a run that failed before its
		// first checkpoint may have left transactions open.
		s.probedOwn = true
		return s.abortFrom(s.ctx.Parallelism, s.ctx.Subtask, s.next)
	}
	return nil
}

// abortFrom aborts whatever the transactional ids of one sequence left
// open, from seq on, up to the first id that was never used.
func (s *txnSink[T]) abortFrom(par, sub int, seq int64) error {
	for ; ; seq++ {
		id := s.id(par, sub, seq)
		cl, err := kgo.NewClient(s.opts.clientOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(s.opts.TransactionTimeout))...)
		if err != nil {
			return err
		}
		ctx, cancel := s.timeout()
		_, epoch, err := cl.ProducerID(ctx)
		cancel()
		cl.Close()
		if err != nil {
			return fmt.Errorf("kafka: abort lingering transaction %s: %w", id, err)
		}
		if epoch == 0 {
			// Never used before this call: nothing later was either.
			return nil
		}
	}
}

// Close releases the producers without ending their transactions: a
// pre-committed one is committed by the restored job (KS4).
func (s *txnSink[T]) Close() error {
	for id, lt := range s.live {
		lt.cl.Close()
		delete(s.live, id)
	}
	s.admin.Close()
	return nil
}
