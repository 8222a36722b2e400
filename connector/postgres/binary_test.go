package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres"
	"github.com/weirproject/weir/runtime"
)

// binaryColumns has a column of each type the binary encoder writes
// itself, and two it leaves to pgx (numeric, interval).
const binaryColumns = `id bigint NOT NULL, i8 bigint, i4 integer, i2 smallint, f8 double precision, f4 real,
	t text, vc varchar, bp bpchar, b boolean, ts timestamptz, tsn timestamp, d date, j jsonb, u uuid,
	n numeric, iv interval, nn text NOT NULL`

var binaryColumnNames = []string{"id", "i8", "i4", "i2", "f8", "f4", "t", "vc", "bp", "b", "ts", "tsn", "d", "j", "u", "n", "iv", "nn"}

// TestBinaryMatchesText writes random rows of every type the binary
// encoder handles (NULLs, extreme integers, NaN and infinite floats,
// strings with tabs, newlines, backslashes and unicode, times with
// nanoseconds in various zones, dates far in the past and future, Go
// strings for non-text columns, values to reject) once in COPY's binary
// format and once in its text format, into two tables, and reads them back
// equal: the same rows rejected with the same errors, the same rows
// stored. Times: pgx writes a time.Time in text with six digits of
// fraction, the nanoseconds below a microsecond dropped (truncated toward
// the past; the server then has nothing to round), and binary drops them
// the same way; a string with more digits ("10:30:00.1234567+00") is
// rounded to the nearest microsecond by the server (text) and by pgx's
// parser (binary) alike.
func TestBinaryMatchesText(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	bin := newTable(t, s, "bin", binaryColumns)
	txt := newTable(t, s, "txt", binaryColumns)
	conn, err := pgx.Connect(ctx, s.ConnString)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	read := func(t *rapid.T, table string) []string {
		rows, err := conn.Query(ctx, "SELECT r::text FROM "+table+" r ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	value := valueGens()
	rapid.Check(t, func(rt *rapid.T) {
		if _, err := conn.Exec(ctx, "TRUNCATE "+bin+", "+txt); err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 20).Draw(rt, "rows")
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{int64(i)}
			for _, c := range binaryColumnNames[1:] {
				if c != "nn" && rapid.IntRange(0, 9).Draw(rt, "null") == 0 {
					rows[i] = append(rows[i], nil)
					continue
				}
				rows[i] = append(rows[i], value[c].Draw(rt, c))
			}
		}
		rejBin, errBin := postgres.WriteRows(ctx, s.ConnString, bin, binaryColumnNames, rows, true)
		rejTxt, errTxt := postgres.WriteRows(ctx, s.ConnString, txt, binaryColumnNames, rows, false)
		for i := range rows {
			if fmt.Sprint(rejBin[i]) != fmt.Sprint(rejTxt[i]) {
				rt.Fatalf("row %d %#v: binary rejects with %v, text with %v", i, rows[i], rejBin[i], rejTxt[i])
			}
			if rejBin[i] != nil && !errors.Is(rejBin[i], weir.ErrRejected) {
				rt.Fatalf("row %d: %v is no weir.ErrRejected", i, rejBin[i])
			}
		}
		if (errBin == nil) != (errTxt == nil) {
			rt.Fatalf("COPY binary: %v; text: %v; rows %#v", errBin, errTxt, rows)
		}
		if errBin != nil {
			return // both refused by the server (a value out of its range)
		}
		gotBin, gotTxt := read(rt, bin), read(rt, txt)
		if !slices.Equal(gotBin, gotTxt) {
			for i := range min(len(gotBin), len(gotTxt)) {
				if gotBin[i] != gotTxt[i] {
					rt.Fatalf("row differs:\nbinary %s\ntext   %s", gotBin[i], gotTxt[i])
				}
			}
			rt.Fatalf("binary wrote %d rows, text %d", len(gotBin), len(gotTxt))
		}
	})
}

