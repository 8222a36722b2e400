package postgres

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirproject/weir"
)

// Formats of a rowBuf's data, and of Txn.Format.
const (
	formatText   = ""       // COPY text: lines of tab-separated fields
	formatBinary = "binary" // COPY binary tuples, without header and trailer
)

// copyBinaryHeader starts a binary COPY stream: the signature, flags 0
// (no OIDs) and a header extension of length 0. copyBinaryTrailer, a
// field count of -1, ends it.
var (
	copyBinaryHeader  = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	copyBinaryTrailer = []byte{0xff, 0xff}
)

// binaryCapable reports whether every column of types oids can be
// encoded in COPY's binary format: the types appendBinary writes itself
// and those pgx has a binary codec for. One column pgx does not know (an
// enum, a domain) and the sink sends text, as before binary COPY, which
// the server parses with the type's own input function.
func binaryCapable(m *pgtype.Map, oids []uint32) bool {
	for _, oid := range oids {
		switch oid {
		case pgtype.Int8OID, pgtype.Int4OID, pgtype.Int2OID, pgtype.Float8OID, pgtype.Float4OID,
			pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.BoolOID,
			pgtype.TimestamptzOID, pgtype.TimestampOID, pgtype.DateOID, pgtype.JSONBOID, pgtype.UUIDOID:
			continue
		case pgtype.UnknownOID:
			return false
		}
		t, ok := m.TypeForOID(oid)
		if !ok || !t.Codec.FormatSupported(pgtype.BinaryFormatCode) {
			return false
		}
	}
	return true
}

// encodeBinaryRow appends a row to b as one tuple of COPY's binary
// format: an int16 field count, then per field an int32 length (-1 for
// NULL) and the value in its type's binary format. It accepts and
// rejects exactly the values encodeRow's text does (the text is the
// reference: a Go string is checked as the text of the column's type and
// converted from it), so a sink's rejections do not depend on the format.
func (t *table) encodeBinaryRow(m *pgtype.Map, b *rowBuf, op byte, vals []any, scratch []byte) ([]byte, error) {
	start := len(b.data)
	b.data = binary.BigEndian.AppendUint16(b.data, uint16(len(vals)))
	for i, v := range vals {
		null := v == nil
		if err := t.refused(i, v); err != nil {
			b.data = b.data[:start]
			return scratch, err
		}
		if !null {
			at := len(b.data)
			b.data = append(b.data, 0, 0, 0, 0)
			if out, ok := appendBinary(b.data, t.oids[i], v); ok {
				b.data = out
			} else {
				var val []byte
				var err error
				if scratch, val, err = t.binaryValue(m, i, v, scratch); err != nil {
					b.data = b.data[:start]
					return scratch, err
				}
				if val == nil {
					null = true
					b.data = b.data[:at]
				} else {
					b.data = append(b.data, val...)
				}
			}
			if !null {
				binary.BigEndian.PutUint32(b.data[at:], uint32(len(b.data)-at-4))
				continue
			}
			if t.notNull[i] && (op == opWrite || slices.Contains(t.keyIdx, i)) {
				b.data = b.data[:start]
				return scratch, fmt.Errorf("%w: postgres: column %s is NOT NULL and the record's value is null", weir.ErrRejected, t.cols[i])
			}
		} else if t.notNull[i] && (op == opWrite || slices.Contains(t.keyIdx, i)) {
			b.data = b.data[:start]
			return scratch, fmt.Errorf("%w: postgres: column %s is NOT NULL and the record has no value for it", weir.ErrRejected, t.cols[i])
		}
		b.data = append(b.data, 0xff, 0xff, 0xff, 0xff)
	}
	b.ops = append(b.ops, op)
	return scratch, nil
}

