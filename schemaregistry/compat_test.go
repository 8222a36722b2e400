package schemaregistry

import (
	"strings"
	"testing"
)

func mustParse(t *testing.T, typ, text string) *parsed {
	t.Helper()
	p, e := parseSchema(typ, text, nil)
	if e != nil {
		t.Fatalf("parse %s: %v", text, e)
	}
	return p
}

// compatCase: registering next after olds (oldest first) under level.
type compatCase struct {
	name  string
	level string
	olds  []string
	next  string
	ok    bool
}

func runCompat(t *testing.T, typ string, cases []compatCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var olds []*parsed
			for _, o := range c.olds {
				olds = append(olds, mustParse(t, typ, o))
			}
			msgs := checkLevel(c.level, mustParse(t, typ, c.next), olds)
			if (len(msgs) == 0) != c.ok {
				t.Fatalf("%s: compatible = %v (%s); want %v", c.level, len(msgs) == 0, strings.Join(msgs, "; "), c.ok)
			}
		})
	}
}

func avroRecord(fields string) string {
	return `{"type":"record","name":"R","fields":[` + fields + `]}`
}

func TestAvroCompatibility(t *testing.T) {
	var (
		a        = avroRecord(`{"name":"a","type":"int"}`)
		aLong    = avroRecord(`{"name":"a","type":"long"}`)
		aDouble  = avroRecord(`{"name":"a","type":"double"}`)
		aString  = avroRecord(`{"name":"a","type":"string"}`)
		aBytes   = avroRecord(`{"name":"a","type":"bytes"}`)
		ab       = avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string"}`)
		abDef    = avroRecord(`{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}`)
		aOpt     = avroRecord(`{"name":"a","type":["null","int"],"default":null}`)
		enum2    = `{"type":"enum","name":"E","symbols":["A","B"]}`
		enum3    = `{"type":"enum","name":"E","symbols":["A","B","C"]}`
		enum2Def = `{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}`
		other    = `{"type":"record","name":"Other","fields":[{"name":"a","type":"int"}]}`
	)
	runCompat(t, typeAvro, []compatCase{
		{"added field with default is backward", LevelBackward, []string{a}, abDef, true},
		{"added field without default is not backward", LevelBackward, []string{a}, ab, false},
		{"added field without default is forward", LevelForward, []string{a}, ab, true},
		{"removed field is backward", LevelBackward, []string{ab}, a, true},
		{"removed field without default is not forward", LevelForward, []string{ab}, a, false},
		{"removed field with default is full", LevelFull, []string{abDef}, a, true},
		{"int to long promotes (backward)", LevelBackward, []string{a}, aLong, true},
		{"int to double promotes (backward)", LevelBackward, []string{a}, aDouble, true},
		{"long to int does not (backward)", LevelBackward, []string{aLong}, a, false},
		{"int to long is not forward", LevelForward, []string{a}, aLong, false},
		{"string to bytes both ways", LevelFull, []string{aString}, aBytes, true},
		{"int to string is not", LevelBackward, []string{a}, aString, false},
		{"int into a union with null is backward", LevelBackward, []string{a}, aOpt, true},
		{"union to int is not backward", LevelBackward, []string{aOpt}, a, false},
		{"enum symbol added is backward", LevelBackward, []string{enum2}, enum3, true},
		{"enum symbol removed is not backward", LevelBackward, []string{enum3}, enum2, false},
		{"enum symbol removed with a reader default is backward", LevelBackward, []string{enum3}, enum2Def, true},
		{"renamed record is not", LevelBackward, []string{a}, other, false},
		{"NONE accepts anything", LevelNone, []string{a}, aString, true},
		// Transitive: v1 a, v2 a+b(default), v3 drops b's default... v3 = a+b
		// without default reads v2 (has b) but not v1.
		{"backward checks only the latest", LevelBackward, []string{a, abDef}, ab, true},
		{"backward transitive checks all", LevelBackwardTransitive, []string{a, abDef}, ab, false},
		{"forward transitive checks all", LevelForwardTransitive, []string{abDef, a}, aLong, false},
		{"full transitive", LevelFullTransitive, []string{a, abDef}, abDef, true},
	})
}

