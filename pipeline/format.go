package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/goccy/go-yaml/ast"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/format/avro"
	"github.com/weirproject/weir/format/jsonschema"
	"github.com/weirproject/weir/format/protobuf"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/schemaregistry"
)

// This file reads and builds the record formats of Kafka sources and
// sinks (docs/formats.md): kafka.schemaRegistry, source.kafka.format and
// <sink>.kafka.format. JSON is the default; avro reads and writes the
// Confluent wire format with schemas from the registry.

// FormatSpec is source.kafka.format or <sink>.kafka.format: one of json
// (Kind "" or "json"), avro, protobuf, jsonSchema.
type FormatSpec struct {
	Pos  Pos
	Kind string
	// Schema is a schema file (.avsc): the reader's schema of a source
	// ("" reads with each writer's schema), the schema a sink registers
	// with AutoRegister.
	Schema    string
	SchemaPos Pos
	// Subject is the registry subject a sink writes with (default
	// "<topic>-value", or "<topic>-key" for a keyFormat): its latest
	// version, unless ID or AutoRegister.
	Subject      string
	ID           int
	AutoRegister bool
	// Message is the protobuf message a sink writes (its full name).
	Message string
	// Validate checks jsonSchema records against their schema.
	Validate bool
}

// RegistrySpec is kafka.schemaRegistry.
type RegistrySpec struct {
	Pos Pos
	// Embedded runs the embedded registry (package schemaregistry) on
	// the embedded broker, on a free loopback port; Build sets URL.
	Embedded bool
	URL      string
	User     string
	Password kafkasec.Secret
	TLS      *kafkasec.TLS
	// RetryLimit bounds how long a fetch waits for a registry that does
	// not answer before the job fails (0: format's default, 5 minutes).
	RetryLimit time.Duration
}

// recordFormat reads source.kafka.format or <sink>.kafka.format.
func (d *dec) recordFormat(k, n ast.Node, what string, sink bool) *FormatSpec {
	f := &FormatSpec{Pos: d.pos(k)}
	if s, ok := d.unwrap(n).(*ast.StringNode); ok {
		if s.Value != "json" {
			d.errf(n, "%s: %q: want json, or one of {avro: {...}}, {protobuf: {...}}, {jsonSchema: {...}}", what, s.Value)
		}
		f.Kind = "json"
		return f
	}
	kinds := 0
	// kind reads one format's mapping: the keys every format has, and
	// extra.
	kind := func(name, schemaExample, doc string, extra ...field) field {
		return field{name: name, accepts: "a mapping", doc: doc, fn: func(at string, _, v ast.Node) {
			kinds++
			f.Kind = name
			w := what + "." + name
			fields := append([]field{}, extra...)
			if sink || name == "avro" {
				fields = append(fields, field{name: "schema", accepts: schemaExample, def: "the writer's (read from the registry)", doc: "the schema file",
					fn: func(at string, _, v ast.Node) {
						f.SchemaPos = d.pos(v)
						d.nonEmpty(v, at, schemaExample, &f.Schema)
					}})
			}
			if sink {
				fields = append(fields,
					field{name: "subject", accepts: "a registry subject such as orders-value", def: "TOPIC-value, TOPIC-key", doc: "the subject the schema is looked up (or registered) under",
						fn: func(at string, _, v ast.Node) {
							d.nonEmpty(v, at, "a registry subject such as orders-value", &f.Subject)
						}},
					field{name: "id", accepts: "an integer from 1 to 2^31-1", def: "none", doc: "a registered schema id to write with",
						fn: func(at string, _, v ast.Node) { d.intField(v, at, 1, 1<<31-1, &f.ID) }},
					field{name: "autoRegister", accepts: "true or false", def: "`false`", doc: "register `schema` under the subject (needs schema)",
						fn: func(at string, _, v ast.Node) { d.boolean(v, at, &f.AutoRegister) }})
			}
			if !d.object(v, w, fields...) {
				return
			}
			if f.AutoRegister && f.Schema == "" {
				d.errf(v, "%s: autoRegister needs schema, the schema file to register", w)
			}
			if f.AutoRegister && f.ID != 0 {
				d.errf(v, "%s: id and autoRegister both given; want one", w)
			}
			if sink && name == "protobuf" && f.Message == "" {
				d.errf(v, "%s: message is required: the full name of the message to write, such as shop.Order", w)
			}
		}}
	}
	d.object(n, what,
		field{name: "json", accepts: "`{}`", doc: "JSON records (the default)",
			fn: func(at string, _, v ast.Node) { kinds++; f.Kind = "json"; d.object(v, at) }},
		kind("avro", "an Avro schema file such as order.avsc", "Avro in the Confluent wire format"),
		kind("protobuf", "a .proto file such as order.proto", "Protocol Buffers in the Confluent wire format",
			field{name: "message", accepts: "a message's full name such as shop.Order", def: "required in sinks", doc: "the message written or read",
				fn: func(at string, _, v ast.Node) {
					d.nonEmpty(v, at, "a message's full name such as shop.Order", &f.Message)
				}}),
		kind("jsonSchema", "a JSON Schema file such as order.schema.json", "JSON with a JSON Schema, in the Confluent wire format",
			field{name: "validate", accepts: "true or false", def: "`false`", doc: "validate each record against its schema",
				fn: func(at string, _, v ast.Node) { d.boolean(v, at, &f.Validate) }}),
	)
	if kinds != 1 {
		d.errf(k, "%s: want exactly one of json, avro, protobuf, jsonSchema", what)
	}
	return f
}

