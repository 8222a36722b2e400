// Package jsonschema reads and writes JSON records in the Confluent wire
// format (the header, then the JSON text), validating them, when asked,
// against the JSON Schema registered under the record's id (draft-07 or
// 2020-12, with github.com/google/jsonschema-go).
//
// Invariants:
//
//   - J1: the schema of an id is fetched and resolved once per Decoder,
//     with its references (other subjects' versions, named by the $ref
//     URL they stand for).
//   - J2: with Validate, a record that does not validate is a dead letter
//     (format.ErrValidation, naming the schema id and what failed), and a
//     value that does not validate is not encoded: Append returns that
//     error (a pipeline's Kafka sink makes the record a dead letter, as it
//     does a value Avro or Protobuf cannot encode); without Validate the
//     schema is not fetched when decoding.
package jsonschema

import (
	"context"
	"fmt"
	"net/url"

	gojson "github.com/goccy/go-json"
	gjs "github.com/google/jsonschema-go/jsonschema"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/format"
)

// Options configure a Decoder and an Encoder. Registry is required.
type Options struct {
	Registry format.Registry
	// Validate checks every record against its schema (J2).
	Validate bool
	// Subject, ID, AutoRegister and Schema choose the schema encoding
	// writes with, as in format/avro.
	Subject      string
	ID           int
	AutoRegister bool
	Schema       string
	// Key: read and write the record's key instead of its value.
	Key bool
}

// Decoder reads JSON records in the wire format (J1: the schemas of ids
// fetched and resolved once, by format.Schemas). Safe for concurrent use.
type Decoder struct {
	validate bool
	key      bool
	schemas  *format.Schemas[*gjs.Resolved]
}

// NewDecoder validates o and makes a Decoder.
func NewDecoder(o Options) (*Decoder, error) {
	if o.Registry == nil {
		return nil, format.ErrNoRegistry("jsonschema")
	}
	reg := o.Registry
	d := &Decoder{validate: o.Validate, key: o.Key}
	d.schemas = format.NewSchemas(reg, sr.TypeJSON, "JSON", func(ctx context.Context, _ int, s sr.Schema) (*gjs.Resolved, error) {
		rs, err := Resolve(ctx, reg, s)
		if err != nil {
			return nil, fmt.Errorf("the schema does not resolve: %w", err)
		}
		return rs, nil
	})
	return d, nil
}

// Resolve parses and resolves s, loading its references from reg.
func Resolve(ctx context.Context, reg format.Registry, s sr.Schema) (*gjs.Resolved, error) {
	var root gjs.Schema
	if err := gojson.Unmarshal([]byte(s.Schema), &root); err != nil {
		return nil, fmt.Errorf("not a JSON schema: %w", err)
	}
	refs := map[string]sr.SchemaReference{}
	for _, r := range s.References {
		refs[r.Name] = r
	}
	loader := func(u *url.URL) (*gjs.Schema, error) {
		r, ok := refs[u.String()]
		if !ok {
			return nil, fmt.Errorf("$ref %s is not among the schema's references", u)
		}
		rs, err := reg.SchemaByVersion(ctx, r.Subject, r.Version)
		if err != nil {
			return nil, err
		}
		var sub gjs.Schema
		if err := gojson.Unmarshal([]byte(rs.Schema.Schema), &sub); err != nil {
			return nil, fmt.Errorf("reference %s: %w", r.Name, err)
		}
		return &sub, nil
	}
	return root.Resolve(&gjs.ResolveOptions{BaseURI: "urn:weir:schema", Loader: loader})
}

// Decode decodes b into v (a pointer), validating first with Validate.
func (d *Decoder) Decode(b []byte, v any) error {
	id, payload, err := format.ParseHeader(b)
	if err != nil {
		return err
	}
	if d.validate {
		rs, err := d.schemas.Of(id)
		if err != nil {
			return err
		}
		var inst any
		if err := gojson.Unmarshal(payload, &inst); err != nil {
			return format.Errorf(id, format.ErrPayload, "%v", err)
		}
		if err := rs.Validate(inst); err != nil {
			return format.Errorf(id, format.ErrValidation, "%v", err)
		}
		if p, ok := v.(*map[string]any); ok {
			m, isMap := inst.(map[string]any)
			if !isMap {
				return format.Errorf(id, format.ErrPayload, "not a JSON object")
			}
			*p = m
			return nil
		}
	}
	if err := gojson.Unmarshal(payload, v); err != nil {
		return format.Errorf(id, format.ErrPayload, "%v", err)
	}
	return nil
}

// Deserializer decodes records into T (map[string]any gives the pipeline's
// JSON-like records: numbers float64).
func Deserializer[T any](o Options) (kafka.Deserializer[T], error) {
	d, err := NewDecoder(o)
	if err != nil {
		return nil, err
	}
	return format.Deserializer(d.key, func(b []byte) (T, error) {
		var v T
		err := d.Decode(b, &v)
		return v, err
	}), nil
}

// Encoder writes JSON values with one registered schema.
type Encoder struct {
	id     int
	rs     *gjs.Resolved // nil without Validate
	header []byte
}

// NewEncoder finds the schema (Options.ID, AutoRegister or the latest
// version of Subject) once.
func NewEncoder(ctx context.Context, o Options) (*Encoder, error) {
	if o.Registry == nil {
		return nil, format.ErrNoRegistry("jsonschema")
	}
	t := format.Target{ID: o.ID, Subject: o.Subject, AutoRegister: o.AutoRegister, Schema: o.Schema}
	id, s, err := t.Find(ctx, o.Registry, "jsonschema", sr.TypeJSON, "JSON", func(s sr.Schema) error {
		_, err := Resolve(ctx, o.Registry, s)
		return err
	})
	if err != nil {
		return nil, err
	}
	e := &Encoder{id: id, header: format.AppendHeader(nil, id)}
	if o.Validate {
		if e.rs, err = Resolve(ctx, o.Registry, s); err != nil {
			return nil, fmt.Errorf("jsonschema: schema id %d: %w", id, err)
		}
	}
	return e, nil
}

// ID is the schema id the Encoder writes with.
func (e *Encoder) ID() int { return e.id }

// Append appends v as JSON in the wire format, validated with Validate.
func (e *Encoder) Append(b []byte, v any) ([]byte, error) {
	j, err := gojson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("jsonschema: %w", err)
	}
	if e.rs != nil {
		var inst any
		_ = gojson.Unmarshal(j, &inst)
		if err := e.rs.Validate(inst); err != nil {
			return nil, format.Errorf(e.id, format.ErrValidation, "%v", err)
		}
	}
	return append(append(b, e.header...), j...), nil
}

// Serializer returns a kafka.SinkOptions.Serialize function.
func Serializer[T any](ctx context.Context, o Options, key func(T) []byte) (func(T) (*kgo.Record, error), error) {
	e, err := NewEncoder(ctx, o)
	if err != nil {
		return nil, err
	}
	return format.Serializer(o.Key, key, func(b []byte, v T) ([]byte, error) { return e.Append(b, v) }), nil
}
