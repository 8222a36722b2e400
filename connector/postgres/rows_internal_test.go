package postgres

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"pgregory.net/rapid"
)

// appendText writes the bytes pgtype's text encoding writes, for every
// value it takes (and an empty string is an empty text, not NULL).
func TestAppendTextMatchesPgtype(t *testing.T) {
	m := pgtype.NewMap()
	values := rapid.OneOf(
		rapid.Map(rapid.Int64(), func(x int64) any { return x }),
		rapid.Map(rapid.Int(), func(x int) any { return x }),
		rapid.Map(rapid.Float64(), func(x float64) any { return x }),
		rapid.Map(rapid.Int64Range(-1<<53, 1<<53), func(x int64) any { return float64(x) }),
		rapid.Map(rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1e300, -1e-300, 9.2e18, -9.2e18, 9.3e18, math.MaxInt64, math.MinInt64, math.NaN(), math.Inf(1)}), func(x float64) any { return x }),
		rapid.Map(rapid.String(), func(x string) any { return x }),
		rapid.Just[any](""),
		rapid.Just[any](true),
	)
	rapid.Check(t, func(t *rapid.T) {
		oid := rapid.SampledFrom([]uint32{pgtype.Int8OID, pgtype.Float8OID, pgtype.TextOID, pgtype.VarcharOID, pgtype.Int4OID, pgtype.BoolOID}).Draw(t, "oid")
		v := values.Draw(t, "value")
		var scratch []byte
		if rapid.Bool().Draw(t, "reused") {
			scratch = make([]byte, 0, 8)
		}
		got, ok := appendText(scratch, oid, v)
		if !ok {
			return
		}
		want, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
		if err != nil {
			t.Fatalf("appendText took %T %v for oid %d, which pgtype refuses: %v", v, v, oid, err)
		}
		if got == nil || !bytes.Equal(got, want) {
			t.Fatalf("oid %d, %T %v: appendText %q (nil %v), pgtype %q", oid, v, v, got, got == nil, want)
		}
	})
}

// BenchmarkEncodeRow: one row of the benchmark's shape (bigint from a JSON
// number, text, double, timestamptz) into COPY text, as Write does; the
// pgtype sub-benchmark encodes every value with pgtype, as before
// appendText.
//
//	go test -run '^$' -bench EncodeRow ./connector/postgres/
func BenchmarkEncodeRow(b *testing.B) {
	m := pgtype.NewMap()
	t := &table{cols: []string{"id", "name", "amount", "at"}, oids: []uint32{pgtype.Int8OID, pgtype.TextOID, pgtype.Float8OID, pgtype.TimestamptzOID}, notNull: make([]bool, 4)}
	vals := []any{float64(12345), "customer-42", 1.25, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	for _, fast := range []bool{true, false} {
		b.Run(map[bool]string{true: "appendText", false: "pgtype"}[fast], func(b *testing.B) {
			var buf rowBuf
			var scratch []byte
			for b.Loop() {
				if fast {
					var err error
					if scratch, err = t.encodeRow(m, &buf, opWrite, vals, scratch); err != nil {
						b.Fatal(err)
					}
				} else {
					for i, v := range vals {
						var err error
						if scratch, err = m.Encode(t.oids[i], pgtype.TextFormatCode, v, scratch[:0]); err != nil {
							b.Fatal(err)
						}
						buf.data = appendEscaped(buf.data, scratch)
					}
					buf.ops = append(buf.ops, opWrite)
				}
				if buf.rows() >= 10_000 {
					buf.reset()
				}
			}
		})
	}
}
