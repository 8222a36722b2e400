package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirproject/weir"
)

// Row operations, one byte per row in rowBuf.ops.
const (
	opWrite  = 'w' // insert, or upsert when the sink has a key
	opDelete = 'd'
)

// rowBuf holds rows encoded once, when written, in one of COPY's two
// formats, ops one byte per row:
//
//   - text (binary false): data is lines of tab-separated fields (NULL as
//     \N, with backslash, tab, newline and carriage return escaped). Sent
//     by COPY (inserts), or split into statement parameters (upserts,
//     deletes): a table with a key always uses text.
//   - binary: data is COPY's binary tuples (encodeBinaryRow), without the
//     stream's header and trailer (added when sent): a table without a key
//     whose column types all have a binary encoding (binaryCapable), so
//     the server reads int8, float8, timestamptz... with its cheap
//     receive functions instead of parsing text.
//
// The same bytes are sent and stored in a checkpoint (P3, with the format
// in Txn.Format), so a row has one encoding whatever path it takes and
// survives the JSON round trip of a checkpoint exactly (the types came
// from the server's catalog when it was encoded, not from JSON).
type rowBuf struct {
	data   []byte
	ops    []byte
	binary bool
}

func (b *rowBuf) rows() int { return len(b.ops) }
func (b *rowBuf) reset()    { b.data, b.ops = b.data[:0], b.ops[:0] }

// table is the target table as the server describes it.
type table struct {
	ident   string   // quoted, schema-qualified
	cols    []string // quoted column names, in Options.Columns order
	oids    []uint32 // their types
	notNull []bool   // whether a column is NOT NULL
	keyIdx  []int    // positions of the key columns in cols
	// binary: rows are encoded in COPY's binary format (no key, and
	// binaryCapable), decided once when the table is described.
	binary        bool
	copySQL       string // COPY ... FROM STDIN (text)
	copyBinarySQL string // COPY ... FROM STDIN (FORMAT binary)
	upsert        string // INSERT ... ON CONFLICT, or a plain INSERT without key
	delete        string
}

// describe reads the columns' types from the catalog and builds the
// statements; it fails when the table or a column is missing, and (by
// preparing it) when the upsert's ON CONFLICT names no unique constraint.
func describe(ctx context.Context, conn *pgx.Conn, m *pgtype.Map, name pgx.Identifier, columns, key []string) (*table, error) {
	t := &table{ident: name.Sanitize()}
	types := map[string]uint32{}
	notNull := map[string]bool{}
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid, a.attnotnull FROM pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`, t.ident)
	if err != nil {
		return nil, fmt.Errorf("postgres: table %s: %w (the sink does not create tables: create it first)", t.ident, err)
	}
	for rows.Next() {
		var n string
		var oid uint32
		var nn bool
		if err := rows.Scan(&n, &oid, &nn); err != nil {
			rows.Close()
			return nil, fmt.Errorf("postgres: table %s: %w", t.ident, err)
		}
		types[n] = oid
		notNull[n] = nn
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: table %s: %w (the sink does not create tables: create it first)", t.ident, err)
	}
	isKey := map[string]bool{}
	for _, k := range key {
		isKey[k] = true
	}
	var sets []string
	for i, c := range columns {
		oid, ok := types[c]
		if !ok {
			return nil, fmt.Errorf("postgres: table %s has no column %q", t.ident, c)
		}
		q := pgx.Identifier{c}.Sanitize()
		t.cols = append(t.cols, q)
		t.oids = append(t.oids, oid)
		t.notNull = append(t.notNull, notNull[c])
		if isKey[c] {
			t.keyIdx = append(t.keyIdx, i)
		} else {
			sets = append(sets, q+" = EXCLUDED."+q)
		}
	}
	colList := strings.Join(t.cols, ", ")
	t.copySQL = "COPY " + t.ident + " (" + colList + ") FROM STDIN"
	t.copyBinarySQL = t.copySQL + " (FORMAT binary)"
	t.binary = len(key) == 0 && binaryCapable(m, t.oids)
	params := make([]string, len(columns))
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	t.upsert = "INSERT INTO " + t.ident + " (" + colList + ") VALUES (" + strings.Join(params, ", ") + ")"
	if len(key) > 0 {
		keyCols := make([]string, len(t.keyIdx))
		where := make([]string, len(t.keyIdx))
		for j, i := range t.keyIdx {
			keyCols[j] = t.cols[i]
			where[j] = fmt.Sprintf("%s = $%d", t.cols[i], j+1)
		}
		if len(sets) == 0 {
			t.upsert += " ON CONFLICT (" + strings.Join(keyCols, ", ") + ") DO NOTHING"
		} else {
			t.upsert += " ON CONFLICT (" + strings.Join(keyCols, ", ") + ") DO UPDATE SET " + strings.Join(sets, ", ")
		}
		t.delete = "DELETE FROM " + t.ident + " WHERE " + strings.Join(where, " AND ")
		// ON CONFLICT needs a unique index on exactly the key columns
		// (checked by the planner only, so at the first write: check now).
		sorted := slices.Sorted(slices.Values(key))
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_index i
			WHERE i.indrelid = $1::regclass AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
			AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a
			     WHERE a.attrelid = i.indrelid AND a.attnum = ANY((i.indkey::int2[])[0:i.indnkeyatts-1])) = $2::text[]`,
			t.ident, sorted).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("postgres: table %s: %w", t.ident, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("postgres: table %s has no primary key or unique constraint on exactly the key columns %v (ON CONFLICT needs one)", t.ident, key)
		}
	}
	return t, nil
}