// schemaRegistry reads kafka.schemaRegistry: a URL, or {url, basicAuth:
// {user, password}, tls}. The password is ${ENV} only (as kafka.sasl's).
func (d *dec) schemaRegistry(k, n ast.Node) *RegistrySpec {
	r := &RegistrySpec{Pos: d.pos(k)}
	if s, ok := d.unwrap(n).(*ast.StringNode); ok && s.Value == "embedded" {
		r.Embedded = true
		return r
	} else if ok {
		d.nonEmpty(s, "kafka.schemaRegistry", "the registry's URL, or embedded", &r.URL)
	} else {
		d.registryObject(n, r)
	}
	if r.URL != "" {
		if _, err := format.NewClient(format.RegistryConfig{URL: r.URL}); err != nil {
			d.errf(k, "kafka.schemaRegistry: %v", err)
		}
	}
	return r
}

func (d *dec) registryObject(n ast.Node, r *RegistrySpec) {
	d.object(n, "kafka.schemaRegistry",
		field{name: "url", required: true, accepts: "an http:// or https:// URL, or `embedded`", doc: "the Schema Registry (`embedded`: the embedded broker's registry)",
			fn: func(at string, _, v ast.Node) {
				d.nonEmpty(v, at, "the registry's URL such as http://127.0.0.1:8081", &r.URL)
			}},
		field{name: "basicAuth", accepts: "`{user, password}`", def: "none", doc: "basic authentication to the registry",
			fn: func(at string, _, v ast.Node) {
				d.object(v, at,
					field{name: "user", required: true, accepts: "a user name or API key", doc: "the user name or API key", fn: func(at string, _, v ast.Node) {
						d.nonEmpty(v, at, "a user name or API key", &r.User)
					}},
					field{name: "password", required: true, accepts: "`${ENV}`", doc: "the password, from the environment only",
						fn: func(at string, _, v ast.Node) { d.secret(v, at, "", &r.Password) }})
			}},
		field{name: "retryLimit", accepts: "a duration > 0", def: "none", doc: "how long to retry a registry that does not answer",
			fn: func(at string, _, v ast.Node) { d.duration(v, at, true, &r.RetryLimit) }},
		field{name: "tls", accepts: "`true` or a mapping, as `kafka.tls`", def: "none", doc: "TLS to the registry", fn: func(at string, k, v ast.Node) {
			// Read with kafka.tls's parser into a scratch spec.
			var scratch KafkaSpec
			d.kafkaTLS(k, v, &scratch)
			r.TLS = scratch.Security.TLS
			if r.TLS == nil {
				r.TLS = &kafkasec.TLS{}
			}
		}},
	)
}

