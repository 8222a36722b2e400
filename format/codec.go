package format

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/connector/kafka"
)

// This file is the mechanism the codecs (format/avro, format/protobuf,
// format/jsonschema) share; each supplies only what is its own: how a
// registered schema becomes something it decodes with (Schemas' build),
// how a value becomes bytes (the append function of Serializer), and how
// bytes become a value (the decode function of Deserializer).
//
//	decoding a record (C1, R1, R2):
//	  id, payload := ParseHeader(bytes)        // W1, W4
//	  s := schemas.Of(id)                      // lock-free once id is known;
//	                                           // else fetch, check the type, make, publish
//	  value := codec.decode(s, payload)
//
//	making an encoder (C2):
//	  id, schema := Target.Find(...)           // a fixed id, Schema registered, or Subject's latest
//	  header := AppendHeader(nil, id)          // then codec.append(header, value) per record

// ErrNoRegistry is the error of a codec's Options without a Registry.
func ErrNoRegistry(pkg string) error {
	return fmt.Errorf("%s: Options.Registry is nil; give a format.Client (or format.Memory)", pkg)
}

// Schemas caches what a codec makes of each writer's schema id: the
// schema fetched by id from a Registry, checked to be of the codec's type,
// then made (parsed, resolved into a reader's schema, compiled with its
// references) once per Schemas (C1). Of then reads the map of ids without
// a lock: the map is replaced whole when an id is added (copy on write;
// additions are serialised by mu, so a schema is fetched once even when
// several goroutines meet a new id at once). Safe for concurrent use.
type Schemas[S any] struct {
	reg   Registry
	typ   sr.SchemaType
	name  string // the type as the codec's errors name it, such as Avro
	build func(ctx context.Context, id int, s sr.Schema) (S, error)

	mu sync.Mutex // serialises additions to m
	m  atomic.Pointer[map[int]S]
}

// NewSchemas returns an empty Schemas fetching from reg the schemas of
// type typ (name is how errors call it) and making each with build. An
// error of build that is not a *DecodeError becomes one (ErrPayload, the
// schema id); one that wraps ErrUnavailable (a reference fetch that gave
// up) fails the job, as Of says.
func NewSchemas[S any](reg Registry, typ sr.SchemaType, name string, build func(ctx context.Context, id int, s sr.Schema) (S, error)) *Schemas[S] {
	c := &Schemas[S]{reg: reg, typ: typ, name: name, build: build}
	m := map[int]S{}
	c.m.Store(&m)
	return c
}

// Of returns what was made of schema id, fetching and making it on first
// use. Errors are *DecodeError naming id (an unknown id, a schema of
// another type, one that build refuses: the record is a dead letter), or
// wrap kafka.ErrFailJob when the registry stayed unavailable for its
// retry limit (R2: the job fails rather than drop a good record). An id
// that failed is asked for again at its next record.
func (c *Schemas[S]) Of(id int) (S, error) {
	if s, ok := (*c.m.Load())[id]; ok {
		return s, nil
	}
	return c.add(id)
}

func (c *Schemas[S]) add(id int) (S, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := (*c.m.Load())[id]; ok {
		return s, nil
	}
	var zero S
	ctx := context.Background()
	raw, err := c.reg.SchemaByID(ctx, id)
	if err != nil {
		return zero, decodeErr(id, ErrUnknownSchema, err)
	}
	if raw.Type != c.typ {
		return zero, Errorf(id, ErrPayload, "the schema is %s, not %s", raw.Type, c.name)
	}
	s, err := c.build(ctx, id, raw)
	if err != nil {
		return zero, decodeErr(id, ErrPayload, err)
	}
	old := *c.m.Load()
	m := make(map[int]S, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[id] = s
	c.m.Store(&m)
	return s, nil
}

// decodeErr words err, met while fetching or making schema id: as it is
// when it is a *DecodeError, failing the job when the registry stayed
// unavailable, else a *DecodeError of sentinel.
func decodeErr(id int, sentinel, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: %w", kafka.ErrFailJob, err)
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return err
	}
	return Errorf(id, sentinel, "%v", err)
}

// Target is the schema an encoder writes with, chosen when the encoder is
// made (C2): ID, if not 0, a schema fetched by id; else with AutoRegister,
// Schema registered under Subject (or found registered there); else the
// latest version of Subject. The codecs' Options carry these fields.
type Target struct {
	ID           int
	Subject      string
	AutoRegister bool
	Schema       string
}

// Find returns the id and the schema of t in reg, of type typ (name is
// how errors call it). check, if not nil, checks Schema before it is
// registered (so a schema that does not parse is not registered). Errors
// begin with pkg.
func (t Target) Find(ctx context.Context, reg Registry, pkg string, typ sr.SchemaType, name string, check func(sr.Schema) error) (int, sr.Schema, error) {
	var s sr.Schema
	var id int
	switch {
	case t.ID != 0:
		var err error
		if s, err = reg.SchemaByID(ctx, t.ID); err != nil {
			return 0, s, fmt.Errorf("%s: encoding schema id %d: %w", pkg, t.ID, err)
		}
		id = t.ID
	case t.AutoRegister:
		if t.Subject == "" || t.Schema == "" {
			return 0, s, fmt.Errorf("%s: AutoRegister needs Subject and Schema", pkg)
		}
		s = sr.Schema{Schema: t.Schema, Type: typ}
		if check != nil {
			if err := check(s); err != nil {
				return 0, s, fmt.Errorf("%s: Schema: %w", pkg, err)
			}
		}
		var err error
		if id, err = reg.Register(ctx, t.Subject, s); err != nil {
			return 0, s, fmt.Errorf("%s: %w", pkg, err)
		}
	case t.Subject != "":
		ss, err := reg.SchemaByVersion(ctx, t.Subject, -1)
		if err != nil {
			return 0, s, fmt.Errorf("%s: %w", pkg, err)
		}
		s, id = ss.Schema, ss.ID
	default:
		return 0, s, fmt.Errorf("%s: encoding needs Subject (its latest version), ID, or AutoRegister with Subject and Schema", pkg)
	}
	if s.Type != typ {
		return 0, s, fmt.Errorf("%s: schema id %d is %s, not %s", pkg, id, s.Type, name)
	}
	return id, s, nil
}

// Deserializer makes a kafka.Deserializer of decode, given the record's
// key (key) or value.
func Deserializer[T any](key bool, decode func(b []byte) (T, error)) kafka.Deserializer[T] {
	if key {
		return kafka.DeserializerFunc[T](func(r *kgo.Record) (T, error) { return decode(r.Key) })
	}
	return kafka.DeserializerFunc[T](func(r *kgo.Record) (T, error) { return decode(r.Value) })
}

// Serializer makes a kafka.SinkOptions.Serialize function of appendTo
// (which appends v in the wire format): the bytes are the record's key
// (asKey), or its value with key(v), if key is not nil, as its key.
func Serializer[T any](asKey bool, key func(T) []byte, appendTo func(b []byte, v T) ([]byte, error)) func(T) (*kgo.Record, error) {
	return func(v T) (*kgo.Record, error) {
		b, err := appendTo(nil, v)
		if err != nil {
			return nil, err
		}
		r := &kgo.Record{}
		if asKey {
			r.Key = b
			return r, nil
		}
		r.Value = b
		if key != nil {
			r.Key = key(v)
		}
		return r, nil
	}
}
