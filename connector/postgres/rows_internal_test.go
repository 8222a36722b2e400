package postgres

import (
	"bytes"
	"encoding/binary"
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
// appendText; binary into COPY's binary format, as Write does for a table
// without key.
//
//	go test -run '^$' -bench EncodeRow ./connector/postgres/
func BenchmarkEncodeRow(b *testing.B) {
	m := pgtype.NewMap()
	t := &table{cols: []string{"id", "name", "amount", "at"}, oids: []uint32{pgtype.Int8OID, pgtype.TextOID, pgtype.Float8OID, pgtype.TimestamptzOID}, notNull: make([]bool, 4)}
	vals := []any{float64(12345), "customer-42", 1.25, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	b.Run("binary", func(b *testing.B) {
		buf := rowBuf{binary: true}
		var scratch []byte
		for b.Loop() {
			var err error
			if scratch, err = t.encodeRow(m, &buf, opWrite, vals, scratch); err != nil {
				b.Fatal(err)
			}
			if buf.rows() >= 10_000 {
				buf.reset()
			}
		}
	})
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

// appendBinary writes the bytes pgtype's binary encoding writes, for
// every value it takes, but a float64 into real: that is the value the
// server reads from pgx's text (float4Of), not float32(x).
func TestAppendBinaryMatchesPgtype(t *testing.T) {
	m := pgtype.NewMap()
	zones := []*time.Location{time.UTC, time.FixedZone("plus5", 5*3600+30*60), time.FixedZone("minus8", -8*3600)}
	values := rapid.OneOf(
		rapid.Map(rapid.Int64(), func(x int64) any { return x }),
		rapid.Map(rapid.Int(), func(x int) any { return x }),
		rapid.Map(rapid.Int32(), func(x int32) any { return x }),
		rapid.Map(rapid.Int16(), func(x int16) any { return x }),
		rapid.Map(rapid.Uint32(), func(x uint32) any { return x }),
		rapid.Map(rapid.Float64(), func(x float64) any { return x }),
		rapid.Map(rapid.Float32(), func(x float32) any { return x }),
		rapid.Map(rapid.Int64Range(-1<<53, 1<<53), func(x int64) any { return float64(x) }),
		rapid.Map(rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 9.2e18, -9.2e18, 9.3e18, math.MaxInt64, math.MinInt64, math.NaN(), math.Inf(1)}), func(x float64) any { return x }),
		rapid.Map(rapid.String(), func(x string) any { return x }),
		rapid.Map(rapid.Bool(), func(x bool) any { return x }),
		rapid.Custom(func(t *rapid.T) any {
			sec := rapid.Int64Range(time.Date(-4700, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(290000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()).Draw(t, "sec")
			return time.Unix(sec, rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")).In(rapid.SampledFrom(zones).Draw(t, "zone"))
		}),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 16, 16), func(x []byte) any { return [16]byte(x) }),
	)
	rapid.Check(t, func(t *rapid.T) {
		oid := rapid.SampledFrom([]uint32{pgtype.Int8OID, pgtype.Int4OID, pgtype.Int2OID, pgtype.Float8OID, pgtype.Float4OID,
			pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.BoolOID, pgtype.TimestamptzOID, pgtype.TimestampOID,
			pgtype.DateOID, pgtype.UUIDOID}).Draw(t, "oid")
		v := values.Draw(t, "value")
		got, ok := appendBinary([]byte{}, oid, v)
		if !ok {
			return
		}
		if x, isFloat := v.(float64); isFloat && oid == pgtype.Float4OID {
			f, _ := float4Of(x)
			if want := math.Float32bits(f); binary.BigEndian.Uint32(got) != want {
				t.Fatalf("float64 %v into real: %x, want %x", x, got, want)
			}
			return
		}
		want, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatalf("appendBinary took %T %v for oid %d, which pgtype refuses: %v", v, v, oid, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("oid %d, %T %v: appendBinary %x, pgtype %x", oid, v, v, got, want)
		}
	})
}