// checkFormats refuses a format other than json without
// kafka.schemaRegistry.
func (d *dec) checkFormats(s *Spec) {
	needs := func(f *FormatSpec, what string) {
		if f != nil && f.Kind != "json" && (s.Kafka == nil || s.Kafka.Registry == nil) {
			d.errAt(f.Pos, "%s: %s needs kafka.schemaRegistry (the registry's URL)", what, f.Kind)
		}
	}
	if k := s.Source.Kafka; k != nil {
		needs(k.Format, "source.kafka.format")
		needs(k.KeyFormat, "source.kafka.keyFormat")
	}
	if s.Kafka != nil && s.Kafka.Embedded != nil {
		for i := range s.Kafka.Embedded.Produce {
			needs(s.Kafka.Embedded.Produce[i].Format, fmt.Sprintf("kafka.embedded.produce[%d].format", i))
		}
	}
	if s.Kafka != nil && s.Kafka.Registry != nil && s.Kafka.Registry.Embedded && s.Kafka.Embedded == nil {
		d.errAt(s.Kafka.Registry.Pos, "kafka.schemaRegistry: embedded runs on the embedded broker; with brokers give the registry's URL")
	}
	for what, sk := range allSinks(s) {
		if sk != nil && sk.Kafka != nil {
			needs(sk.Kafka.Format, what+".kafka.format")
			needs(sk.Kafka.KeyFormat, what+".kafka.keyFormat")
		}
	}
}

// allSinks is the main sink and each output's, by name.
func allSinks(s *Spec) map[string]*SinkSpec {
	m := map[string]*SinkSpec{"sink": s.Sink}
	for name, o := range s.Outputs {
		m["outputs."+name+".sink"] = o.Sink
	}
	return m
}

// resolveFormatPaths makes schema files relative to the pipeline file.
func resolveFormatPaths(s *Spec, fix func(*string)) {
	fixFormat := func(f *FormatSpec) {
		if f != nil {
			fix(&f.Schema)
		}
	}
	if k := s.Source.Kafka; k != nil {
		fixFormat(k.Format)
		fixFormat(k.KeyFormat)
	}
	for _, sk := range allSinks(s) {
		if sk != nil && sk.Kafka != nil {
			fixFormat(sk.Kafka.Format)
			fixFormat(sk.Kafka.KeyFormat)
		}
	}
	if s.Kafka != nil && s.Kafka.Embedded != nil {
		for i := range s.Kafka.Embedded.Produce {
			if f := s.Kafka.Embedded.Produce[i].Format; f != nil {
				fix(&f.Schema)
			}
		}
	}
	if s.Kafka != nil && s.Kafka.Registry != nil && s.Kafka.Registry.TLS != nil {
		t := s.Kafka.Registry.TLS
		fix(&t.CAFile)
		fix(&t.CertFile)
		fix(&t.KeyFile)
	}
}

// registries holds the schema registry clients of running jobs, one per
// URL and user (a clustered job builds many times): schemas fetched once
// serve every task and restart.
var registries struct {
	mu sync.Mutex
	m  map[string]*format.Client
}

