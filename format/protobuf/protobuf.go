package protobuf

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	_ "google.golang.org/protobuf/types/known/timestamppb" // the well-known types serialized descriptors import

	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/format"
)

// Options configure a Decoder and an Encoder. Registry is required.
type Options struct {
	// Registry is where the schemas of ids, and of their references, are
	// fetched.
	Registry format.Registry
	// Message is the full name of the message to encode (such as
	// shop.Order); decoding takes the message the record's index names.
	Message string
	// Subject is the subject whose latest version encoding writes with
	// (unless ID or AutoRegister).
	Subject string
	// ID, if not 0, is the schema id encoding writes with.
	ID int
	// AutoRegister registers Schema (the text of a .proto file, without
	// imports other than the well-known types) under Subject.
	AutoRegister bool
	Schema       string
	// Key: read and write the record's key instead of its value.
	Key bool
}

// compiled is one schema id compiled: its file, in which the message
// index is looked up.
type compiled struct {
	file protoreflect.FileDescriptor
}

// Decoder decodes Protobuf records in the Confluent wire format into
// dynamic messages built from the registry's descriptors (P1: an id is
// fetched and compiled once, with its references, by format.Schemas;
// decoding then takes no lock). Safe for concurrent use.
type Decoder struct {
	key   bool
	files *format.Schemas[compiled]
}

// NewDecoder validates o and makes a Decoder.
func NewDecoder(o Options) (*Decoder, error) {
	if o.Registry == nil {
		return nil, format.ErrNoRegistry("protobuf")
	}
	reg := o.Registry
	d := &Decoder{key: o.Key}
	d.files = format.NewSchemas(reg, sr.TypeProtobuf, "Protobuf", func(ctx context.Context, id int, s sr.Schema) (compiled, error) {
		f, err := Compile(ctx, reg, fmt.Sprintf("schema-%d.proto", id), s)
		if err != nil {
			return compiled{}, fmt.Errorf("the schema does not compile: %w", err)
		}
		return compiled{file: f}, nil
	})
	return d, nil
}

// Compile compiles schema text main (named name) with the schemas it
// references, fetched from reg (recursively), and the well-known types.
func Compile(ctx context.Context, reg format.Registry, name string, main sr.Schema) (protoreflect.FileDescriptor, error) {
	srcs := map[string]string{name: main.Schema}
	var fetch func(refs []sr.SchemaReference, depth int) error
	fetch = func(refs []sr.SchemaReference, depth int) error {
		if depth > 32 {
			return errors.New("references nested more than 32 deep")
		}
		for _, r := range refs {
			if _, ok := srcs[r.Name]; ok {
				continue
			}
			s, err := reg.SchemaByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				return fmt.Errorf("reference %s (subject %s version %d): %w", r.Name, r.Subject, r.Version, err)
			}
			srcs[r.Name] = s.Schema.Schema
			if err := fetch(s.References, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := fetch(main.References, 0); err != nil {
		return nil, err
	}
	if fd, ok, err := fromDescriptors(name, srcs); ok {
		return fd, err
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(srcs)})}
	fs, err := c.Compile(ctx, name)
	if err != nil {
		return nil, err
	}
	return fs[0], nil
}

// MessageAt returns the message of file f at index (top-level message
// index[0], its nested message index[1], ...).
func MessageAt(f protoreflect.FileDescriptor, index []int) (protoreflect.MessageDescriptor, error) {
	ms := f.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range index {
		if i < 0 || i >= ms.Len() {
			return nil, fmt.Errorf("message index %v: no message %d here", index, i)
		}
		md = ms.Get(i)
		ms = md.Messages()
	}
	if md == nil {
		return nil, errors.New("empty message index")
	}
	return md, nil
}

