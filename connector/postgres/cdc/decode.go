package cdc

import (
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// relation is a published table as the latest Relation message described
// it; pgoutput sends one before the first change of a table in each
// session and again after the table's definition changed.
type relation struct {
	schema, table string
	cols          []column
}

type column struct {
	name string
	oid  uint32
	typ  *pgtype.Type // nil: a type pgx does not know (decoded as text)
}

// decoder turns pgoutput tuples into column maps (C4). It is owned by the
// streaming goroutine.
type decoder struct {
	types *pgtype.Map
	rels  map[uint32]*relation
}

func newDecoder() *decoder {
	return &decoder{types: pgtype.NewMap(), rels: map[uint32]*relation{}}
}

func (d *decoder) relation(m *pglogrepl.RelationMessage) {
	r := &relation{schema: m.Namespace, table: m.RelationName, cols: make([]column, len(m.Columns))}
	for i, c := range m.Columns {
		t, _ := d.types.TypeForOID(c.DataType)
		r.cols[i] = column{name: c.Name, oid: c.DataType, typ: t}
	}
	d.rels[m.RelationID] = r
}

func (d *decoder) rel(id uint32) (*relation, error) {
	r := d.rels[id]
	if r == nil {
		return nil, fmt.Errorf("cdc: a change of relation %d came before its Relation message", id)
	}
	return r, nil
}

// tuple decodes t; the names of unchanged TOASTed columns are appended to
// *unchanged when it is not nil.
func (d *decoder) tuple(r *relation, t *pglogrepl.TupleData, unchanged *[]string) (map[string]any, error) {
	if t == nil {
		return nil, nil
	}
	if len(t.Columns) > len(r.cols) {
		return nil, fmt.Errorf("cdc: table %s.%s: a tuple of %d columns, the relation has %d", r.schema, r.table, len(t.Columns), len(r.cols))
	}
	m := make(map[string]any, len(t.Columns))
	for i, c := range t.Columns {
		col := &r.cols[i]
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull:
			m[col.name] = nil
		case pglogrepl.TupleDataTypeToast:
			if unchanged != nil {
				*unchanged = append(*unchanged, col.name)
			}
		case pglogrepl.TupleDataTypeText:
			if col.typ == nil {
				m[col.name] = string(c.Data)
				continue
			}
			v, err := col.typ.Codec.DecodeValue(d.types, col.oid, pgtype.TextFormatCode, c.Data)
			if err != nil {
				return nil, fmt.Errorf("cdc: table %s.%s column %s: %w", r.schema, r.table, col.name, err)
			}
			m[col.name] = v
		case pglogrepl.TupleDataTypeBinary:
			if col.typ == nil {
				m[col.name] = append([]byte(nil), c.Data...)
				continue
			}
			v, err := col.typ.Codec.DecodeValue(d.types, col.oid, pgtype.BinaryFormatCode, c.Data)
			if err != nil {
				return nil, fmt.Errorf("cdc: table %s.%s column %s: %w", r.schema, r.table, col.name, err)
			}
			m[col.name] = v
		}
	}
	return m, nil
}