// registryOf returns the client of kafka.schemaRegistry, checking at its
// first use that the registry answers (R3: fail fast at build time).
func registryOf(ctx context.Context, s *Spec) (format.Registry, error) {
	if s.Kafka == nil || s.Kafka.Registry == nil {
		return nil, nil
	}
	r := s.Kafka.Registry
	registries.mu.Lock()
	defer registries.mu.Unlock()
	key := fmt.Sprint(r.URL, "\x00", r.User, "\x00", r.RetryLimit)
	if c, ok := registries.m[key]; ok {
		return c, nil
	}
	c, err := format.NewClient(format.RegistryConfig{URL: r.URL, Username: r.User, Password: r.Password, TLS: r.TLS, RetryLimit: r.RetryLimit})
	if err != nil {
		return nil, fmt.Errorf("%s: kafka.schemaRegistry: %w", r.Pos, err)
	}
	if err := c.Check(ctx); err != nil {
		return nil, fmt.Errorf("%s: kafka.schemaRegistry: %w", r.Pos, err)
	}
	if registries.m == nil {
		registries.m = map[string]*format.Client{}
	}
	registries.m[key] = c
	return c, nil
}

func readSchema(f *FormatSpec) (string, error) {
	if f.Schema == "" {
		return "", nil
	}
	b, err := os.ReadFile(f.Schema)
	if err != nil {
		return "", fmt.Errorf("%s: %s.schema: %v", f.SchemaPos, f.Kind, err)
	}
	return string(b), nil
}

// kafkaSourceRecords is the deserializer of the Kafka source: JSON
// objects (kafkaRecords), or source.kafka.format's, with the record's
// metadata in source.kafka.metadata if named, and the key decoded with
// source.kafka.keyFormat, if given, in the field source.kafka.keyField.
func kafkaSourceRecords(ctx context.Context, s *Spec) (kafka.Deserializer[Record], error) {
	k := s.Source.Kafka
	f := k.Format
	if (f == nil || f.Kind == "json") && k.KeyFormat == nil {
		return kafkaRecords(k), nil
	}
	value := func(b []byte) (any, error) {
		var v any
		err := gojson.Unmarshal(b, &v)
		return v, err
	}
	if f != nil && f.Kind != "json" {
		var err error
		if value, err = decoderOf(ctx, s, f, "source.kafka.format"); err != nil {
			return nil, err
		}
	}
	var key func([]byte) (any, error)
	if k.KeyFormat != nil {
		var err error
		if key, err = decoderOf(ctx, s, k.KeyFormat, "source.kafka.keyFormat"); err != nil {
			return nil, err
		}
	}
	meta, keyField := k.Metadata, k.KeyField
	if keyField == "" {
		keyField = "key"
	}
	return kafka.DeserializerFunc[Record](func(r *kgo.Record) (Record, error) {
		v, err := value(r.Value)
		if err != nil {
			return nil, err
		}
		rec, ok := v.(map[string]any)
		if !ok || rec == nil {
			return nil, fmt.Errorf("not a record: the value is %s; want an object", describeJSON(v))
		}
		if key != nil && len(r.Key) > 0 {
			kv, err := key(r.Key)
			if err != nil {
				return nil, fmt.Errorf("key: %w", err)
			}
			rec[keyField] = kv
		}
		if meta != "" {
			rec[meta] = recordMetadata(r)
		}
		return rec, nil
	}), nil
}