// binaryValue encodes v, which appendBinary left, for column i in binary
// (nil for NULL), in scratch or in a new buffer. A value that is not a
// string goes to pgx's binary encoding; a string (pgx passes it as the
// text of any type), or a value pgx encodes as text only, is encoded as
// text as encodeRow does, checked as encodeRow does, then decoded by the
// type's text codec and encoded again in binary.
func (t *table) binaryValue(m *pgtype.Map, i int, v any, scratch []byte) ([]byte, []byte, error) {
	oid := t.oids[i]
	_, isString := v.(string)
	if !isString {
		out, err := m.Encode(oid, pgtype.BinaryFormatCode, v, scratch[:0])
		if err == nil {
			if out != nil {
				scratch = out
			}
			return scratch, out, nil
		}
	}
	text, err := m.Encode(oid, pgtype.TextFormatCode, v, scratch[:0])
	if err != nil {
		return scratch, nil, fmt.Errorf("%w: postgres: column %s: %v", weir.ErrRejected, t.cols[i], err)
	}
	if text == nil {
		return scratch, nil, nil
	}
	scratch = text
	if isString && (oid == pgtype.JSONOID || oid == pgtype.JSONBOID) {
		if err := checkText(m, oid, text); err != nil {
			return scratch, nil, fmt.Errorf("%w: postgres: column %s: %v", weir.ErrRejected, t.cols[i], err)
		}
	}
	// For the other types textToBinary's decoding is checkText's (the
	// same codec, the same error), done once.
	out, err := textToBinary(m, oid, text)
	if err != nil {
		return scratch, nil, fmt.Errorf("%w: postgres: column %s: %v", weir.ErrRejected, t.cols[i], err)
	}
	return scratch, out, nil
}

// textToBinary converts the text of a value of type oid, as the server
// would parse it, into the type's binary format (a new buffer).
func textToBinary(m *pgtype.Map, oid uint32, text []byte) ([]byte, error) {
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.JSONOID:
		return append([]byte{}, text...), nil
	case pgtype.JSONBOID:
		return append([]byte{1}, text...), nil // jsonb's binary format: version 1, then the text
	}
	typ, ok := m.TypeForOID(oid)
	if !ok {
		return nil, fmt.Errorf("no binary encoding for type %d", oid) // binaryCapable excludes it
	}
	val, err := typ.Codec.DecodeValue(m, oid, pgtype.TextFormatCode, text)
	if err != nil {
		return nil, fmt.Errorf("%.40q is not a valid %s: %v", text, typ.Name, err) // as checkText
	}
	if inf, ok := val.(pgtype.InfinityModifier); ok {
		// A date's or timestamp's infinity, which pgx does not encode
		// as such: in pgx's own types.
		switch oid {
		case pgtype.DateOID:
			val = pgtype.Date{InfinityModifier: inf, Valid: true}
		case pgtype.TimestampOID:
			val = pgtype.Timestamp{InfinityModifier: inf, Valid: true}
		case pgtype.TimestamptzOID:
			val = pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
		}
	}
	out, err := m.Encode(oid, pgtype.BinaryFormatCode, val, []byte{})
	if err != nil {
		return nil, fmt.Errorf("%.40q as binary %s: %v", text, typ.Name, err)
	}
	if out == nil {
		return nil, fmt.Errorf("%.40q as binary %s: encoded as NULL", text, typ.Name)
	}
	return out, nil
}

// microsecondsFromUnixEpochToY2K: timestamps and dates in binary count
// from 2000-01-01.
const (
	microsecondsFromUnixEpochToY2K = 946_684_800 * 1_000_000
	daysFromUnixEpochToY2K         = 10_957
)

