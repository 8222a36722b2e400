package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Record is one record of a pipeline: a JSON object decoded with
// encoding/json (numbers are float64, nested objects Record-shaped maps,
// arrays []any). A record is owned by the operator holding it; operators
// that change a record (map, agent, window results) make a new one, so a
// record emitted on two outputs (a sort's main output and its violations)
// is never modified behind the other's back (P6).
type Record = map[string]any

// fieldPath is a compiled field path ("a.b.c"): the keys of nested objects.
type fieldPath []string

func parseFieldPath(s string) (fieldPath, error) {
	if s == "" {
		return nil, fmt.Errorf("empty field path; want a field name such as item or a dotted path such as order.item")
	}
	p := strings.Split(s, ".")
	for _, k := range p {
		if k == "" {
			return nil, fmt.Errorf("field path %q has an empty part; want names separated by single dots, such as order.item", s)
		}
	}
	return p, nil
}

func (p fieldPath) String() string { return strings.Join(p, ".") }

// get returns the value at p, or nil and false when a part is missing or
// not an object.
func (p fieldPath) get(r Record) (any, bool) {
	var cur any = r
	for _, k := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// last is the name of the path's last part (the field a key-by names in a
// window's results).
func (p fieldPath) last() string { return p[len(p)-1] }

// timestampOf reads an event time at p: a number of Unix milliseconds, or
// a string in RFC 3339 (with or without fractional seconds), or a string
// holding an integer of milliseconds.
func timestampOf(r Record, p fieldPath) (int64, bool) {
	v, ok := p.get(r)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || x < -(1<<53) || x > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, true
		}
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return 0, false
		}
		return t.UnixMilli(), true
	}
	return 0, false
}

// keyString turns a key field's value into the key: strings as they are,
// numbers in their shortest form, anything else (bools, objects, arrays,
// null) as JSON. A missing field is the key "" (records without the field
// share one key).
func keyString(v any, ok bool) string {
	if !ok || v == nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// number reads v as a float64 for sum, min, max and avg: finite numbers,
// and strings that parse as finite numbers; ok is false for anything else
// (also for "NaN" and "Inf", which would make a window's result one JSON
// cannot hold).
func number(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, false
		}
	case string:
		var err error
		if f, err = strconv.ParseFloat(x, 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// decodeRecord decodes one JSON object.
func decodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("not a JSON object (null)")
	}
	return r, nil
}

// cloneRecord copies the top level of r (nested values are shared: no
// operator changes a nested value in place).
func cloneRecord(r Record, extra int) Record {
	out := make(Record, len(r)+extra)
	for k, v := range r {
		out[k] = v
	}
	return out
}