// describeJSON names the kind of a JSON-like value, for reasons.
func describeJSON(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// decoderOf makes the decoder of format f (a value's or a key's; what
// names it): the wire format's bytes into a JSON-like value (records
// into objects; a key may also be a string, a number, ...). json parses
// JSON without a header.
func decoderOf(ctx context.Context, s *Spec, f *FormatSpec, what string) (func([]byte) (any, error), error) {
	if f.Kind == "json" {
		return func(b []byte) (any, error) {
			var v any
			err := gojson.Unmarshal(b, &v)
			return v, err
		}, nil
	}
	reg, err := registryOf(ctx, s)
	if err != nil {
		return nil, err
	}
	text, err := readSchema(f)
	if err != nil {
		return nil, err
	}
	switch f.Kind {
	case "avro":
		d, err := avro.NewDecoder(avro.Options{Registry: reg, Schema: text})
		if err != nil {
			return nil, fmt.Errorf("%s: %s.avro: %w", f.Pos, what, err)
		}
		return d.Value, nil
	case "protobuf":
		d, err := protobuf.NewDecoder(protobuf.Options{Registry: reg})
		if err != nil {
			return nil, fmt.Errorf("%s: %s.protobuf: %w", f.Pos, what, err)
		}
		return func(b []byte) (any, error) { return d.Record(b) }, nil
	default: // jsonSchema
		d, err := jsonschema.NewDecoder(jsonschema.Options{Registry: reg, Validate: f.Validate})
		if err != nil {
			return nil, fmt.Errorf("%s: %s.jsonSchema: %w", f.Pos, what, err)
		}
		return func(b []byte) (any, error) {
			var v any
			err := d.Decode(b, &v)
			return v, err
		}, nil
	}
}

// kafkaSinkSerialize is the Serialize of a Kafka sink: the record as JSON
// or in <sink>.kafka.format, its key (sink.kafka.key) as text or in
// <sink>.kafka.keyFormat. An error is the record's: it becomes a dead
// letter (kafkaEncodeOp).
func kafkaSinkSerialize(ctx context.Context, s *Spec, k *KafkaSinkSpec) (func(Record) (*kgo.Record, error), error) {
	var keyFn func(Record) ([]byte, error)
	if k.Key != "" {
		kp, _ := parseFieldPath(k.Key) // checked by Parse
		keyFn = func(r Record) ([]byte, error) { return []byte(keyString(kp.get(r))), nil }
		if kf := k.KeyFormat; kf != nil {
			enc, err := encoderOf(ctx, s, kf, k.Topic+"-key")
			if err != nil {
				return nil, err
			}
			keyFn = func(r Record) ([]byte, error) {
				v, _ := kp.get(r)
				b, err := enc(v)
				if err != nil {
					return nil, fmt.Errorf("key %s: %w", k.Key, err)
				}
				return b, nil
			}
		}
	}
	// encoding/json, as kafka.SerializeJSON wrote JSON sinks before.
	value := func(r Record) ([]byte, error) { return json.Marshal(r) }
	if f := k.Format; f != nil && f.Kind != "json" {
		enc, err := encoderOf(ctx, s, f, k.Topic+"-value")
		if err != nil {
			return nil, err
		}
		value = func(r Record) ([]byte, error) { return enc(map[string]any(r)) }
	}
	return func(r Record) (*kgo.Record, error) {
		v, err := value(r)
		if err != nil {
			return nil, err
		}
		out := &kgo.Record{Value: v}
		if keyFn != nil {
			if out.Key, err = keyFn(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}, nil
}

// encoderOf makes the encoder of format f (a value's or a key's) writing
// with the schema of f's subject (default subject), id or autoRegister.
func encoderOf(ctx context.Context, s *Spec, f *FormatSpec, subject string) (func(any) ([]byte, error), error) {
	if f.Kind == "json" {
		return func(v any) ([]byte, error) { return gojson.Marshal(v) }, nil
	}
	reg, err := registryOf(ctx, s)
	if err != nil {
		return nil, err
	}
	text, err := readSchema(f)
	if err != nil {
		return nil, err
	}
	return formatEncoder(ctx, reg, f, text, subject)
}

// formatEncoder makes the encoder of format f (not json) with schema
// text (the file's content, or "") and the default subject.
func formatEncoder(ctx context.Context, reg format.Registry, f *FormatSpec, text, subject string) (func(any) ([]byte, error), error) {
	if f.Subject != "" {
		subject = f.Subject
	}
	var enc func(any) ([]byte, error)
	switch f.Kind {
	case "avro":
		e, err := avro.NewEncoder(ctx, avro.Options{Registry: reg, Schema: text, Subject: subject, ID: f.ID, AutoRegister: f.AutoRegister})
		if err != nil {
			return nil, fmt.Errorf("%s: kafka.format.%s: %w", f.Pos, f.Kind, err)
		}
		enc = func(v any) ([]byte, error) { return e.AppendValue(nil, v) }
	case "protobuf":
		e, err := protobuf.NewEncoder(ctx, protobuf.Options{Registry: reg, Schema: text, Subject: subject, ID: f.ID,
			AutoRegister: f.AutoRegister, Message: f.Message})
		if err != nil {
			return nil, fmt.Errorf("%s: kafka.format.%s: %w", f.Pos, f.Kind, err)
		}
		enc = func(v any) ([]byte, error) { return e.AppendValue(nil, v) }
	default: // jsonSchema
		e, err := jsonschema.NewEncoder(ctx, jsonschema.Options{Registry: reg, Schema: text, Subject: subject, ID: f.ID,
			AutoRegister: f.AutoRegister, Validate: f.Validate})
		if err != nil {
			return nil, fmt.Errorf("%s: kafka.format.%s: %w", f.Pos, f.Kind, err)
		}
		enc = func(v any) ([]byte, error) { return e.Append(nil, v) }
	}
	return enc, nil
}

// clusterFormat is the source's deserializer and the main sink's
// Serialize of a clustered job, made once per process.
type clusterFormat struct {
	source kafka.Deserializer[Record]
	sink   func(Record) (*kgo.Record, error)
}

func clusterFormats(ctx context.Context, s *Spec) (clusterFormat, error) {
	var f clusterFormat
	var err error
	if f.source, err = kafkaSourceRecords(ctx, s); err != nil {
		return f, err
	}
	f.sink, err = kafkaSinkSerialize(ctx, s, s.Sink.Kafka)
	return f, err
}

// startEmbeddedRegistry starts the embedded schema registry of
// kafka.schemaRegistry: embedded on the job's embedded broker (its schemas
// in the broker's _schemas topic) and returns its client; without one, the
// client of kafka.schemaRegistry, if any. The registry closes with the job.
func (j *Job) startEmbeddedRegistry(ctx context.Context) (format.Registry, error) {
	ks := j.Spec.Kafka
	if ks == nil || ks.Registry == nil {
		return nil, nil
	}
	if r := ks.Registry; r.Embedded {
		srv, err := schemaregistry.Start(ctx, schemaregistry.Config{Brokers: j.Brokers})
		if err != nil {
			return nil, fmt.Errorf("%s: kafka.schemaRegistry: %w", r.Pos, err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			srv.Close()
			return nil, fmt.Errorf("%s: kafka.schemaRegistry: %w", r.Pos, err)
		}
		hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		j.closers = append(j.closers, func() error { hs.Close(); return srv.Close() })
		r.URL = "http://" + ln.Addr().String()
	}
	return registryOf(ctx, j.Spec)
}

// encodeProduced rewrites the values of recs (JSON lines of
// kafka.embedded.produce p) in p.format, if any. A line that is not a JSON
// object is produced as it is (a record the source will make a dead letter
// of: not the wire format), so examples can show bad input; one that does
// not fit the schema is an error.
func encodeProduced(ctx context.Context, reg format.Registry, p ProduceSpec, recs []*kgo.Record) error {
	f := p.Format
	if f == nil || f.Kind == "json" || len(recs) == 0 {
		return nil
	}
	text, err := readSchema(f)
	if err != nil {
		return err
	}
	enc, err := formatEncoder(ctx, reg, f, text, p.Topic+"-value")
	if err != nil {
		return fmt.Errorf("%s: produce: %w", p.Pos, err)
	}
	for i, r := range recs {
		v, err := decodeRecord(r.Value)
		if err != nil {
			continue
		}
		out, err := enc(map[string]any(v))
		if err != nil {
			return fmt.Errorf("%s: produce: %s line %d: %w", p.Pos, p.File, i+1, err)
		}
		r.Value = out
	}
	return nil
}