// encodeRow appends a row to b, each value encoded by m in the format of
// b (text, or binary: encodeBinaryRow) for its column's type. scratch is
// the caller's buffer for one value, returned grown.
func (t *table) encodeRow(m *pgtype.Map, b *rowBuf, op byte, vals []any, scratch []byte) ([]byte, error) {
	if len(vals) != len(t.cols) {
		return scratch, fmt.Errorf("postgres: Row returned %d values for %d columns", len(vals), len(t.cols))
	}
	if scratch == nil {
		// A nil result of pgx's Encode is NULL: an empty text (a value
		// encoded into scratch[:0]) must not be taken for one.
		scratch = make([]byte, 0, 64)
	}
	if b.binary {
		return t.encodeBinaryRow(m, b, op, vals, scratch)
	}
	start := len(b.data)
	for i, v := range vals {
		if i > 0 {
			b.data = append(b.data, '\t')
		}
		if v == nil {
			if t.notNull[i] && (op == opWrite || slices.Contains(t.keyIdx, i)) {
				b.data = b.data[:start]
				return scratch, fmt.Errorf("%w: postgres: column %s is NOT NULL and the record has no value for it", weir.ErrRejected, t.cols[i])
			}
			b.data = append(b.data, `\N`...)
			continue
		}
		if err := t.refused(i, v); err != nil {
			b.data = b.data[:start]
			return scratch, err
		}
		var err error
		if out, ok := appendText(scratch[:0], t.oids[i], v); ok {
			scratch = out
		} else if scratch, err = m.Encode(t.oids[i], pgtype.TextFormatCode, v, scratch[:0]); err != nil {
			b.data = b.data[:start]
			return scratch, fmt.Errorf("%w: postgres: column %s: %v", weir.ErrRejected, t.cols[i], err)
		}
		if _, isText := v.(string); isText && scratch != nil {
			if err := checkText(m, t.oids[i], scratch); err != nil {
				b.data = b.data[:start]
				return scratch, fmt.Errorf("%w: postgres: column %s: %v", weir.ErrRejected, t.cols[i], err)
			}
		}
		if scratch == nil {
			if t.notNull[i] && (op == opWrite || slices.Contains(t.keyIdx, i)) {
				b.data = b.data[:start]
				return scratch, fmt.Errorf("%w: postgres: column %s is NOT NULL and the record's value is null", weir.ErrRejected, t.cols[i])
			}
			b.data = append(b.data, `\N`...)
			continue
		}
		b.data = appendEscaped(b.data, scratch)
	}
	b.data = append(b.data, '\n')
	b.ops = append(b.ops, op)
	return scratch, nil
}

// appendText appends the text of v for a column of type oid in the
// common cases (integers and JSON numbers into bigint, doubles, strings
// into text), the bytes pgtype's text encoding writes for them
// (TestAppendTextMatchesPgtype) without its planning per value; ok false
// leaves v to pgtype.
func appendText(buf []byte, oid uint32, v any) ([]byte, bool) {
	if buf == nil {
		buf = []byte{} // an empty text is not NULL
	}
	switch oid {
	case pgtype.Int8OID:
		switch x := v.(type) {
		case int64:
			return strconv.AppendInt(buf, x, 10), true
		case int:
			return strconv.AppendInt(buf, int64(x), 10), true
		case float64:
			if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
				return strconv.AppendInt(buf, int64(x), 10), true
			}
		}
	case pgtype.Float8OID:
		if x, ok := v.(float64); ok {
			return strconv.AppendFloat(buf, x, 'f', -1, 64), true
		}
	case pgtype.TextOID, pgtype.VarcharOID:
		if x, ok := v.(string); ok {
			return append(buf, x...), true
		}
	}
	return buf, false
}

