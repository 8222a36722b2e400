package parquet

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
)

// Field is one column of a schema declared by name and type, for records
// that are JSON objects (map[string]any, as pipeline records are).
type Field struct {
	Name string
	// Type is one of FieldTypes: string, int64, double, boolean,
	// timestamp (milliseconds since the epoch, UTC; from a number of
	// milliseconds or an RFC 3339 string).
	Type string
	// Optional lets the field be missing or null (a null value); a
	// required field missing from a record fails the job.
	Optional bool
}

// FieldTypes are the accepted values of Field.Type.
var FieldTypes = []string{"string", "int64", "double", "boolean", "timestamp"}

// CheckFields returns an error naming the first bad field, or nil.
func CheckFields(fields []Field) error {
	if len(fields) == 0 {
		return fmt.Errorf("parquet: no fields; want at least one column (name and type: %s)", strings.Join(FieldTypes, ", "))
	}
	seen := map[string]bool{}
	for _, f := range fields {
		if f.Name == "" {
			return fmt.Errorf("parquet: a field has no name")
		}
		if seen[f.Name] {
			return fmt.Errorf("parquet: field %q declared twice", f.Name)
		}
		seen[f.Name] = true
		if _, ok := leafOf(f.Type); !ok {
			return fmt.Errorf("parquet: field %q: type %q; want one of %s", f.Name, f.Type, strings.Join(FieldTypes, ", "))
		}
	}
	return nil
}

func leafOf(typ string) (pq.Node, bool) {
	switch typ {
	case "string":
		return pq.String(), true
	case "int64":
		return pq.Int(64), true
	case "double":
		return pq.Leaf(pq.DoubleType), true
	case "boolean":
		return pq.Leaf(pq.BooleanType), true
	case "timestamp":
		return pq.Timestamp(pq.Millisecond), true
	}
	return nil, false
}

// ExactlyOnceFields is ExactlyOnce for JSON-object records written with
// the declared columns: each record's field of a column's name is
// converted to its type (a JSON number to int64 when it is integral);
// fields not declared are not written.
func ExactlyOnceFields(o Options, fields []Field) func(*runtime.Context) (weir.TwoPhaseCommitter[map[string]any, *Txn], error) {
	return newSinkFunc[map[string]any](o, newFieldsEncoder(fields))
}

// SinkFields ends s in an exactly-once Parquet sink of the declared
// columns (see ExactlyOnceFields), with o and fields validated when the
// job is built.
func SinkFields(s weir.Stream[map[string]any], name string, o Options, fields []Field) weir.Stream[struct{}] {
	return SinkFieldsRejecting(s, name, o, fields, nil)
}

// SinkFieldsRejecting is SinkFields whose records that do not fit the
// declared columns (a required field missing or null, a value not of its
// column's type) go to the side output rejects (weir.Rejected, read with
// weir.SideOutput on the returned stream) and are counted, instead of
// failing the job; the rest are written. A nil rejects is SinkFields.
func SinkFieldsRejecting(s weir.Stream[map[string]any], name string, o Options, fields []Field, rejects *weir.OutputTag[weir.Rejected[map[string]any]]) weir.Stream[struct{}] {
	validate := func() error {
		if err := o.Validate(); err != nil {
			return err
		}
		return CheckFields(fields)
	}
	return weir.TwoPhaseCommitRejecting(s, name, validate, ExactlyOnceFields(o, fields), rejects)
}

// fieldsEncoder writes map records as rows of a schema built from the
// declared fields. parquet-go orders a group's columns by name, so the
// columns are kept sorted by name: column i of a row is cols[i].
type fieldsEncoder struct {
	schema *pq.Schema
	cols   []Field
}

func newFieldsEncoder(fields []Field) *fieldsEncoder {
	cols := append([]Field(nil), fields...)
	sort.Slice(cols, func(i, j int) bool { return cols[i].Name < cols[j].Name })
	g := pq.Group{}
	for _, f := range cols {
		n, _ := leafOf(f.Type)
		if f.Optional {
			n = pq.Optional(n)
		}
		g[f.Name] = n
	}
	return &fieldsEncoder{schema: pq.NewSchema("record", g), cols: cols}
}

// check returns an error wrapping weir.ErrRejected when r does not fit
// the columns (what convert would refuse), without converting anything:
// the sink calls it in Write, so that a record that does not fit is
// rejected alone, before it is buffered with others.
func (e *fieldsEncoder) check(r map[string]any) error {
	for _, f := range e.cols {
		if !fits(f, r[f.Name]) {
			_, err := convert(f, r[f.Name])
			return fmt.Errorf("%w: %v", weir.ErrRejected, err)
		}
	}
	return nil
}

