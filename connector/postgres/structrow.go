package postgres

import (
	"fmt"
	"reflect"
	"strings"
)

// StructColumns returns Options.Columns and Options.Row for a struct type
// T whose exported fields carry `pg:"column"` tags: each tagged field is a
// column, in field order; `pg:"-"` and untagged fields are skipped. T may
// be the struct or a pointer to it (a nil pointer is an error).
//
//	type Order struct {
//		ID    int64   `pg:"id"`
//		Total float64 `pg:"total"`
//		Note  string  // not written
//	}
//	cols, row, err := postgres.StructColumns[Order]()
//	o := postgres.Options[Order]{URL: url, Table: "orders", Columns: cols, Row: row, Key: []string{"id"}}
func StructColumns[T any]() ([]string, func(T) ([]any, error), error) {
	typ := reflect.TypeFor[T]()
	ptr := typ.Kind() == reflect.Pointer
	if ptr {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return nil, nil, fmt.Errorf("postgres: StructColumns: %v is not a struct", reflect.TypeFor[T]())
	}
	var cols []string
	var idx [][]int
	for _, f := range reflect.VisibleFields(typ) {
		name, ok := f.Tag.Lookup("pg")
		name, _, _ = strings.Cut(name, ",")
		if !ok || name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			return nil, nil, fmt.Errorf("postgres: StructColumns: field %s of %v has an empty pg tag; want `pg:\"column\"`", f.Name, typ)
		}
		cols = append(cols, name)
		idx = append(idx, f.Index)
	}
	if len(cols) == 0 {
		return nil, nil, fmt.Errorf("postgres: StructColumns: %v has no field tagged `pg:\"column\"`", typ)
	}
	row := func(v T) ([]any, error) {
		rv := reflect.ValueOf(v)
		if ptr {
			if rv.IsNil() {
				return nil, fmt.Errorf("postgres: a nil %v", reflect.TypeFor[T]())
			}
			rv = rv.Elem()
		}
		vals := make([]any, len(idx))
		for i, ix := range idx {
			vals[i] = rv.FieldByIndex(ix).Interface()
		}
		return vals, nil
	}
	return cols, row, nil
}