// checkText checks text a string value was encoded to (pgx passes a Go
// string through as the text of any type) the way the server will parse
// it for a column of type oid, so that a value the server would refuse
// ("many" for an integer) is rejected with its record when written,
// instead of failing the whole transaction when it is committed (where a
// restore would commit it again, and fail again). Text types need no
// check; types pgx does not know (enums, domains) are left to the server.
func checkText(m *pgtype.Map, oid uint32, text []byte) error {
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.UnknownOID:
		return nil
	case pgtype.JSONOID, pgtype.JSONBOID:
		if !json.Valid(text) {
			return fmt.Errorf("%.40q is not JSON", text)
		}
		return nil
	}
	t, ok := m.TypeForOID(oid)
	if !ok {
		return nil
	}
	if _, err := t.Codec.DecodeValue(m, oid, pgtype.TextFormatCode, text); err != nil {
		return fmt.Errorf("%.40q is not a valid %s: %v", text, t.Name, err)
	}
	return nil
}

func appendEscaped(dst, s []byte) []byte {
	if bytes.IndexAny(s, "\\\t\n\r") < 0 {
		return append(dst, s...)
	}
	for _, c := range s {
		switch c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// splitRow returns the fields of one line of rowBuf.data (nil for NULL),
// unescaped.
func splitRow(line []byte, n int) [][]byte {
	out := make([][]byte, 0, n)
	for _, f := range bytes.Split(line, []byte{'\t'}) {
		if len(f) == 2 && f[0] == '\\' && f[1] == 'N' {
			out = append(out, nil)
			continue
		}
		if bytes.IndexByte(f, '\\') < 0 {
			out = append(out, f)
			continue
		}
		u := make([]byte, 0, len(f))
		for i := 0; i < len(f); i++ {
			if f[i] != '\\' || i+1 == len(f) {
				u = append(u, f[i])
				continue
			}
			i++
			switch f[i] {
			case 't':
				u = append(u, '\t')
			case 'n':
				u = append(u, '\n')
			case 'r':
				u = append(u, '\r')
			default:
				u = append(u, f[i])
			}
		}
		out = append(out, u)
	}
	return out
}

// Names of the sink's prepared statements, one pair per connection (a
// sink's pool serves one table).
const (
	stmtUpsert = "weir_sink_upsert"
	stmtDelete = "weir_sink_delete"
)

// write sends the rows of b on conn, inside the transaction the caller
// has begun: all by one COPY when every row is an insert (binary COPY,
// the stream's header and trailer around b.data, for binary rows), else
// as one pipelined batch of prepared statements per batchRows rows, in
// order (so a key written then deleted in one batch ends deleted).
// Parameters are sent as text and the server reads them as the column's
// type, exactly as text COPY does.
func (t *table) write(ctx context.Context, conn *pgx.Conn, b *rowBuf, batchRows int) error {
	if b.rows() == 0 {
		return nil
	}
	if b.binary {
		if len(t.keyIdx) > 0 {
			// Binary rows are inserts: a checkpoint's transaction of a
			// sink without key, restored into one with a key.
			return errPermanent{fmt.Errorf("postgres: the rows of this transaction were encoded for COPY into %s without key, which now has key columns: restore with the key the checkpoint was taken with", t.ident)}
		}
		r := io.MultiReader(bytes.NewReader(copyBinaryHeader), bytes.NewReader(b.data), bytes.NewReader(copyBinaryTrailer))
		if _, err := conn.PgConn().CopyFrom(ctx, r, t.copyBinarySQL); err != nil {
			return fmt.Errorf("postgres: copy into %s: %w", t.ident, err)
		}
		return nil
	}
	if len(t.keyIdx) == 0 {
		if _, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(b.data), t.copySQL); err != nil {
			return fmt.Errorf("postgres: copy into %s: %w", t.ident, err)
		}
		return nil
	}
	// pgx.Conn.Prepare is idempotent per connection: it prepares once.
	if _, err := conn.Prepare(ctx, stmtUpsert, t.upsert); err != nil {
		return fmt.Errorf("postgres: prepare the upsert into %s: %w", t.ident, err)
	}
	if _, err := conn.Prepare(ctx, stmtDelete, t.delete); err != nil {
		return fmt.Errorf("postgres: prepare the delete from %s: %w", t.ident, err)
	}
	data := b.data
	batch := &pgconn.Batch{}
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		_, err := conn.PgConn().ExecBatch(ctx, batch).ReadAll()
		batch, n = &pgconn.Batch{}, 0
		if err != nil {
			return fmt.Errorf("postgres: write to %s: %w", t.ident, err)
		}
		return nil
	}
	keys := make([][]byte, len(t.keyIdx))
	for _, op := range b.ops {
		end := bytes.IndexByte(data, '\n')
		vals := splitRow(data[:end], len(t.cols))
		data = data[end+1:]
		if op == opDelete {
			for j, i := range t.keyIdx {
				keys[j] = vals[i]
			}
			batch.ExecPrepared(stmtDelete, keys, nil, nil)
		} else {
			batch.ExecPrepared(stmtUpsert, vals, nil, nil)
		}
		if n++; n >= batchRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
