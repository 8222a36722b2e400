package avro

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"time"

	havro "github.com/hamba/avro/v2"
)

// This file converts between hamba/avro's native values and the JSON-like
// values of weir's pipeline records (numbers float64, objects
// map[string]any, arrays []any), walking the schema beside the value (A4):
//
//	Avro                              JSON-like
//	int, long, float, double          float64 (a long beyond 2^53 loses precision)
//	timestamp-millis/-micros (local)  float64 Unix milliseconds (micros as a fraction)
//	date                              string "2006-01-02"
//	time-millis/-micros               float64 milliseconds
//	decimal                           string, exactly scale digits after the point
//	uuid, string, enum                string
//	bytes, fixed                      string, standard base64
//	union                             the branch's value, unwrapped (null: nil)
//	record, map / array               map[string]any / []any

// RecordOf converts m, a record decoded by hamba/avro into a
// map[string]any with schema shape, into JSON-like values, in place, and
// returns it.
func RecordOf(shape havro.Schema, m map[string]any) map[string]any {
	rs, ok := deref(shape).(*havro.RecordSchema)
	if !ok || m == nil {
		return m
	}
	for _, f := range rs.Fields() {
		if v, ok := m[f.Name()]; ok {
			m[f.Name()] = toJSON(f.Type(), v)
		}
	}
	return m
}

func deref(s havro.Schema) havro.Schema {
	if r, ok := s.(*havro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// typeName is the key of a union's branch in hamba/avro's map form.
func typeName(s havro.Schema) string {
	s = deref(s)
	if n, ok := s.(havro.NamedSchema); ok {
		return n.FullName()
	}
	name := string(s.Type())
	if lt := logical(s); lt != "" {
		name += "." + string(lt)
	}
	return name
}

func logical(s havro.Schema) havro.LogicalType {
	if l, ok := s.(havro.LogicalTypeSchema); ok && l.Logical() != nil {
		return l.Logical().Type()
	}
	return ""
}

func toJSON(s havro.Schema, v any) any {
	if v == nil {
		return nil
	}
	s = deref(s)
	switch s := s.(type) {
	case *havro.UnionSchema:
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for k, inner := range m {
				for _, b := range s.Types() {
					if typeName(b) == k {
						return toJSON(b, inner)
					}
				}
			}
		}
		return plain(v)
	case *havro.RecordSchema:
		if m, ok := v.(map[string]any); ok {
			return RecordOf(s, m)
		}
	case *havro.ArraySchema:
		if a, ok := v.([]any); ok {
			for i := range a {
				a[i] = toJSON(s.Items(), a[i])
			}
			return a
		}
	case *havro.MapSchema:
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				m[k] = toJSON(s.Values(), m[k])
			}
			return m
		}
	}
	if c, ok := toJSONLogical(s, v); ok {
		return c
	}
	return plain(v)
}

// plain converts one native value.
func plain(v any) any {
	switch x := v.(type) {
	case time.Time:
		return float64(x.UnixMicro()) / 1000
	case time.Duration:
		return float64(x) / float64(time.Millisecond)
	case *big.Rat:
		return x.FloatString(ratScale(x))
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case float32:
		return float64(x)
	case uint64:
		return float64(x)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case map[string]any:
		for k := range x {
			x[k] = plain(x[k])
		}
		return x
	case []any:
		for i := range x {
			x[i] = plain(x[i])
		}
		return x
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return base64.StdEncoding.EncodeToString(b)
	}
	return v
}

// ratScale is the number of decimal digits a decoded decimal needs: its
// denominator is 10^scale reduced, so the digits of the smallest power of
// ten it divides.
func ratScale(r *big.Rat) int {
	d := new(big.Int).Set(r.Denom())
	ten := big.NewInt(10)
	n := 0
	for d.Cmp(big.NewInt(1)) != 0 && n < 100 {
		p := new(big.Int).Exp(ten, big.NewInt(int64(n+1)), nil)
		if new(big.Int).Mod(p, d).Sign() == 0 {
			return n + 1
		}
		n++
	}
	return n
}

// toJSONLogical converts a value whose schema has a logical type where
// the Go type alone is ambiguous (date: a day, not an instant; decimal:
// its scale).
func toJSONLogical(s havro.Schema, v any) (any, bool) {
	switch logical(s) {
	case havro.Date:
		if t, ok := v.(time.Time); ok {
			return t.UTC().Format(time.DateOnly), true
		}
	case havro.Decimal:
		if r, ok := v.(*big.Rat); ok {
			if d, ok := s.(havro.LogicalTypeSchema).Logical().(*havro.DecimalLogicalSchema); ok {
				return r.FloatString(d.Scale()), true
			}
		}
	}
	return nil, false
}

// FromRecord converts a JSON-like value with schema s into what
// hamba/avro encodes: numbers to the schema's int or long (refused when
// not whole or out of range), timestamps from Unix milliseconds or RFC
// 3339 strings, dates from "2006-01-02", decimals from strings or
// numbers, bytes from base64, unions wrapped into the first branch that
// takes the value. Record fields missing from v are left to their
// defaults (an error without one).
func FromRecord(s havro.Schema, v any) (any, error) {
	return fromJSON(s, v, "")
}