// IndexOf is MessageAt's inverse: the index of the message named full.
func IndexOf(f protoreflect.FileDescriptor, full protoreflect.FullName) ([]int, bool) {
	var walk func(ms protoreflect.MessageDescriptors, path []int) ([]int, bool)
	walk = func(ms protoreflect.MessageDescriptors, path []int) ([]int, bool) {
		for i := 0; i < ms.Len(); i++ {
			p := append(append([]int(nil), path...), i)
			if ms.Get(i).FullName() == full {
				return p, true
			}
			if r, ok := walk(ms.Get(i).Messages(), p); ok {
				return r, true
			}
		}
		return nil, false
	}
	return walk(f.Messages(), nil)
}

// parse reads header and index of b and returns the message descriptor
// they name and the payload.
func (d *Decoder) parse(b []byte) (int, protoreflect.MessageDescriptor, []byte, error) {
	id, rest, err := format.ParseHeader(b)
	if err != nil {
		return -1, nil, nil, err
	}
	index, payload, err := format.ParseIndex(id, rest)
	if err != nil {
		return id, nil, nil, err
	}
	c, err := d.files.Of(id)
	if err != nil {
		return id, nil, nil, err
	}
	md, err := MessageAt(c.file, index)
	if err != nil {
		return id, nil, nil, format.Errorf(id, format.ErrIndex, "%v", err)
	}
	return id, md, payload, nil
}

// Decode decodes b into a dynamic message of the type its index names.
func (d *Decoder) Decode(b []byte) (*dynamicpb.Message, error) {
	id, md, payload, err := d.parse(b)
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(payload, m); err != nil {
		return nil, format.Errorf(id, format.ErrPayload, "%v", err)
	}
	return m, nil
}

// DecodeInto decodes b into m, a generated message: the record's message
// must be of m's type (same full name), else the error names both.
func (d *Decoder) DecodeInto(b []byte, m proto.Message) error {
	id, md, payload, err := d.parse(b)
	if err != nil {
		return err
	}
	if want := m.ProtoReflect().Descriptor().FullName(); md.FullName() != want {
		return format.Errorf(id, format.ErrPayload, "record is a %s; want %s", md.FullName(), want)
	}
	if err := proto.Unmarshal(payload, m); err != nil {
		return format.Errorf(id, format.ErrPayload, "%v", err)
	}
	return nil
}

// Record decodes b into a JSON-like map (RecordOf).
func (d *Decoder) Record(b []byte) (map[string]any, error) {
	m, err := d.Decode(b)
	if err != nil {
		return nil, err
	}
	return RecordOf(m), nil
}

// Dynamic decodes records into dynamic messages.
func Dynamic(o Options) (kafka.Deserializer[*dynamicpb.Message], error) {
	d, err := NewDecoder(o)
	if err != nil {
		return nil, err
	}
	return format.Deserializer(d.key, d.Decode), nil
}

// Generated decodes records into the generated type T, made by newT for
// each record (such as func() *shop.Order { return new(shop.Order) }).
func Generated[T proto.Message](o Options, newT func() T) (kafka.Deserializer[T], error) {
	d, err := NewDecoder(o)
	if err != nil {
		return nil, err
	}
	return format.Deserializer(d.key, func(b []byte) (T, error) {
		m := newT()
		err := d.DecodeInto(b, m)
		return m, err
	}), nil
}

// Records decodes records into JSON-like maps (RecordOf).
func Records(o Options) (kafka.Deserializer[map[string]any], error) {
	d, err := NewDecoder(o)
	if err != nil {
		return nil, err
	}
	return format.Deserializer(d.key, d.Record), nil
}

// RecordOf converts a message into a JSON-like map keyed by the fields'
// proto names: numbers float64, enums their value's name, bytes base64,
// google.protobuf.Timestamp Unix milliseconds (usable as the event time),
// messages maps, repeated fields []any, map fields maps. Fields of
// messages not set and oneofs not chosen are absent; scalars not set
// have their default.
func RecordOf(m protoreflect.Message) map[string]any {
	md := m.Descriptor()
	out := make(map[string]any, md.Fields().Len())
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if (fd.Message() != nil || fd.ContainingOneof() != nil || fd.HasPresence()) && !m.Has(fd) {
			continue
		}
		out[string(fd.Name())] = fieldJSON(fd, m.Get(fd))
	}
	return out
}

func fieldJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case fd.IsList():
		l := v.List()
		a := make([]any, l.Len())
		for i := range a {
			a[i] = valueJSON(fd, l.Get(i))
		}
		return a
	case fd.IsMap():
		out := map[string]any{}
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			out[k.String()] = valueJSON(fd.MapValue(), mv)
			return true
		})
		return out
	}
	return valueJSON(fd, v)
}

func valueJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return float64(v.Int())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return float64(v.Uint())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return float64(v.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		msg := v.Message()
		if msg.Descriptor().FullName() == "google.protobuf.Timestamp" {
			f := msg.Descriptor().Fields()
			sec, nanos := msg.Get(f.ByName("seconds")).Int(), msg.Get(f.ByName("nanos")).Int()
			return float64(sec*1000) + float64(nanos)/1e6
		}
		return RecordOf(msg)
	}
	return nil
}

// FromRecord fills a new message of md from a JSON-like map (RecordOf's
// inverse): keys are field names; unknown keys are an error.
func FromRecord(md protoreflect.MessageDescriptor, r map[string]any) (*dynamicpb.Message, error) {
	m := dynamicpb.NewMessage(md)
	return m, fill(m, r, "")
}

func fill(m protoreflect.Message, r map[string]any, path string) error {
	fs := m.Descriptor().Fields()
	for k, v := range r {
		fd := fs.ByName(protoreflect.Name(k))
		if fd == nil {
			fd = fs.ByJSONName(k)
		}
		p := k
		if path != "" {
			p = path + "." + k
		}
		if fd == nil {
			return fmt.Errorf("%s: no such field in %s", p, m.Descriptor().FullName())
		}
		if v == nil {
			continue
		}
		switch {
		case fd.IsList():
			a, ok := v.([]any)
			if !ok {
				return fmt.Errorf("%s: got %T; want a list", p, v)
			}
			l := m.Mutable(fd).List()
			for i, e := range a {
				pv, err := protoValue(fd, l.NewElement, e, fmt.Sprintf("%s[%d]", p, i))
				if err != nil {
					return err
				}
				l.Append(pv)
			}
		case fd.IsMap():
			mm, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: got %T; want an object", p, v)
			}
			dst := m.Mutable(fd).Map()
			for mk, e := range mm {
				key, err := protoValue(fd.MapKey(), nil, mk, p+"."+mk)
				if err != nil {
					return err
				}
				pv, err := protoValue(fd.MapValue(), dst.NewValue, e, p+"."+mk)
				if err != nil {
					return err
				}
				dst.Set(key.MapKey(), pv)
			}
		default:
			pv, err := protoValue(fd, func() protoreflect.Value { return m.NewField(fd) }, v, p)
			if err != nil {
				return err
			}
			m.Set(fd, pv)
		}
	}
	return nil
}