// fits reports whether convert accepts v for f.
func fits(f Field, v any) bool {
	if v == nil {
		return f.Optional
	}
	switch f.Type {
	case "string":
		switch v.(type) {
		case string, json.Number:
			return true
		}
	case "int64", "timestamp":
		switch x := v.(type) {
		case float64:
			return x == math.Trunc(x) && (f.Type == "timestamp" || math.Abs(x) < 1<<63)
		case int64, int:
			return true
		case json.Number:
			if f.Type == "int64" {
				_, err := x.Int64()
				return err == nil
			}
		case string:
			if f.Type == "timestamp" {
				_, err := time.Parse(time.RFC3339Nano, x)
				return err == nil
			}
		case time.Time:
			return f.Type == "timestamp"
		}
	case "double":
		switch x := v.(type) {
		case float64, int64, int:
			return true
		case json.Number:
			_, err := x.Float64()
			return err == nil
		}
	case "boolean":
		_, ok := v.(bool)
		return ok
	}
	return false
}

func (e *fieldsEncoder) newWriter(w io.Writer, opts []pq.WriterOption) rowWriter[map[string]any] {
	return &mapWriter{e: e, w: pq.NewWriter(w, append([]pq.WriterOption{e.schema}, opts...)...)}
}

type mapWriter struct {
	e    *fieldsEncoder
	w    *pq.Writer
	rows []pq.Row
}

func (m *mapWriter) write(recs []map[string]any) error {
	if cap(m.rows) < len(recs) {
		m.rows = make([]pq.Row, len(recs))
	}
	rows := m.rows[:len(recs)]
	for i, r := range recs {
		row := rows[i][:0]
		for c, f := range m.e.cols {
			v, err := convert(f, r[f.Name])
			if err != nil {
				return err
			}
			if v.IsNull() {
				row = append(row, v.Level(0, 0, c))
			} else if f.Optional {
				row = append(row, v.Level(0, 1, c))
			} else {
				row = append(row, v.Level(0, 0, c))
			}
		}
		rows[i] = row
	}
	_, err := m.w.WriteRows(rows)
	return err
}

func (m *mapWriter) flush() error { return m.w.Flush() }
func (m *mapWriter) size() int64  { return m.w.Size() }
func (m *mapWriter) close() error { return m.w.Close() }

// convert returns the Parquet value of field f from v (nil: missing or
// null), or an error naming the field and what it wants.
func convert(f Field, v any) (pq.Value, error) {
	if v == nil {
		if f.Optional {
			return pq.Value{}, nil
		}
		return pq.Value{}, fmt.Errorf("parquet: field %q is missing or null; declare it optional to write nulls", f.Name)
	}
	bad := func() (pq.Value, error) {
		return pq.Value{}, fmt.Errorf("parquet: field %q: %T %v is not of type %s", f.Name, v, v, f.Type)
	}
	switch f.Type {
	case "string":
		switch x := v.(type) {
		case string:
			return pq.ByteArrayValue([]byte(x)), nil
		case json.Number:
			return pq.ByteArrayValue([]byte(x)), nil
		}
	case "int64":
		switch x := v.(type) {
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
				return pq.Int64Value(int64(x)), nil
			}
		case int64:
			return pq.Int64Value(x), nil
		case int:
			return pq.Int64Value(int64(x)), nil
		case json.Number:
			if n, err := x.Int64(); err == nil {
				return pq.Int64Value(n), nil
			}
		}
	case "double":
		switch x := v.(type) {
		case float64:
			return pq.DoubleValue(x), nil
		case int64:
			return pq.DoubleValue(float64(x)), nil
		case int:
			return pq.DoubleValue(float64(x)), nil
		case json.Number:
			if n, err := x.Float64(); err == nil {
				return pq.DoubleValue(n), nil
			}
		}
	case "boolean":
		if x, ok := v.(bool); ok {
			return pq.BooleanValue(x), nil
		}
	case "timestamp":
		switch x := v.(type) {
		case float64:
			if x == math.Trunc(x) {
				return pq.Int64Value(int64(x)), nil
			}
		case int64:
			return pq.Int64Value(x), nil
		case int:
			return pq.Int64Value(int64(x)), nil
		case string:
			if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
				return pq.Int64Value(t.UnixMilli()), nil
			}
		case time.Time:
			return pq.Int64Value(x.UnixMilli()), nil
		}
	}
	return bad()
}