func fromJSON(s havro.Schema, v any, path string) (any, error) {
	s = deref(s)
	at := func(err string, args ...any) error {
		p := path
		if p == "" {
			p = "the record"
		}
		return fmt.Errorf("%s: %s", p, fmt.Sprintf(err, args...))
	}
	switch s := s.(type) {
	case *havro.UnionSchema:
		if v == nil {
			if s.Nullable() || s.Contains(havro.Null) {
				return nil, nil
			}
			return nil, at("null, and the union has no null branch")
		}
		var firstErr error
		for _, b := range s.Types() {
			if deref(b).Type() == havro.Null {
				continue
			}
			c, err := fromJSON(b, v, path)
			if err == nil {
				return map[string]any{typeName(b): c}, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		return nil, firstErr
	case *havro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, at("got %T; want an object for record %s", v, s.FullName())
		}
		out := make(map[string]any, len(s.Fields()))
		for _, f := range s.Fields() {
			fv, ok := m[f.Name()]
			if !ok {
				if f.HasDefault() {
					continue
				}
				if u, isU := deref(f.Type()).(*havro.UnionSchema); isU && u.Nullable() {
					out[f.Name()] = nil
					continue
				}
				return nil, at("field %s missing and it has no default", join(path, f.Name()))
			}
			c, err := fromJSON(f.Type(), fv, join(path, f.Name()))
			if err != nil {
				return nil, err
			}
			out[f.Name()] = c
		}
		return out, nil
	case *havro.ArraySchema:
		a, ok := v.([]any)
		if !ok {
			return nil, at("got %T; want an array", v)
		}
		out := make([]any, len(a))
		for i := range a {
			c, err := fromJSON(s.Items(), a[i], fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case *havro.MapSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, at("got %T; want an object (Avro map)", v)
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			c, err := fromJSON(s.Values(), e, join(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case *havro.EnumSchema:
		str, ok := v.(string)
		if !ok {
			return nil, at("got %T; want a string, a symbol of enum %s", v, s.FullName())
		}
		return str, nil
	case *havro.FixedSchema:
		if logical(s) == havro.Decimal {
			return toRat(v, at)
		}
		b, err := toBytes(v, at)
		if err != nil {
			return nil, err
		}
		if len(b) != s.Size() {
			return nil, at("%d bytes; want %d for fixed %s", len(b), s.Size(), s.FullName())
		}
		arr := reflect.New(reflect.ArrayOf(s.Size(), reflect.TypeFor[byte]())).Elem()
		reflect.Copy(arr, reflect.ValueOf(b))
		return arr.Interface(), nil
	case *havro.PrimitiveSchema:
		return fromPrimitive(s, v, at)
	}
	return v, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func fromPrimitive(s *havro.PrimitiveSchema, v any, at func(string, ...any) error) (any, error) {
	switch logical(s) {
	case havro.TimestampMillis, havro.TimestampMicros, havro.LocalTimestampMillis, havro.LocalTimestampMicros:
		switch x := v.(type) {
		case string:
			t, err := time.Parse(time.RFC3339Nano, x)
			if err != nil {
				return nil, at("%q: want RFC 3339 or Unix milliseconds", x)
			}
			return t, nil
		case time.Time:
			return x, nil
		}
		f, ok := number(v)
		if !ok {
			return nil, at("got %T; want Unix milliseconds or an RFC 3339 string", v)
		}
		return time.UnixMicro(int64(math.Round(f * 1000))).UTC(), nil
	case havro.Date:
		switch x := v.(type) {
		case string:
			t, err := time.Parse(time.DateOnly, x)
			if err != nil {
				return nil, at("%q: want a date such as 2026-01-02", x)
			}
			return t, nil
		case time.Time:
			return x, nil
		}
		return nil, at("got %T; want a date string such as 2026-01-02", v)
	case havro.TimeMillis, havro.TimeMicros:
		f, ok := number(v)
		if !ok {
			return nil, at("got %T; want milliseconds", v)
		}
		return time.Duration(f * float64(time.Millisecond)), nil
	case havro.Decimal:
		return toRat(v, at)
	}
	switch s.Type() {
	case havro.Null:
		if v != nil {
			return nil, at("got %T; want null", v)
		}
		return nil, nil
	case havro.Boolean:
		if _, ok := v.(bool); !ok {
			return nil, at("got %T; want a boolean", v)
		}
		return v, nil
	case havro.String:
		if _, ok := v.(string); !ok {
			return nil, at("got %T; want a string", v)
		}
		return v, nil
	case havro.Bytes:
		return toBytes(v, at)
	case havro.Int, havro.Long:
		f, ok := number(v)
		if !ok || f != math.Trunc(f) {
			return nil, at("got %v; want a whole number", v)
		}
		if s.Type() == havro.Int {
			if f < math.MinInt32 || f > math.MaxInt32 {
				return nil, at("%v is out of range of an Avro int", f)
			}
			return int(f), nil
		}
		if i, ok := v.(int64); ok {
			return i, nil
		}
		return int64(f), nil
	case havro.Float:
		f, ok := number(v)
		if !ok {
			return nil, at("got %T; want a number", v)
		}
		return float32(f), nil
	case havro.Double:
		f, ok := number(v)
		if !ok {
			return nil, at("got %T; want a number", v)
		}
		return f, nil
	}
	return v, nil
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func toBytes(v any, at func(string, ...any) error) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		b, err := base64.StdEncoding.DecodeString(x)
		if err != nil {
			return nil, at("not base64: %v", err)
		}
		return b, nil
	}
	return nil, at("got %T; want a base64 string", v)
}

func toRat(v any, at func(string, ...any) error) (*big.Rat, error) {
	switch x := v.(type) {
	case *big.Rat:
		return x, nil
	case string:
		r, ok := new(big.Rat).SetString(x)
		if !ok {
			return nil, at("%q: want a decimal number such as 12.34", x)
		}
		return r, nil
	}
	if f, ok := number(v); ok {
		return new(big.Rat).SetFloat64(f), nil
	}
	return nil, at("got %T; want a decimal string such as \"12.34\"", v)
}