func protoValue(fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, v any, p string) (protoreflect.Value, error) {
	num := func() (float64, error) {
		switch x := v.(type) {
		case float64:
			return x, nil
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		}
		return 0, fmt.Errorf("%s: got %T; want a number", p, v)
	}
	whole := func(lo, hi float64) (float64, error) {
		f, err := num()
		if err == nil && (f != math.Trunc(f) || f < lo || f > hi) {
			err = fmt.Errorf("%s: %v is not a whole number in range", p, f)
		}
		return f, err
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, ok := v.(bool)
		if !ok {
			return protoreflect.Value{}, fmt.Errorf("%s: got %T; want a boolean", p, v)
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		f, err := whole(math.MinInt32, math.MaxInt32)
		return protoreflect.ValueOfInt32(int32(f)), err
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		f, err := whole(math.MinInt64, math.MaxInt64)
		return protoreflect.ValueOfInt64(int64(f)), err
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		f, err := whole(0, math.MaxUint32)
		return protoreflect.ValueOfUint32(uint32(f)), err
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		f, err := whole(0, math.MaxUint64)
		return protoreflect.ValueOfUint64(uint64(f)), err
	case protoreflect.FloatKind:
		f, err := num()
		return protoreflect.ValueOfFloat32(float32(f)), err
	case protoreflect.DoubleKind:
		f, err := num()
		return protoreflect.ValueOfFloat64(f), err
	case protoreflect.StringKind:
		s, ok := v.(string)
		if !ok {
			return protoreflect.Value{}, fmt.Errorf("%s: got %T; want a string", p, v)
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		s, ok := v.(string)
		if !ok {
			return protoreflect.Value{}, fmt.Errorf("%s: got %T; want a base64 string", p, v)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("%s: not base64: %v", p, err)
		}
		return protoreflect.ValueOfBytes(b), nil
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok {
			ev := fd.Enum().Values().ByName(protoreflect.Name(s))
			if ev == nil {
				return protoreflect.Value{}, fmt.Errorf("%s: %q is not a value of %s", p, s, fd.Enum().FullName())
			}
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		f, err := whole(math.MinInt32, math.MaxInt32)
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(f)), err
	case protoreflect.MessageKind, protoreflect.GroupKind:
		mv := newMsg()
		msg := mv.Message()
		if msg.Descriptor().FullName() == "google.protobuf.Timestamp" {
			var t time.Time
			switch x := v.(type) {
			case string:
				var err error
				if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
					return protoreflect.Value{}, fmt.Errorf("%s: %q: want RFC 3339 or Unix milliseconds", p, x)
				}
			default:
				f, err := num()
				if err != nil {
					return protoreflect.Value{}, err
				}
				t = time.UnixMicro(int64(math.Round(f * 1000)))
			}
			f := msg.Descriptor().Fields()
			msg.Set(f.ByName("seconds"), protoreflect.ValueOfInt64(t.Unix()))
			msg.Set(f.ByName("nanos"), protoreflect.ValueOfInt32(int32(t.Nanosecond())))
			return mv, nil
		}
		r, ok := v.(map[string]any)
		if !ok {
			return protoreflect.Value{}, fmt.Errorf("%s: got %T; want an object", p, v)
		}
		return mv, fill(msg, r, p)
	}
	return protoreflect.Value{}, fmt.Errorf("%s: unsupported field kind %v", p, fd.Kind())
}

// Encoder writes messages of one type in the wire format with one
// registered schema, found when it is made.
type Encoder struct {
	id     int
	md     protoreflect.MessageDescriptor
	header []byte
}

// NewEncoder finds the schema (Options.ID, AutoRegister or the latest
// version of Subject), compiles it and finds Message in it.
func NewEncoder(ctx context.Context, o Options) (*Encoder, error) {
	if o.Registry == nil {
		return nil, format.ErrNoRegistry("protobuf")
	}
	if o.Message == "" {
		return nil, errors.New("protobuf: Options.Message is empty; give the full name of the message to write, such as shop.Order")
	}
	t := format.Target{ID: o.ID, Subject: o.Subject, AutoRegister: o.AutoRegister, Schema: o.Schema}
	id, s, err := t.Find(ctx, o.Registry, "protobuf", sr.TypeProtobuf, "Protobuf", func(s sr.Schema) error {
		_, err := Compile(ctx, o.Registry, "main.proto", s)
		return err
	})
	if err != nil {
		return nil, err
	}
	f, err := Compile(ctx, o.Registry, "main.proto", s)
	if err != nil {
		return nil, fmt.Errorf("protobuf: schema id %d: %w", id, err)
	}
	index, ok := IndexOf(f, protoreflect.FullName(o.Message))
	if !ok {
		return nil, fmt.Errorf("protobuf: schema id %d has no message %s", id, o.Message)
	}
	md, _ := MessageAt(f, index)
	return &Encoder{id: id, md: md, header: format.AppendIndex(format.AppendHeader(nil, id), index)}, nil
}

// ID is the schema id the Encoder writes with.
func (e *Encoder) ID() int { return e.id }

// Append appends m (of the Encoder's message type) in the wire format.
func (e *Encoder) Append(b []byte, m proto.Message) ([]byte, error) {
	if got := m.ProtoReflect().Descriptor().FullName(); got != e.md.FullName() {
		return nil, fmt.Errorf("protobuf: schema id %d writes %s; got a %s", e.id, e.md.FullName(), got)
	}
	b = append(b, e.header...)
	return proto.MarshalOptions{}.MarshalAppend(b, m)
}

// AppendRecord appends a JSON-like map (FromRecord) in the wire format.
func (e *Encoder) AppendRecord(b []byte, r map[string]any) ([]byte, error) {
	m, err := FromRecord(e.md, r)
	if err != nil {
		return nil, fmt.Errorf("protobuf: schema id %d: %w", e.id, err)
	}
	return e.Append(b, m)
}

// AppendValue appends a JSON-like value, which must be an object (a
// map[string]any, FromRecord), in the wire format.
func (e *Encoder) AppendValue(b []byte, v any) ([]byte, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("protobuf: schema id %d writes the message %s; got %T, want an object", e.id, e.md.FullName(), v)
	}
	return e.AppendRecord(b, m)
}