func valueGens() map[string]*rapid.Generator[any] {
	anyOf := func(gs ...*rapid.Generator[any]) *rapid.Generator[any] { return rapid.OneOf(gs...) }
	i64 := rapid.Map(rapid.Int64(), func(x int64) any { return x })
	extremes := rapid.SampledFrom([]any{int64(math.MinInt64), int64(math.MaxInt64), int64(0), int64(-1), int64(math.MaxInt32) + 1, int64(math.MinInt16) - 1})
	wholeFloat := rapid.Map(rapid.Int64Range(-1<<53, 1<<53), func(x int64) any { return float64(x) })
	badNumbers := rapid.SampledFrom([]any{1.5, math.NaN(), math.Inf(1), 9.3e18, "many", "", " 12", "1e3"})
	intString := rapid.Map(rapid.Int64(), func(x int64) any { return strconv.FormatInt(x, 10) })
	floats := rapid.Map(rapid.Float64(), func(x float64) any { return x })
	floatSpecials := rapid.SampledFrom([]any{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64, float32(math.MaxFloat32), float32(1.1), float32(math.Inf(-1)), "1.5", "NaN", "-Infinity", "x"})
	floats32 := rapid.Map(rapid.Float32(), func(x float32) any { return x })
	noNUL := func(s string) string { return strings.ReplaceAll(s, "\x00", "") }
	tricky := rapid.SampledFrom([]string{"tab\there", "new\nline", `back\slash`, "cr\rx", `\N`, "", " padded  ", "ünïcode ✓", `"quoted"`, "\\.", "a\tb\\c\n"})
	str := rapid.Map(rapid.OneOf(rapid.String(), tricky), func(s string) any { return noNUL(s) })
	zones := rapid.SampledFrom([]*time.Location{time.UTC, time.FixedZone("plus5", 5*3600+30*60), time.FixedZone("minus8", -8*3600)})
	// Years 4000 BC to 9999 AD mostly; some to 200,000 AD (beyond the
	// server's 294,276 AD is refused alike, and pgx writes such a year in
	// text as the server reads it).
	seconds := rapid.OneOf(
		rapid.Int64Range(time.Date(-4000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix()),
		rapid.Int64Range(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(200000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()),
		rapid.Int64Range(-1e10, 1e10),
	)
	times := rapid.Custom(func(t *rapid.T) any {
		return time.Unix(seconds.Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")).In(zones.Draw(t, "zone"))
	})
	timeStrings := rapid.SampledFrom([]any{"2026-12-04 10:30:00.123456+02", "2026-12-04T10:30:00Z", "1999-01-08 04:05:06-08", "not a time", "infinity", "2026-12-04 10:30:00.1234567+00", "2026-12-31 23:59:59.9999995Z"})
	dateStrings := rapid.SampledFrom([]any{"2026-12-04", "0044-03-15 BC", "tomorrowish", "-infinity"})
	json1 := rapid.Custom(func(t *rapid.T) any {
		b, _ := json.Marshal(map[string]any{noNUL(rapid.String().Draw(t, "k")): noNUL(rapid.String().Draw(t, "v")), "n": rapid.Int64().Draw(t, "n")})
		return string(b)
	})
	uuids := rapid.Custom(func(t *rapid.T) any {
		var u [16]byte
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "u"))
		if rapid.Bool().Draw(t, "asString") {
			return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:8], u[8:10], u[10:12], u[12:16])
		}
		return u
	})
	return map[string]*rapid.Generator[any]{
		"i8": anyOf(i64, extremes, wholeFloat, badNumbers, intString, rapid.Map(rapid.Int(), func(x int) any { return x })),
		"i4": anyOf(rapid.Map(rapid.Int32(), func(x int32) any { return x }), extremes, wholeFloat, badNumbers, rapid.Map(rapid.Int32(), func(x int32) any { return strconv.Itoa(int(x)) })),
		"i2": anyOf(rapid.Map(rapid.Int16(), func(x int16) any { return x }), rapid.Map(rapid.Int(), func(x int) any { return x }), extremes, badNumbers),
		"f8": anyOf(floats, floatSpecials, floats32),
		"f4": anyOf(floats32, floatSpecials, floats, rapid.SampledFrom([]any{1 + 0x1p-24, 1 + 0x1p-24 + 0x1p-52, 0x1p-149, 0x1p-150, 1e-50, 3.4028235677973366e38, 3.4028236e38})),
		"t":  str, "vc": str, "bp": str, "nn": str,
		"b":   anyOf(rapid.Map(rapid.Bool(), func(x bool) any { return x }), rapid.SampledFrom([]any{"t", "f", "true", "false", "yes", "no", "1", "0", "on", "off", "maybe"})),
		"ts":  anyOf(times, timeStrings),
		"tsn": anyOf(times, rapid.SampledFrom([]any{"2026-12-04 10:30:00.5", "nope", "2026-12-04 10:30:00.12345651"})),
		"d":   anyOf(times, dateStrings),
		"j":   anyOf(json1, rapid.SampledFrom([]any{`{"a": [1, 2.5, "x\ty"]}`, "[]", "null", `"\u00e9"`, "{bad", map[string]any{"k": "v\n"}})),
		"u":   anyOf(uuids, rapid.Just[any]("not-a-uuid")),
		"n":   anyOf(rapid.SampledFrom([]any{"1.5", "-0.000001", "NaN", "1e-20", "12345678901234567890.123", "abc"}), floats, i64),
		"iv":  rapid.SampledFrom([]any{"1 day 02:03:04.5", "-3 months", time.Duration(90) * time.Minute, "P1Y2M", "never"}),
	}
}

