package schemaregistry

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// jsonCanRead reports why a document valid under writer may be invalid
// under reader. It checks a subset of JSON Schema, walking properties and
// items from the root:
//
//   - type: every type writer allows must be allowed by reader ("integer"
//     is read by "number"); a reader with a type reading a writer without
//     one is refused;
//   - required: a property reader requires that writer does not require
//     is refused unless the reader gives it a default;
//   - closed content models: a reader with additionalProperties false
//     refuses a writer that is open (additionalProperties not false) and
//     every property writer declares that reader does not;
//   - enum: every value writer allows must be in reader's enum;
//   - properties present in both and array items are checked
//     recursively; a property added to the reader is not refused (Confluent
//     refuses it for an open writer: this server is lenient there);
//   - the boolean schema false as reader refuses any writer but false.
//
// $ref, allOf/anyOf/oneOf/not, patterns, numeric and length bounds are not
// compared (documented in docs/kafka.md).
func jsonCanRead(reader, writer any) []string {
	var msgs []string
	jsonWalk("#", reader, writer, &msgs)
	return msgs
}

func jsonWalk(path string, reader, writer any, msgs *[]string) {
	add := func(format string, args ...any) { *msgs = append(*msgs, path+": "+fmt.Sprintf(format, args...)) }
	if rb, ok := reader.(bool); ok {
		if !rb {
			if wb, ok := writer.(bool); !ok || wb {
				add("the reader is the schema false, which rejects everything the writer allows")
			}
		}
		return
	}
	r, _ := reader.(map[string]any)
	if wb, ok := writer.(bool); ok {
		if wb && len(r) > 0 {
			add("the writer is the schema true (anything), the reader constrains it")
		}
		return
	}
	w, _ := writer.(map[string]any)
	rt, wt := jsonTypes(r), jsonTypes(w)
	if rt != nil {
		if wt == nil {
			add("the reader allows only type %v; the writer allows any type", rt)
		} else {
			for _, t := range wt {
				if !slices.Contains(rt, t) && !(t == "integer" && slices.Contains(rt, "number")) {
					add("type %s allowed by the writer is not allowed by the reader (%v)", t, rt)
				}
			}
		}
	}
	if re, ok := r["enum"].([]any); ok {
		we, wok := w["enum"].([]any)
		if !wok {
			add("the reader has an enum, the writer none")
		} else {
			for _, v := range we {
				if !slices.ContainsFunc(re, func(x any) bool { return jsonEqual(x, v) }) {
					add("enum value %s of the writer is not in the reader's enum", jsonText(v))
				}
			}
		}
	}
	rp, _ := r["properties"].(map[string]any)
	wp, _ := w["properties"].(map[string]any)
	wreq := jsonStrings(w["required"])
	for _, name := range jsonStrings(r["required"]) {
		if slices.Contains(wreq, name) {
			continue
		}
		if p, ok := rp[name].(map[string]any); ok {
			if _, ok := p["default"]; ok {
				continue
			}
		}
		add("property %q is required by the reader, not by the writer, and has no default", name)
	}
	if ra, ok := r["additionalProperties"].(bool); ok && !ra {
		if wa, ok := w["additionalProperties"].(bool); !ok || wa {
			add("the reader's content model is closed (additionalProperties false), the writer's open")
		}
		for _, name := range sortedKeys(wp) {
			if _, ok := rp[name]; !ok {
				add("property %q of the writer is not allowed by the reader's closed content model", name)
			}
		}
	}
	for _, name := range sortedKeys(rp) {
		if wv, ok := wp[name]; ok {
			jsonWalk(path+"/properties/"+name, rp[name], wv, msgs)
		}
	}
	if ri, ok := r["items"]; ok {
		if wi, ok := w["items"]; ok {
			jsonWalk(path+"/items", ri, wi, msgs)
		}
	}
}

// jsonTypes is the "type" keyword as a list; nil when absent.
func jsonTypes(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		return jsonStrings(t)
	}
	return nil
}

func jsonStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

func jsonEqual(a, b any) bool { return jsonText(a) == jsonText(b) }
