package model

import (
	"encoding/json"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// genSchema draws a JSON Schema of the kinds the offline model fills:
// objects (with required properties and additionalProperties false),
// arrays with minItems, strings with lengths, integers and numbers with
// bounds, booleans, enums, nullable types.
func genSchema(t *rapid.T, depth int) map[string]any {
	kinds := []string{"string", "integer", "number", "boolean", "enum"}
	if depth < 3 {
		kinds = append(kinds, "object", "array")
	}
	kind := rapid.SampledFrom(kinds).Draw(t, "kind")
	s := map[string]any{}
	switch kind {
	case "object":
		s["type"] = "object"
		props := map[string]any{}
		var req []any
		for i := range rapid.IntRange(0, 4).Draw(t, "props") {
			name := fmt.Sprintf("p%d", i)
			props[name] = genSchema(t, depth+1)
			if rapid.Bool().Draw(t, "required") {
				req = append(req, name)
			}
		}
		s["properties"] = props
		if len(req) > 0 {
			s["required"] = req
		}
		if rapid.Bool().Draw(t, "closed") {
			s["additionalProperties"] = false
		}
	case "array":
		s["type"] = "array"
		s["items"] = genSchema(t, depth+1)
		s["minItems"] = rapid.IntRange(0, 3).Draw(t, "minItems")
	case "string":
		s["type"] = "string"
		if rapid.Bool().Draw(t, "minLength?") {
			s["minLength"] = rapid.IntRange(0, 50).Draw(t, "minLength")
		} else if rapid.Bool().Draw(t, "maxLength?") {
			s["maxLength"] = rapid.IntRange(1, 5).Draw(t, "maxLength")
		}
	case "integer", "number":
		s["type"] = kind
		lo := rapid.IntRange(-100, 100).Draw(t, "lo")
		switch rapid.IntRange(0, 3).Draw(t, "bounds") {
		case 1:
			s["minimum"] = lo
		case 2:
			s["maximum"] = lo
		case 3:
			s["minimum"], s["maximum"] = lo, lo+rapid.IntRange(0, 10).Draw(t, "width")
		}
	case "boolean":
		s["type"] = "boolean"
	case "enum":
		s["enum"] = []any{rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "e0"), "z"}
	}
	if kind != "enum" && rapid.IntRange(0, 5).Draw(t, "nullable") == 0 {
		s["type"] = []any{"null", s["type"]}
	}
	return s
}

// TestOfflineConformsToAnySchema: for schemas drawn at random, the offline
// model's structured answer conforms (so it can stand in for a model in
// tests and demos), and its deliberate mistake does not.
func TestOfflineConformsToAnySchema(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		schema := genSchema(t, 0)
		raw, err := json.Marshal(schema)
		if err != nil {
			t.Fatal(err)
		}
		rf := &ResponseFormat{Name: "s", Schema: raw}
		prompt := rapid.StringN(0, 20, -1).Draw(t, "prompt")
		req := Request{Messages: []Message{User(prompt)}, ResponseFormat: rf}
		r, err := (&Offline{}).Reply(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := rf.Validate(r.Message.Content); err != nil {
			t.Fatalf("schema %s: answer %s: %v", raw, r.Message.Content, err)
		}
		r, err = (&Offline{SchemaMistakes: 1}).Reply(req)
		if err != nil {
			t.Fatal(err)
		}
		if rf.Validate(r.Message.Content) == nil {
			t.Fatalf("schema %s: the mistaken answer %s conforms", raw, r.Message.Content)
		}
	})
}
