package avro

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	havro "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/format"
)

// Options configure a Decoder, an Encoder and the Kafka deserializers and
// serializers made from them. Registry is required; the rest has defaults.
type Options struct {
	// Registry is where writers' schemas are fetched by id (decoding) and
	// where the encoding schema is found or registered. Required.
	Registry format.Registry
	// Schema is an Avro schema (JSON text). Decoding: the reader's
	// schema, into which every writer's schema is resolved (A2); "" reads
	// with the writer's schema as it is. Encoding with AutoRegister: the
	// schema registered under Subject and written with.
	Schema string
	// Subject is the registry subject of encoding: its latest version is
	// written with (A3), unless ID or AutoRegister is set. Kafka's
	// convention is "<topic>-value" (or "-key").
	Subject string
	// ID, if not 0, is the schema id encoding writes with (the schema
	// fetched by id); Subject is then not used.
	ID int
	// AutoRegister registers Schema under Subject when encoding starts
	// (off by default: the registry's subjects are usually owned by the
	// producers' teams).
	AutoRegister bool
	// Key makes the deserializers read the record's key and the
	// serializers write it, instead of the value.
	Key bool
}

// api is hamba/avro's configuration for weir: unions of registered types
// decode to the map form {"type name": value} (RecordOf unwraps them).
var api = havro.Config{TagKey: "avro", MaxByteSliceSize: 16 << 20}.Freeze()

// Parse parses an Avro schema in a cache of its own, so that two versions
// of one named record never see each other's definitions.
func Parse(text string) (havro.Schema, error) {
	s, err := havro.ParseWithCache(text, "", &havro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("avro: schema: %w", err)
	}
	return s, nil
}

// Decoder decodes records in the Confluent wire format with their writers'
// schemas resolved into the reader's schema. The schemas of an id are
// fetched, parsed and resolved once (A1; format.Schemas), then read
// without a lock. Safe for concurrent use.
type Decoder struct {
	reader  havro.Schema // nil: each writer's schema as it is
	key     bool
	schemas *format.Schemas[decodeSchemas]
}

// decodeSchemas are the schemas of one writer's id: how to decode its
// bytes (the resolved schema) and the shape of what comes out (the reader
// schema, or the writer's).
type decodeSchemas struct {
	decode havro.Schema
	shape  havro.Schema
}

// NewDecoder validates o and makes a Decoder.
func NewDecoder(o Options) (*Decoder, error) {
	if o.Registry == nil {
		return nil, format.ErrNoRegistry("avro")
	}
	d := &Decoder{key: o.Key}
	if o.Schema != "" {
		s, err := Parse(o.Schema)
		if err != nil {
			return nil, err
		}
		d.reader = s
	}
	d.schemas = format.NewSchemas(o.Registry, sr.TypeAvro, "Avro", d.resolve)
	return d, nil
}

// resolve parses the writer's schema of an id and resolves it into the
// reader's (A2).
func (d *Decoder) resolve(_ context.Context, _ int, raw sr.Schema) (decodeSchemas, error) {
	w, err := Parse(raw.Schema)
	if err != nil {
		return decodeSchemas{}, err
	}
	if d.reader == nil {
		return decodeSchemas{decode: w, shape: w}, nil
	}
	r, err := havro.NewSchemaCompatibility().Resolve(d.reader, w)
	if err != nil {
		return decodeSchemas{}, fmt.Errorf("the writer's schema does not resolve into the reader's: %v", err)
	}
	return decodeSchemas{decode: r, shape: d.reader}, nil
}

// Decode decodes b (header and payload) into v, a pointer to a struct
// with avro tags, to a map[string]any or to an any. It returns the shape
// of the value (the reader's schema, or the writer's without one). Errors
// are *format.DecodeError naming the schema id (W4), or wrap
// kafka.ErrFailJob when the registry stayed unavailable.
func (d *Decoder) Decode(b []byte, v any) (havro.Schema, error) {
	id, payload, err := format.ParseHeader(b)
	if err != nil {
		return nil, err
	}
	s, err := d.schemas.Of(id)
	if err != nil {
		return nil, err
	}
	if err := unmarshal(s.decode, payload, v); err != nil {
		return nil, format.Errorf(id, format.ErrPayload, "%v", err)
	}
	return s.shape, nil
}

var readers = sync.Pool{New: func() any { return havro.NewReader(nil, 0, havro.WithReaderConfig(api)) }}