// TestTextCheckpointCommits: a transaction from a checkpoint written
// before binary COPY (Format "", rows in COPY's text format) still
// commits on a sink whose table takes binary rows; and a transaction of
// binary rows survives its checkpoint's JSON round trip and commits.
func TestTextCheckpointCommits(t *testing.T) {
	s := server(t)
	table := newTable(t, s, "ckpt", "id bigint NOT NULL, name text, at timestamptz")
	type rec struct {
		ID   int64
		Name string
	}
	at := time.Date(2026, 12, 4, 10, 30, 0, 123456789, time.UTC)
	o := postgres.Options[rec]{URL: s.ConnString, Table: table, Columns: []string{"id", "name", "at"},
		Row: func(r rec) ([]any, error) { return []any{r.ID, r.Name, at}, nil }}
	sk, err := postgres.New(o)(&runtime.Context{Name: "ckpt"})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.(interface{ Close() error }).Close()
	// As the checkpoint of a previous version stores it.
	old := []byte(`{"id":"` + table + `.ckpt","subtask":0,"seq":7,"run":"0123456789abcdef","rows":2,` +
		`"data":"MQl0YWJcdGhlcmUJMjAyNi0xMi0wNCAxMDozMDowMC4xMjM0NTZaCjIJXE4JXE4K","ops":"d3c="}`)
	var txn postgres.Txn
	if err := json.Unmarshal(old, &txn); err != nil {
		t.Fatal(err)
	}
	if string(txn.Data) != "1\ttab\\there\t2026-12-04 10:30:00.123456Z\n2\t\\N\t\\N\n" || txn.Format != "" {
		t.Fatalf("the old checkpoint decodes to %q, format %q", txn.Data, txn.Format)
	}
	if err := sk.Recover(&txn, true); err != nil {
		t.Fatal(err)
	}
	if err := sk.Commit(&txn); err != nil {
		t.Fatal(err)
	}
	// A new transaction: binary rows, through JSON as a checkpoint.
	open, err := sk.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []rec{{3, "new\tline"}, {4, ""}} {
		if err := sk.Write(open, weir.Record[rec]{Value: r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sk.PreCommit(open); err != nil {
		t.Fatal(err)
	}
	if open.Format != "binary" {
		t.Fatalf("a new transaction's rows are in format %q, want binary", open.Format)
	}
	j, err := json.Marshal(open)
	if err != nil {
		t.Fatal(err)
	}
	var restored postgres.Txn
	if err := json.Unmarshal(j, &restored); err != nil {
		t.Fatal(err)
	}
	if err := sk.Commit(&restored); err != nil {
		t.Fatal(err)
	}
	got := query(t, s.ConnString, "SELECT id, coalesce(name, 'NULL'), coalesce(at::text, 'NULL') FROM "+table+" ORDER BY id")
	want := []string{"1|tab\there|2026-12-04 10:30:00.123456+00", "2|NULL|NULL", "3|new\tline|2026-12-04 10:30:00.123456+00", "4||2026-12-04 10:30:00.123456+00"}
	if !slices.Equal(got, want) {
		t.Fatalf("table holds %q, want %q", got, want)
	}
	// Committing the old transaction again writes nothing twice (P3).
	if err := sk.Commit(&txn); err != nil {
		t.Fatal(err)
	}
	if got := query(t, s.ConnString, "SELECT count(*) FROM "+table); got[0] != "4" {
		t.Fatalf("after committing again: %v rows, want 4", got)
	}
}
