package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/reflect/protoreflect"
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
		const main = "weir-schema-registry-input.proto"
		files := map[string]string{main: text}
		for _, d := range deps {
			files[d.name] = d.text
		}
		var errs []string
		c := protocompile.Compiler{
			Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(files)}),
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
			return nil, apiErr(CodeInvalidSchema, "Invalid schema: %s", strings.ReplaceAll(strings.Join(errs, "; "), main+":", "line "))
		}
		return &parsed{typ: typeProtobuf, proto: fds[0]}, nil
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
