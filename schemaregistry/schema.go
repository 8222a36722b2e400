package schemaregistry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The schema types, as the API and the topic name them.
const (
	typeAvro     = "AVRO"
	typeProtobuf = "PROTOBUF"
	typeJSON     = "JSON"
)

var schemaTypes = []string{typeJSON, typeProtobuf, typeAvro}

// parsed is a schema ready for compatibility checks: exactly one of avro,
// json and proto is set, by typ.
type parsed struct {
	typ   string
	avro  avro.Schema
	json  any
	proto protoreflect.FileDescriptor
}

// canonical is the text a schema is stored and compared under (I2): JSON
// (Avro and JSON Schema) without insignificant whitespace, Protobuf text
// with surrounding whitespace trimmed. Key order and everything else is
// kept, so the text given back is the text registered, compacted.
func canonical(schemaType, text string) (string, *Error) {
	if schemaType == typeProtobuf {
		t := strings.TrimSpace(text)
		if t == "" {
			return "", apiErr(CodeInvalidSchema, "Invalid schema: empty")
		}
		return t, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return "", apiErr(CodeInvalidSchema, "Invalid schema %s: not JSON: %v", abbrev(text), err)
	}
	return b.String(), nil
}

// resolved is a schema and its references' texts, transitively, in an
// order where each referenced schema comes before the ones naming it.
type resolved struct {
	name string // the reference's name; "" for the schema itself
	text string
}

// parseSchema parses text of schemaType with deps (see resolved) and
// reports a 42201 error naming what is wrong.
func parseSchema(schemaType, text string, deps []resolved) (*parsed, *Error) {
	switch schemaType {
	case typeAvro:
		cache := &avro.SchemaCache{}
		for _, d := range deps {
			if _, err := avro.ParseWithCache(d.text, "", cache); err != nil {
				return nil, apiErr(CodeInvalidSchema, "Invalid schema: reference %q: %v", d.name, err)
			}
		}
		s, err := avro.ParseWithCache(text, "", cache)
		if err != nil {
			return nil, apiErr(CodeInvalidSchema, "Invalid schema %s: %v", abbrev(text), err)
		}
		return &parsed{typ: typeAvro, avro: s}, nil
	case typeJSON:
		var v any
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, apiErr(CodeInvalidSchema, "Invalid schema %s: %v", abbrev(text), err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, apiErr(CodeInvalidSchema, "Invalid schema %s: text after the JSON value", abbrev(text))
		}
		switch v.(type) {
		case map[string]any, bool:
		default:
			return nil, apiErr(CodeInvalidSchema, "Invalid schema %s: a JSON Schema is an object or a boolean", abbrev(text))
		}
		return &parsed{typ: typeJSON, json: v}, nil
	case typeProtobuf:
		fd, e := parseProto(text, deps)
		if e != nil {
			return nil, e
		}
		return &parsed{typ: typeProtobuf, proto: fd}, nil
	}
	return nil, apiErr(CodeInvalidSchema, "Invalid schema type %q; want AVRO, PROTOBUF or JSON", schemaType)
}

// abbrev shortens a schema for an error message.
func abbrev(s string) string {
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// protoMain is the file name a Protobuf schema given as text is compiled
// under (its imports are the names of its references).
const protoMain = "schema.proto"

// parseProto compiles a Protobuf schema and its references, each either
// .proto text or, as Confluent's JavaScript and Go serializers send it, a
// base64 serialized FileDescriptorProto. google/protobuf/*.proto imports
// need no reference.
func parseProto(text string, deps []resolved) (protoreflect.FileDescriptor, *Error) {
	files := map[string]protocompile.SearchResult{}
	main := protoMain
	if fdp := decodeDescriptor(text); fdp != nil {
		if fdp.GetName() != "" {
			main = fdp.GetName()
		}
		fdp.Name = proto.String(main)
		files[main] = protocompile.SearchResult{Proto: fdp}
	} else {
		files[main] = protocompile.SearchResult{Source: strings.NewReader(text)}
	}
	for _, d := range deps {
		if d.name == main {
			return nil, apiErr(CodeInvalidSchema, "Invalid schema: a reference is named %q like the schema itself", d.name)
		}
		if fdp := decodeDescriptor(d.text); fdp != nil {
			fdp.Name = proto.String(d.name)
			files[d.name] = protocompile.SearchResult{Proto: fdp}
		} else {
			files[d.name] = protocompile.SearchResult{Source: strings.NewReader(d.text)}
		}
	}
	var errs []string
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(name string) (protocompile.SearchResult, error) {
			if r, ok := files[name]; ok {
				return r, nil
			}
			return protocompile.SearchResult{}, fmt.Errorf("%q is not a reference of the schema", name)
		})),
		Reporter: reporter.NewReporter(func(err reporter.ErrorWithPos) error {
			errs = append(errs, err.Error())
			return nil // report every error, then fail
		}, nil),
	}
	fds, err := c.Compile(context.Background(), main)
	if err != nil {
		if len(errs) == 0 {
			errs = append(errs, err.Error())
		}
		return nil, apiErr(CodeInvalidSchema, "Invalid schema: %s", strings.Join(errs, "; "))
	}
	return fds[0], nil
}

// decodeDescriptor returns the FileDescriptorProto that text encodes in
// base64, or nil when text is not one (.proto text has spaces or
// punctuation base64 has not).
func decodeDescriptor(text string) *descriptorpb.FileDescriptorProto {
	if strings.ContainsAny(text, " \t\n;{}\"") {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil
	}
	fdp := &descriptorpb.FileDescriptorProto{}
	if proto.Unmarshal(b, fdp) != nil {
		return nil
	}
	return fdp
}

// serialized is the schema as ?format=serialized asks for it: a Protobuf
// schema as a base64 FileDescriptorProto (given back as registered when
// it was registered so), anything else as stored.
func serialized(sc *stored, p *parsed) string {
	if sc.schemaType != typeProtobuf || decodeDescriptor(sc.schema) != nil || p == nil {
		return sc.schema
	}
	fdp := protodesc.ToFileDescriptorProto(p.proto)
	fdp.SourceCodeInfo = nil
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(fdp)
	return base64.StdEncoding.EncodeToString(b)
}
