package kafka

import (
	"errors"

	json "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Deserializer turns a Kafka record into a value. An error makes the record
// a dead letter (with its topic, partition, offset and the error as reason);
// it does not fail the job. Deserialize is called on the source subtask's
// goroutine, one record at a time. The record's Key, Value and header
// values are not copied by the source and are not reused afterwards, so a
// deserializer may keep them; the *kgo.Record itself is recycled once
// Deserialize has returned (its struct is reused for a later record), so a
// deserializer must not keep the pointer.
type Deserializer[T any] interface {
	Deserialize(r *kgo.Record) (T, error)
}

// ErrFailJob, wrapped in a Deserializer's error, fails the job (the
// source's Poll returns the error; the restart strategy then restarts the
// job from its last checkpoint, so the record is read again) instead of
// making the record a dead letter. It is for errors that are not the
// record's fault, such as a schema registry that stayed unreachable for
// its retry limit (package format): a dead letter would drop a good record.
var ErrFailJob = errors.New("kafka: the deserializer cannot go on")

// DeserializerFunc adapts a function to Deserializer.
type DeserializerFunc[T any] func(r *kgo.Record) (T, error)

// Deserialize calls f.
func (f DeserializerFunc[T]) Deserialize(r *kgo.Record) (T, error) { return f(r) }

// Bytes deserializes the record value as it is (not copied).
func Bytes() Deserializer[[]byte] {
	return DeserializerFunc[[]byte](func(r *kgo.Record) ([]byte, error) { return r.Value, nil })
}

// String deserializes the record value as a string.
func String() Deserializer[string] {
	return DeserializerFunc[string](func(r *kgo.Record) (string, error) { return string(r.Value), nil })
}

// JSON decodes the record value as JSON into a T. Values that are not valid
// JSON for T become dead letters. It decodes with github.com/goccy/go-json,
// a drop-in replacement for encoding/json (same struct tags,
// json.Unmarshaler and encoding.TextUnmarshaler support, same results for
// valid input) that decodes a small record about 8x faster than
// encoding/json and 2.5x faster than github.com/segmentio/encoding (which
// weir used before; BENCHMARKS.md); decoding is most of a JSON source's
// cost per record. Its error messages (the dead letters' reasons) may word
// things differently from encoding/json. Each reader decodes into a T of
// its own, reset before every record, so decoding allocates no T per
// record; values returned never share memory with the record or with each
// other.
func JSON[T any]() Deserializer[T] { return jsonDeser[T]{} }

type jsonDeser[T any] struct{}

func (jsonDeser[T]) Deserialize(r *kgo.Record) (T, error) {
	var v T
	err := json.Unmarshal(r.Value, &v)
	return v, err
}

func (jsonDeser[T]) forReader() Deserializer[T] { return &jsonReaderDeser[T]{} }

// jsonReaderDeser is JSON for one reader: it decodes into a value it owns
// (zeroed first), so that a record costs no allocation of a T.
type jsonReaderDeser[T any] struct{ v T }

func (d *jsonReaderDeser[T]) Deserialize(r *kgo.Record) (T, error) {
	var zero T
	d.v = zero
	err := json.Unmarshal(r.Value, &d.v)
	return d.v, err
}

// perReader is implemented by deserializers that keep state for one
// reader (one source subtask, one goroutine): each reader calls
// forReader once and uses what it returns.
type perReader[T any] interface {
	forReader() Deserializer[T]
}

// forReader returns d's per-reader form, or d.
func forReader[T any](d Deserializer[T]) Deserializer[T] {
	if p, ok := d.(perReader[T]); ok {
		return p.forReader()
	}
	return d
}

// Message is a Kafka record with its coordinates, as delivered by
// WithMetadata: the value decoded, the rest as Kafka has it.
type Message[T any] struct {
	Topic     string
	Partition int32
	Offset    int64
	// Timestamp is the record's Kafka timestamp in Unix milliseconds.
	Timestamp int64
	Key       []byte
	Headers   []kgo.RecordHeader
	Value     T
}

// KafkaOrigin returns the record's topic, partition and offset: an agent
// input that is a Message is traced with them (agent.KafkaOrigin).
func (m Message[T]) KafkaOrigin() (topic string, partition int32, offset int64) {
	return m.Topic, m.Partition, m.Offset
}

// TraceContext returns the W3C trace context of the record's headers
// traceparent and tracestate (the last of each; "" when absent): an agent
// input that is a Message continues that trace (agent.TraceContextCarrier).
func (m Message[T]) TraceContext() (traceparent, tracestate string) {
	for _, h := range m.Headers {
		switch h.Key {
		case "traceparent":
			traceparent = string(h.Value)
		case "tracestate":
			tracestate = string(h.Value)
		}
	}
	return traceparent, tracestate
}

// WithMetadata wraps d so that each value comes with its topic, partition,
// offset, timestamp, key and headers. Operators that need a replayable
// order across partitions (ties broken by partition and offset, as package
// ordering does) read them from here.
func WithMetadata[T any](d Deserializer[T]) Deserializer[Message[T]] { return metaDeser[T]{d: d} }

type metaDeser[T any] struct{ d Deserializer[T] }

func (m metaDeser[T]) Deserialize(r *kgo.Record) (Message[T], error) {
	v, err := m.d.Deserialize(r)
	if err != nil {
		return Message[T]{}, err
	}
	return Message[T]{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Headers: r.Headers, Value: v}, nil
}

func (m metaDeser[T]) forReader() Deserializer[Message[T]] { return metaDeser[T]{d: forReader(m.d)} }