// Serializer returns a kafka.SinkOptions.Serialize function for messages.
func Serializer[T proto.Message](ctx context.Context, o Options, key func(T) []byte) (func(T) (*kgo.Record, error), error) {
	e, err := NewEncoder(ctx, o)
	if err != nil {
		return nil, err
	}
	return format.Serializer(o.Key, key, func(b []byte, m T) ([]byte, error) { return e.Append(b, m) }), nil
}

// RecordSerializer is Serializer for JSON-like maps.
func RecordSerializer(ctx context.Context, o Options, key func(map[string]any) []byte) (func(map[string]any) (*kgo.Record, error), error) {
	e, err := NewEncoder(ctx, o)
	if err != nil {
		return nil, err
	}
	return format.Serializer(o.Key, key, e.AppendRecord), nil
}

// fromDescriptors builds the file name of srcs when every schema in srcs
// is a base64 FileDescriptorProto (the form Confluent's Java, JavaScript
// and Go serializers register), with the well-known types linked into
// this binary; ok is false when any schema is .proto text.
func fromDescriptors(name string, srcs map[string]string) (protoreflect.FileDescriptor, bool, error) {
	fdps := map[string]*descriptorpb.FileDescriptorProto{}
	for n, text := range srcs {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
		if err != nil {
			return nil, false, nil
		}
		fdp := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fdp); err != nil {
			return nil, false, nil
		}
		fdp.Name = proto.String(n)
		fdps[n] = fdp
	}
	files := new(protoregistry.Files)
	var add func(n string, depth int) error
	add = func(n string, depth int) error {
		if _, err := files.FindFileByPath(n); err == nil {
			return nil
		}
		fdp, ok := fdps[n]
		if !ok {
			if _, err := protoregistry.GlobalFiles.FindFileByPath(n); err == nil {
				return nil
			}
			return fmt.Errorf("import %s: not among the schema's references", n)
		}
		if depth > 32 {
			return errors.New("imports nested more than 32 deep")
		}
		for _, dep := range fdp.GetDependency() {
			if err := add(dep, depth+1); err != nil {
				return err
			}
		}
		fd, err := protodesc.NewFile(fdp, resolverOf{files})
		if err != nil {
			return err
		}
		return files.RegisterFile(fd)
	}
	if err := add(name, 0); err != nil {
		return nil, true, err
	}
	fd, err := files.FindFileByPath(name)
	return fd, true, err
}

// resolverOf finds files in local, then among the well-known types.
type resolverOf struct{ local *protoregistry.Files }

func (r resolverOf) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.local.FindFileByPath(p); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(p)
}

func (r resolverOf) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.local.FindDescriptorByName(n); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(n)
}