// appendBinary appends the binary format of v for a column of type oid
// in the common cases, the bytes pgx's binary encoding writes (or, where
// pgx passes a value as text, the value the server parses from the text
// encodeRow writes: TestBinaryMatchesText) without its planning per
// value; ok false leaves v to binaryValue.
func appendBinary(buf []byte, oid uint32, v any) ([]byte, bool) {
	switch oid {
	case pgtype.Int8OID:
		if x, ok := wholeInt(v); ok {
			return binary.BigEndian.AppendUint64(buf, uint64(x)), true
		}
	case pgtype.Int4OID:
		if x, ok := wholeInt(v); ok && x >= math.MinInt32 && x <= math.MaxInt32 {
			return binary.BigEndian.AppendUint32(buf, uint32(int32(x))), true
		}
	case pgtype.Int2OID:
		if x, ok := wholeInt(v); ok && x >= math.MinInt16 && x <= math.MaxInt16 {
			return binary.BigEndian.AppendUint16(buf, uint16(int16(x))), true
		}
	case pgtype.Float8OID:
		switch x := v.(type) {
		case float64:
			return binary.BigEndian.AppendUint64(buf, math.Float64bits(x)), true
		case float32:
			return binary.BigEndian.AppendUint64(buf, math.Float64bits(float64(x))), true
		}
	case pgtype.Float4OID:
		switch x := v.(type) {
		case float32:
			return binary.BigEndian.AppendUint32(buf, math.Float32bits(x)), true
		case float64:
			// Not float32(x): the server rounds the decimal text pgx
			// writes, which differs from x when x lies on a float32
			// midpoint. refused has rejected what it cannot hold.
			f, _ := float4Of(x)
			return binary.BigEndian.AppendUint32(buf, math.Float32bits(f)), true
		}
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID:
		if x, ok := v.(string); ok {
			return append(buf, x...), true
		}
	case pgtype.BoolOID:
		if x, ok := v.(bool); ok {
			if x {
				return append(buf, 1), true
			}
			return append(buf, 0), true
		}
	case pgtype.TimestamptzOID:
		if x, ok := v.(time.Time); ok {
			return binary.BigEndian.AppendUint64(buf, uint64(timestampMicros(x))), true
		}
	case pgtype.TimestampOID:
		if x, ok := v.(time.Time); ok {
			// timestamp has no zone: the wall clock in x's location,
			// as pgx writes it.
			y, mo, d := x.Date()
			h, mi, s := x.Clock()
			w := time.Date(y, mo, d, h, mi, s, x.Nanosecond(), time.UTC)
			return binary.BigEndian.AppendUint64(buf, uint64(timestampMicros(w))), true
		}
	case pgtype.DateOID:
		if x, ok := v.(time.Time); ok {
			return binary.BigEndian.AppendUint32(buf, uint32(dateDays(x))), true
		}
	case pgtype.JSONBOID:
		if x, ok := v.(string); ok && json.Valid([]byte(x)) {
			buf = append(buf, 1)
			return append(buf, x...), true
		}
	case pgtype.UUIDOID:
		if x, ok := v.([16]byte); ok {
			return append(buf, x[:]...), true
		}
	}
	return buf, false
}

// wholeInt returns v as an int64 when it is a Go integer, or a float64
// holding a whole number in int64's range (a JSON number), as appendText.
func wholeInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint8:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// timestampMicros is t in microseconds since 2000-01-01 UTC, the
// nanoseconds below a microsecond dropped (toward the past), as pgx's
// text writes it (six digits of fraction, truncated; the server then has
// nothing to round). A time beyond what int64 microseconds hold (about
// 292,000 years from 1970, far beyond the server's range of 4713 BC to
// 294276 AD) becomes one just inside them, never infinity (MaxInt64 and
// MinInt64 are the server's infinities), so the server refuses it with
// "timestamp out of range" as it refuses the text of such a time.
func timestampMicros(t time.Time) int64 {
	const limit = math.MaxInt64/1_000_000 - 946_684_800 - 1
	sec := t.Unix()
	switch {
	case sec > limit:
		return math.MaxInt64 - 1
	case sec < -limit:
		return math.MinInt64 + 1
	}
	return sec*1_000_000 + int64(t.Nanosecond()/1000) - microsecondsFromUnixEpochToY2K
}

// dateDays is t's date (in its location, as pgx writes it) in days since
// 2000-01-01; beyond int32, a value just inside it (the server refuses
// it: "date out of range"), never its infinities.
func dateDays(t time.Time) int32 {
	y, m, d := t.Date()
	days := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()/86400 - daysFromUnixEpochToY2K
	switch {
	case days >= math.MaxInt32:
		return math.MaxInt32 - 1
	case days <= math.MinInt32:
		return math.MinInt32 + 1
	}
	return int32(days)
}

// float4Of is the real the server stores for the text pgx writes for a
// float64 x (its shortest decimal; strtof rounds it to nearest), and
// whether the server takes it: a finite x beyond real's range, or one so
// small that it becomes zero, is "out of range for type real".
func float4Of(x float64) (float32, bool) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return float32(x), true
	}
	var b [32]byte
	f, err := strconv.ParseFloat(string(strconv.AppendFloat(b[:0], x, 'g', -1, 64)), 32)
	if err != nil || math.IsInf(f, 0) || (f == 0 && x != 0) {
		return 0, false
	}
	return float32(f), true
}

// refused rejects, in either format, a value pgx encodes but the server
// would refuse when the transaction is committed (failing it whole, and
// again after every restore): a float64 out of real's range. (Other such
// values, a string the column's type cannot parse, are checkText's.)
func (t *table) refused(i int, v any) error {
	if t.oids[i] != pgtype.Float4OID {
		return nil
	}
	if x, ok := v.(float64); ok {
		if _, ok := float4Of(x); !ok {
			return fmt.Errorf("%w: postgres: column %s: %v is out of range for type real", weir.ErrRejected, t.cols[i], x)
		}
	}
	return nil
}
