// Package eventlog writes an agent's event log (agent.LogEntry, received
// through agent.Options.Listeners) to a JSON-lines file or a Kafka topic,
// and reads it back (what `weir agent log` prints).
//
// # Guarantees
//
//	E1. One entry per line (file) or per record (topic): the entry's JSON
//	    (agent.LogEntry's fields), the record keyed by the entry's Key, so a
//	    key's entries keep their order within a partition.
//	E2. Order. Entries of one action run are written in the order they were
//	    made; entries of different keys interleave as they happened.
//	E3. Flushed at checkpoints. Writers buffer; the agent operator flushes
//	    them when it takes a checkpoint, ends its input and closes (the
//	    writers implement agent.Flusher), so every completed checkpoint's
//	    covered entries are in the file or acknowledged by Kafka.
//	E4. Failures do not fail the job. A write or produce error is kept and
//	    returned by Flush (the operator logs it) and by Close; the entries
//	    after it are dropped and counted (Dropped).
//	E5. At least once. A job restored from a checkpoint runs again what the
//	    checkpoint did not cover, and logs it again: without an action-state
//	    store those entries repeat the first run's; with one, what the
//	    restored job takes from the store is logged with replayed set
//	    (agent.LogEntry.Replayed: completed actions replayed, the outputs
//	    they re-emit, recorded call results). Entries carry the run's
//	    identity (key, seq, event id, action), by which a reader can tell
//	    repeats apart.
package eventlog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/agent"
)

// encode appends e's JSON and a newline to dst. An entry whose Data is not
// JSON-serialisable is written with Data replaced by the error's text.
func encode(dst []byte, e *agent.LogEntry) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		c := *e
		c.Data = fmt.Sprintf("(not JSON-serialisable: %v)", err)
		b, _ = json.Marshal(&c)
	}
	dst = append(dst, b...)
	return append(dst, '\n')
}

// Writer writes entries as JSON lines to an io.Writer, buffered; it is an
// agent.Listener and agent.Flusher, safe for concurrent use.
type Writer struct {
	mu struct {
		sync.Mutex
		w   *bufio.Writer
		buf []byte
		err error
	}
	closer  io.Closer
	dropped atomic.Int64
}

// NewWriter returns a writer of JSON lines to w.
func NewWriter(w io.Writer) *Writer {
	x := &Writer{}
	x.mu.w = bufio.NewWriterSize(w, 64<<10)
	return x
}

// CreateFile creates (or truncates) the file at path and returns a writer
// of JSON lines to it; Close closes the file.
func CreateFile(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	w := NewWriter(f)
	w.closer = f
	return w, nil
}

// OnEntry implements agent.Listener.
func (w *Writer) OnEntry(e *agent.LogEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		w.dropped.Add(1)
		return
	}
	w.mu.buf = encode(w.mu.buf[:0], e)
	if _, err := w.mu.w.Write(w.mu.buf); err != nil {
		w.mu.err = fmt.Errorf("eventlog: writing an entry: %w", err)
	}
}

// Flush implements agent.Flusher: it writes the buffered entries and
// returns the first error met.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err == nil {
		if err := w.mu.w.Flush(); err != nil {
			w.mu.err = fmt.Errorf("eventlog: writing entries: %w", err)
		}
	}
	return w.mu.err
}

// Dropped returns the number of entries dropped after a write error.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Close flushes and, for CreateFile, closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if w.closer != nil {
		err = errors.Join(err, w.closer.Close())
	}
	return err
}

// KafkaWriter produces entries to a Kafka topic, one record per entry
// keyed by the entry's key, asynchronously; it is an agent.Listener and
// agent.Flusher, safe for concurrent use. The topic must exist or the
// brokers create it on first produce.
type KafkaWriter struct {
	cl      *kgo.Client
	topic   string
	own     bool
	err     atomic.Pointer[error]
	dropped atomic.Int64
}

// NewKafkaWriter returns a writer to topic through a client of its own
// (acks from all in-sync replicas, idempotent), made with opts after the
// seed brokers.
func NewKafkaWriter(brokers []string, topic string, opts ...kgo.Opt) (*KafkaWriter, error) {
	if topic == "" {
		return nil, fmt.Errorf("eventlog: no topic given for the Kafka writer")
	}
	if len(brokers) == 0 {
		return nil, fmt.Errorf("eventlog: no brokers given for the Kafka writer of topic %q", topic)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	return &KafkaWriter{cl: cl, topic: topic, own: true}, nil
}

// OnEntry implements agent.Listener: the record is produced
// asynchronously (the call does not wait for the broker).
func (w *KafkaWriter) OnEntry(e *agent.LogEntry) {
	if w.err.Load() != nil {
		w.dropped.Add(1)
		return
	}
	r := &kgo.Record{Topic: w.topic, Key: []byte(e.Key), Value: encode(nil, e)}
	r.Value = r.Value[:len(r.Value)-1] // no newline in a record
	w.cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
		if err != nil {
			err = fmt.Errorf("eventlog: producing to topic %q: %w", w.topic, err)
			w.err.CompareAndSwap(nil, &err)
		}
	})
}

// Flush implements agent.Flusher: it waits until every entry produced so
// far is acknowledged, and returns the first error met.
func (w *KafkaWriter) Flush() error {
	if err := w.cl.Flush(context.Background()); err != nil {
		return fmt.Errorf("eventlog: flushing topic %q: %w", w.topic, err)
	}
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Dropped returns the number of entries dropped after a produce error.
func (w *KafkaWriter) Dropped() int64 { return w.dropped.Load() }

// Close flushes and closes the client.
func (w *KafkaWriter) Close() error {
	err := w.Flush()
	if w.own {
		w.cl.Close()
	}
	return err
}