// unmarshal is api.Unmarshal, except that a payload cut short is an error
// (hamba/avro's Unmarshal takes an end of input anywhere as success).
func unmarshal(s havro.Schema, b []byte, v any) error {
	r := readers.Get().(*havro.Reader)
	r.Reset(b) // Reset keeps Error: a reader's last error must not carry over
	r.Error = nil
	r.ReadVal(s, v)
	err := r.Error
	r.Reset(nil)
	r.Error = nil
	readers.Put(r)
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Deserializer decodes records into T: a struct with avro tags (fields
// missing from the reader's shape keep their zero value) or
// map[string]any (hamba/avro's native values: int64, time.Time, *big.Rat,
// unions as {"type": value}). An error makes the record a dead letter whose
// reason names the schema id.
func Deserializer[T any](o Options) (kafka.Deserializer[T], error) {
	d, err := NewDecoder(o)
	if err != nil {
		return nil, err
	}
	return format.Deserializer(d.key, func(b []byte) (T, error) {
		var v T
		_, err := d.Decode(b, &v)
		return v, err
	}), nil
}

// Records decodes records into JSON-like maps (RecordOf), the records of
// weir's pipelines.
func Records(o Options) (kafka.Deserializer[map[string]any], error) {
	d, err := NewDecoder(o)
	if err != nil {
		return nil, err
	}
	return format.Deserializer(d.key, d.Record), nil
}

// Record decodes b into a JSON-like map (RecordOf).
func (d *Decoder) Record(b []byte) (map[string]any, error) {
	var m map[string]any
	shape, err := d.Decode(b, &m)
	if err != nil {
		return nil, err
	}
	if shape.Type() != havro.Record {
		return nil, errors.New("avro: the schema is not a record; records decode into maps only")
	}
	return RecordOf(shape, m), nil
}

// Value decodes b into a JSON-like value (any schema, not only records:
// the keys of Kafka records are often a string or a long). Records come out
// as RecordOf makes them.
func (d *Decoder) Value(b []byte) (any, error) {
	var v any
	shape, err := d.Decode(b, &v)
	if err != nil {
		return nil, err
	}
	return ToJSON(shape, v), nil
}

// ToJSON converts v, a value decoded by hamba/avro with schema shape, into
// a JSON-like value as RecordOf converts record fields.
func ToJSON(shape havro.Schema, v any) any { return toJSON(shape, v) }

// Encoder writes values in the Confluent wire format with one registered
// schema, resolved when it is made (A3). Safe for concurrent use.
type Encoder struct {
	id     int
	schema havro.Schema
	header []byte
}

// NewEncoder finds the schema to write with (Options.ID, AutoRegister
// or the latest version of Subject) in the registry, once. A registry that
// does not answer, or a subject with no version, is an error here rather
// than at the first record.
func NewEncoder(ctx context.Context, o Options) (*Encoder, error) {
	if o.Registry == nil {
		return nil, format.ErrNoRegistry("avro")
	}
	t := format.Target{ID: o.ID, Subject: o.Subject, AutoRegister: o.AutoRegister, Schema: o.Schema}
	id, raw, err := t.Find(ctx, o.Registry, "avro", sr.TypeAvro, "Avro", func(s sr.Schema) error {
		_, err := Parse(s.Schema)
		return err
	})
	if err != nil {
		return nil, err
	}
	s, err := Parse(raw.Schema)
	if err != nil {
		return nil, err
	}
	return &Encoder{id: id, schema: s, header: format.AppendHeader(nil, id)}, nil
}

// ID is the schema id the Encoder writes with.
func (e *Encoder) ID() int { return e.id }

// Schema is the schema the Encoder writes with.
func (e *Encoder) Schema() havro.Schema { return e.schema }

// Append appends v in the wire format to b: a struct with avro tags or a
// map[string]any of hamba/avro's native values.
func (e *Encoder) Append(b []byte, v any) ([]byte, error) {
	p, err := api.Marshal(e.schema, v)
	if err != nil {
		return nil, fmt.Errorf("avro: schema id %d: %w", e.id, err)
	}
	return append(append(b, e.header...), p...), nil
}

// AppendRecord appends a JSON-like map (FromRecord converts it) to b.
func (e *Encoder) AppendRecord(b []byte, r map[string]any) ([]byte, error) {
	v, err := FromRecord(e.schema, r)
	if err != nil {
		return nil, fmt.Errorf("avro: schema id %d: %w", e.id, err)
	}
	return e.Append(b, v)
}

// AppendValue appends a JSON-like value of any schema (FromRecord converts
// it) to b: AppendRecord for values that are not records, such as a key
// that is a string.
func (e *Encoder) AppendValue(b []byte, v any) ([]byte, error) {
	n, err := FromRecord(e.schema, v)
	if err != nil {
		return nil, fmt.Errorf("avro: schema id %d: %w", e.id, err)
	}
	return e.Append(b, n)
}

// Serializer returns a kafka.SinkOptions.Serialize function writing T
// with the Encoder's schema into the value (or the key with Options.Key),
// with key, if not nil, giving the record's key.
func Serializer[T any](ctx context.Context, o Options, key func(T) []byte) (func(T) (*kgo.Record, error), error) {
	e, err := NewEncoder(ctx, o)
	if err != nil {
		return nil, err
	}
	return format.Serializer(o.Key, key, func(b []byte, v T) ([]byte, error) { return e.Append(b, v) }), nil
}

// RecordSerializer is Serializer for JSON-like maps (FromRecord).
func RecordSerializer(ctx context.Context, o Options, key func(map[string]any) []byte) (func(map[string]any) (*kgo.Record, error), error) {
	e, err := NewEncoder(ctx, o)
	if err != nil {
		return nil, err
	}
	return format.Serializer(o.Key, key, e.AppendRecord), nil
}
