package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/kafkasec"
)

// DefaultTopic is the topic schemas are stored in when Config.Topic is
// empty, Confluent's default.
const DefaultTopic = "_schemas"

// Config configures Start. Brokers is required; every other field works at
// its zero value.
type Config struct {
	// Brokers are the bootstrap servers of the cluster holding Topic.
	Brokers []string
	// Security is how the registry's Kafka client connects (TLS, SASL).
	// The zero value is plaintext without authentication.
	Security kafkasec.Security
	// Topic holds the schemas (created compacted with one partition when
	// missing). Empty means "_schemas".
	Topic string
	// Users, when not empty, requires HTTP basic authentication with one
	// of these user -> password pairs on every request. Empty means no
	// authentication.
	Users map[string]string
	// Logger receives records of the topic that cannot be read and fetch
	// errors. nil means none.
	Logger *slog.Logger
	// WriteTimeout bounds how long a registration, deletion or config
	// change waits for its record to be acknowledged and read back. 0
	// means 30s.
	WriteTimeout time.Duration
}

func (c *Config) validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("schemaregistry: Config.Brokers is empty; want the bootstrap servers (host:port) of the cluster holding the schemas topic"))
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("schemaregistry: Config.WriteTimeout %v is negative; want 0 (30s) or more", c.WriteTimeout))
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	for u := range c.Users {
		if u == "" {
			errs = append(errs, errors.New("schemaregistry: Config.Users has an empty user name"))
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return errors.Join(errs...)
}

// Server is a running registry: the state read from the topic, the
// goroutine that keeps reading it, and the REST API over it.
//
// Writes (register, delete, config) go through the topic, one at a time
// (writeMu):
//
//	lock writeMu
//	decide from the state (read under mu): the id, the version, the error
//	produce the record, acknowledged by all in-sync replicas
//	wait until the reader goroutine has applied the record's offset
//	answer from the state
//	unlock writeMu
//
// Applying only what is read back (never the request directly) makes the
// in-memory state the replay of the topic at every moment (I1): a restart
// that replays the topic gets the same ids, versions and levels, and a
// record that reached the topic but whose request timed out is still
// applied, as it will be after a restart. writeMu makes each decision see
// every earlier write (I4).
type Server struct {
	cfg     Config
	cl      *kgo.Client
	handler http.Handler

	writeMu sync.Mutex // held across decide-produce-apply of one write

	mu struct {
		sync.RWMutex
		st       *state
		applied  int64         // offset of the next record to apply
		advanced chan struct{} // closed and replaced when applied moves
	}

	// cache holds parsed stored schemas by id, for compatibility checks;
	// filled under mu held for reading, so it has its own lock.
	cache struct {
		sync.Mutex
		parsed map[int]*parsed
	}

	cancel context.CancelFunc
	done   chan struct{} // closed when the reader goroutine has returned
}

// Start connects to the brokers, creates the topic if missing (compacted,
// one partition), reads it to its end and returns a server whose Handler
// serves the API. Reading to the end is by offset, not by time (I5): a
// NOOP record is produced and the state is ready once the reader applied
// it, as Confluent's registry does at start. ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.Security.Opts()
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.FetchMaxWait(time.Second),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schemaregistry: %w", err)
	}
	s := &Server{cfg: cfg, cl: cl, done: make(chan struct{})}
	s.mu.st = newState()
	s.mu.advanced = make(chan struct{})
	s.cache.parsed = map[int]*parsed{}
	if err := s.ensureTopic(ctx); err != nil {
		cl.Close()
		return nil, cfg.Security.Explain(err)
	}
	var runCtx context.Context
	runCtx, s.cancel = context.WithCancel(context.Background())
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {0: kgo.NewOffset().AtStart()}})
	go s.read(runCtx)
	off, err := s.produce(ctx, []byte(`{"keytype":"NOOP","magic":0}`), nil)
	if err == nil {
		err = s.waitApplied(ctx, off)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("schemaregistry: reading topic %q to its end: %w", cfg.Topic, cfg.Security.Explain(err))
	}
	s.handler = s.routes()
	return s, nil
}

// ensureTopic creates the topic, or checks the one there has one
// partition (ids are assigned in the order of one log).
func (s *Server) ensureTopic(ctx context.Context) error {
	adm := kadm.NewClient(s.cl)
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, s.cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("schemaregistry: create topic %q: %w", s.cfg.Topic, err)
	}
	td, err := adm.ListTopics(ctx, s.cfg.Topic)
	if err != nil {
		return fmt.Errorf("schemaregistry: describe topic %q: %w", s.cfg.Topic, err)
	}
	t := td[s.cfg.Topic]
	if t.Err != nil {
		return fmt.Errorf("schemaregistry: describe topic %q: %w", s.cfg.Topic, t.Err)
	}
	if len(t.Partitions) != 1 {
		return fmt.Errorf("schemaregistry: topic %q has %d partitions; want 1 (the schemas are one ordered log): give another Topic", s.cfg.Topic, len(t.Partitions))
	}
	return nil
}

// read is the reader goroutine: it applies every record of the topic in
// offset order and moves applied past it.
func (s *Server) read(ctx context.Context) {
	defer close(s.done)
	for {
		fs := s.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			s.cfg.Logger.Warn("schemaregistry: fetch", "topic", t, "partition", p, "err", err)
		})
		s.mu.Lock()
		moved := false
		fs.EachRecord(func(r *kgo.Record) {
			if err := s.mu.st.apply(r.Key, r.Value); err != nil {
				s.cfg.Logger.Warn("schemaregistry: record skipped", "offset", r.Offset, "err", err)
			}
			s.mu.applied = r.Offset + 1
			moved = true
		})
		if moved {
			close(s.mu.advanced)
			s.mu.advanced = make(chan struct{})
		}
		s.mu.Unlock()
	}
}

// produce writes one record and returns its offset once acknowledged.
func (s *Server) produce(ctx context.Context, key, value []byte) (int64, error) {
	r := &kgo.Record{Topic: s.cfg.Topic, Partition: 0, Key: key, Value: value}
	if err := s.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return 0, err
	}
	return r.Offset, nil
}

// waitApplied waits until the record at off has been applied.
func (s *Server) waitApplied(ctx context.Context, off int64) error {
	for {
		s.mu.RLock()
		applied, ch := s.mu.applied, s.mu.advanced
		s.mu.RUnlock()
		if applied > off {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errors.New("schemaregistry: closed")
		}
	}
}

// write is one write through the topic (see Server): it produces the
// records and returns once all are applied. The caller holds writeMu.
func (s *Server) write(ctx context.Context, recs ...[2][]byte) *Error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	var last int64 = -1
	for _, kv := range recs {
		off, err := s.produce(ctx, kv[0], kv[1])
		if err != nil {
			return apiErr(CodeStoreError, "Error while writing to the schemas topic: %v", s.cfg.Security.Explain(err))
		}
		last = off
	}
	if last < 0 {
		return nil
	}
	if err := s.waitApplied(ctx, last); err != nil {
		return apiErr(CodeOperationTimeout, "Write to the schemas topic not read back: %v", err)
	}
	return nil
}

// Handler is the REST API. It is safe for concurrent use and stays valid
// until Close.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the reader goroutine and the Kafka client. After Close the
// Handler still answers reads from the last state; writes fail with 50001.
func (s *Server) Close() error {
	s.cancel()
	s.cl.Close()
	<-s.done
	return nil
}