func TestJSONSchemaCompatibility(t *testing.T) {
	var (
		obj        = `{"type":"object","properties":{"a":{"type":"integer"}}}`
		objNum     = `{"type":"object","properties":{"a":{"type":"number"}}}`
		objStr     = `{"type":"object","properties":{"a":{"type":"string"}}}`
		objReqB    = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]}`
		objReqBDef = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","default":""}},"required":["b"]}`
		objOptB    = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}}`
		closed     = `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}`
		closedAB   = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"additionalProperties":false}`
		enumAB     = `{"type":"string","enum":["a","b"]}`
		enumABC    = `{"type":"string","enum":["a","b","c"]}`
		arrInt     = `{"type":"array","items":{"type":"integer"}}`
		arrStr     = `{"type":"array","items":{"type":"string"}}`
	)
	runCompat(t, typeJSON, []compatCase{
		{"added optional property is backward", LevelBackward, []string{obj}, objOptB, true},
		{"added required property is not backward", LevelBackward, []string{obj}, objReqB, false},
		{"added required property with default is backward", LevelBackward, []string{obj}, objReqBDef, true},
		{"added required property is forward", LevelForward, []string{obj}, objReqB, true},
		{"integer widened to number is backward", LevelBackward, []string{obj}, objNum, true},
		{"number narrowed to integer is not backward", LevelBackward, []string{objNum}, obj, false},
		{"type changed is not", LevelBackward, []string{obj}, objStr, false},
		{"closing an open model is not backward", LevelBackward, []string{obj}, closed, false},
		{"closed reader without a writer's property is not", LevelBackward, []string{closedAB}, closed, false},
		{"closed reader with the writer's properties is", LevelBackward, []string{closed}, closedAB, true},
		{"enum value added is backward", LevelBackward, []string{enumAB}, enumABC, true},
		{"enum value removed is not backward", LevelBackward, []string{enumABC}, enumAB, false},
		{"array items type changed is not", LevelBackward, []string{arrInt}, arrStr, false},
		{"full with an optional property", LevelFull, []string{obj}, objOptB, true},
	})
}

func TestProtobufCompatibility(t *testing.T) {
	proto := func(body string) string { return "syntax = \"proto3\";\npackage shop;\n" + body }
	var (
		v1        = proto(`message Order { int64 id = 1; string note = 2; }`)
		added     = proto(`message Order { int64 id = 1; string note = 2; double amount = 3; }`)
		removed   = proto(`message Order { int64 id = 1; }`)
		intKind   = proto(`message Order { int32 id = 1; string note = 2; }`)
		bytesNote = proto(`message Order { int64 id = 1; bytes note = 2; }`)
		reused    = proto(`message Order { int64 id = 1; double note = 2; }`)
		repeated  = proto(`message Order { repeated int64 id = 1; string note = 2; }`)
		renamed   = proto(`message Sale { int64 id = 1; string note = 2; }`)
		oneof     = proto(`message Order { oneof key { int64 id = 1; string note = 2; } }`)
		p2        = "syntax = \"proto2\";\npackage shop;\nmessage Order { optional int64 id = 1; }"
		p2Req     = "syntax = \"proto2\";\npackage shop;\nmessage Order { optional int64 id = 1; required string note = 2; }"
	)
	runCompat(t, typeProtobuf, []compatCase{
		{"added field is full", LevelFull, []string{v1}, added, true},
		{"removed optional field is full", LevelFull, []string{v1}, removed, true},
		{"int64 to int32 shares the wire type", LevelBackward, []string{v1}, intKind, true},
		{"string to bytes", LevelFull, []string{v1}, bytesNote, true},
		{"field number reused with another type is not", LevelBackward, []string{v1}, reused, false},
		{"singular to repeated is not", LevelBackward, []string{v1}, repeated, false},
		{"message removed is not", LevelBackward, []string{v1}, renamed, false},
		{"fields moved into a oneof is not", LevelBackward, []string{v1}, oneof, false},
		{"required field added is not backward", LevelBackward, []string{p2}, p2Req, false},
		{"required field removed is not forward", LevelForward, []string{p2Req}, p2, false},
		{"field number reused under NONE", LevelNone, []string{v1}, reused, true},
	})
}

func TestInvalidSchemasAreRefused(t *testing.T) {
	for _, c := range []struct{ typ, text string }{
		{typeAvro, `{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}`},
		{typeAvro, `{"type":"record","name":"R"}`},
		{typeJSON, `[1,2]`},
		{typeJSON, `{"type":"object"} trailing`},
		{typeProtobuf, `syntax = "proto3"; message M { int64 id = 1 }`},
		{typeProtobuf, `syntax = "proto3"; import "missing.proto"; message M { Missing m = 1; }`},
	} {
		if _, e := parseSchema(c.typ, c.text, nil); e == nil || e.Code != CodeInvalidSchema {
			t.Errorf("%s %s: error %v; want 42201", c.typ, c.text, e)
		}
	}
}
