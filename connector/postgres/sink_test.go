package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres"
	"github.com/weirproject/weir/internal/pgtest"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

type change struct {
	ID   int64
	Name string
	Del  bool
}

func changeOptions(url, table string) postgres.Options[change] {
	return postgres.Options[change]{
		URL:     url,
		Table:   table,
		Columns: []string{"id", "name"},
		Row:     func(c change) ([]any, error) { return []any{c.ID, c.Name}, nil },
		Key:     []string{"id"},
		Delete:  func(c change) (bool, error) { return c.Del, nil },
		Batch:   3,
	}
}

// TestUpsertDelete writes inserts, updates and deletes of a few keys, in
// every delivery and mode, and checks the table against a map applying
// them in order (P2, P6, P7: batches of 3 split the changes of a key).
func TestUpsertDelete(t *testing.T) {
	s := server(t)
	var changes []change
	for i := range 40 {
		id := int64(i % 7)
		changes = append(changes, change{ID: id, Name: fmt.Sprintf("v%d", i), Del: i%5 == 3})
	}
	want := map[int64]string{}
	for _, c := range changes {
		if c.Del {
			delete(want, c.ID)
		} else {
			want[c.ID] = c.Name
		}
	}
	var wantRows []string
	for id, name := range want {
		wantRows = append(wantRows, fmt.Sprintf("%d|%s", id, name))
	}
	slices.Sort(wantRows)
	for _, c := range []struct {
		delivery postgres.Delivery
		mode     postgres.Mode
	}{{postgres.ExactlyOnce, postgres.ProgressTable}, {postgres.ExactlyOnce, postgres.TwoPhase}, {postgres.AtLeastOnce, ""}} {
		t.Run(string(c.delivery)+"-"+string(c.mode), func(t *testing.T) {
			table := newTable(t, s, "upsert", "id bigint PRIMARY KEY, name text NOT NULL")
			env := weir.NewEnvironment(weir.Config{Parallelism: 1})
			src := weir.FromSlice(env, "changes", changes, stamped[change]())
			o := changeOptions(s.ConnString, table)
			o.Delivery, o.Mode = c.delivery, c.mode
			postgres.Sink(src, "pg", o)
			if err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := query(t, s.ConnString, "SELECT id, name FROM "+table+" ORDER BY id::text")
			slices.Sort(got)
			if !slices.Equal(got, wantRows) {
				t.Fatalf("table holds %v, want %v", got, wantRows)
			}
		})
	}
}

type row struct {
	ID    int64
	Text  *string
	At    time.Time
	Bytes []byte
	Doc   map[string]any
	Ok    bool
}

// TestInsertValues sends values that need escaping in COPY's text format
// and NULLs through both paths (COPY for inserts, statements for
// upserts), each read back equal (P7).
func TestInsertValues(t *testing.T) {
	s := server(t)
	tricky := []string{"plain", "tab\there", "new\nline", `back\slash`, "cr\rx", `\N`, "", "ünïcode ✓"}
	at := time.Date(2026, 12, 4, 10, 30, 0, 123000000, time.UTC)
	var rows []row
	for i, x := range tricky {
		rows = append(rows, row{ID: int64(i), Text: &x, At: at.Add(time.Duration(i) * time.Hour), Bytes: []byte(x + "\x00\xff"), Doc: map[string]any{"k": x}, Ok: i%2 == 0})
	}
	rows = append(rows, row{ID: 100}) // NULL text, zero time, nil bytes and doc
	for _, key := range [][]string{nil, {"id"}} {
		t.Run(fmt.Sprintf("key=%v", key), func(t *testing.T) {
			table := newTable(t, s, "vals", "id bigint PRIMARY KEY, txt text, at timestamptz, b bytea, doc jsonb, ok boolean")
			env := weir.NewEnvironment(weir.Config{Parallelism: 1})
			src := weir.FromSlice(env, "rows", rows, stamped[row]())
			postgres.Sink(src, "pg", postgres.Options[row]{URL: s.ConnString, Table: table,
				Columns: []string{"id", "txt", "at", "b", "doc", "ok"}, Key: key,
				Row: func(r row) ([]any, error) {
					var doc any
					if r.Doc != nil {
						doc = r.Doc
					}
					var b any
					if r.Bytes != nil {
						b = r.Bytes
					}
					return []any{r.ID, r.Text, r.At, b, doc, r.Ok}, nil
				}})
			if err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				got := query(t, s.ConnString, "SELECT txt IS NOT DISTINCT FROM $2, at = $3, b IS NOT DISTINCT FROM $4, doc->>'k' IS NOT DISTINCT FROM $2, ok = $5 FROM "+table+" WHERE id = $1",
					r.ID, r.Text, r.At, nilIfEmpty(r.Bytes), r.Ok)
				if len(got) != 1 || got[0] != "true|true|true|true|true" {
					t.Errorf("row %d (%q): comparisons %v, want all true", r.ID, deref(r.Text), got)
				}
			}
		})
	}
}

func nilIfEmpty(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestTwoPhaseNeedsPreparedTransactions: a server with
// max_prepared_transactions = 0 refuses mode two-phase at start with an
// error naming the setting and the other mode (P4); progress-table works.
func TestTwoPhaseNeedsPreparedTransactions(t *testing.T) {
	server(t) // skips when PostgreSQL is missing
	s0, err := pgtest.Start(pgtest.Options{Settings: map[string]string{"max_prepared_transactions": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Stop()
	table := newTable(t, s0, "noprep", "id bigint PRIMARY KEY, name text")
	run := func(mode postgres.Mode) error {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.FromSlice(env, "changes", []change{{ID: 1, Name: "a"}}, stamped[change]())
		o := changeOptions(s0.ConnString, table)
		o.Mode = mode
		postgres.Sink(src, "pg", o)
		return env.Execute(context.Background())
	}
	err = run(postgres.TwoPhase)
	if err == nil || !strings.Contains(err.Error(), "max_prepared_transactions > 0") || !strings.Contains(err.Error(), "progress-table") {
		t.Fatalf("two-phase on a server without prepared transactions: got %v, want an error naming max_prepared_transactions and mode progress-table", err)
	}
	if err := run(postgres.ProgressTable); err != nil {
		t.Fatalf("progress-table: %v", err)
	}
	if got := query(t, s0.ConnString, "SELECT name FROM "+table); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("table holds %v", got)
	}
}

// TestMissingTableAndKey: the sink fails at start on a missing table or
// column, or a key without a unique constraint (P1).
func TestMissingTableAndKey(t *testing.T) {
	s := server(t)
	table := newTable(t, s, "nokey", "id bigint, name text")
	for _, c := range []struct {
		table string
		cols  []string
		key   []string
		want  string
	}{
		{"no_such_table", []string{"id", "name"}, nil, "does not exist"},
		{table, []string{"id", "nope"}, nil, `has no column "nope"`},
		{table, []string{"id", "name"}, []string{"id"}, "primary key or unique constraint"},
	} {
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		src := weir.FromSlice(env, "changes", []change{{ID: 1, Name: "a"}}, stamped[change]())
		o := changeOptions(s.ConnString, c.table)
		o.Columns, o.Key, o.Delete = c.cols, c.key, nil
		postgres.Sink(src, "pg", o)
		err := env.Execute(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("table %s columns %v key %v: got %v, want an error containing %q", c.table, c.cols, c.key, err, c.want)
		}
	}
}

// TestValidate: bad options fail when the job is built, each with one
// line naming what is wrong.
func TestValidate(t *testing.T) {
	good := changeOptions("postgres://u@localhost/db", "t")
	for _, c := range []struct {
		edit func(*postgres.Options[change])
		want string
	}{
		{func(o *postgres.Options[change]) { o.URL = "" }, "URL is empty"},
		{func(o *postgres.Options[change]) { o.URL = "postgres://u:hunter2@[::1/db" }, "URL does not parse"},
		{func(o *postgres.Options[change]) { o.Table = "a.b.c" }, `table "a.b.c"`},
		{func(o *postgres.Options[change]) { o.Columns = nil }, "Columns is empty"},
		{func(o *postgres.Options[change]) { o.Row = nil }, "Row is nil"},
		{func(o *postgres.Options[change]) { o.Key = []string{"zz"} }, `key column "zz"`},
		{func(o *postgres.Options[change]) { o.Key = nil }, "Delete needs Key"},
		{func(o *postgres.Options[change]) { o.Delivery = "twice" }, `Delivery "twice"`},
		{func(o *postgres.Options[change]) { o.Mode = "xa" }, `Mode "xa"`},
		{func(o *postgres.Options[change]) { o.ID = "a b" }, `ID "a b"`},
	} {
		o := good
		c.edit(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "postgres: ") {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPasswordNeverLogged: a server that cannot be reached makes the sink
// retry (logging a warning each time) and fail; neither the logs nor the
// error hold the password (P8).
func TestPasswordNeverLogged(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	var logs bytes.Buffer
	ctx := &runtime.Context{Name: "pg", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	for _, o := range []postgres.Options[change]{
		{URL: "postgres://weir:" + secret + "@127.0.0.1:1/db?connect_timeout=2", Table: "t", Columns: []string{"id"}, Row: func(change) ([]any, error) { return nil, nil }, Retries: 2, RetryBackoff: time.Millisecond},
		{URL: "host=127.0.0.1 port=1 user=weir dbname=db connect_timeout=2", Password: secret, Table: "t", Columns: []string{"id"}, Row: func(change) ([]any, error) { return nil, nil }, Retries: 2, RetryBackoff: time.Millisecond},
	} {
		logs.Reset()
		_, err := postgres.New(o)(ctx)
		if err == nil {
			t.Fatal("no error connecting to a closed port")
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
			t.Fatalf("the password shows:\nerror: %v\nlogs: %s", err, logs.String())
		}
		if !strings.Contains(logs.String(), "retrying") {
			t.Fatalf("no retry was logged: %s", logs.String())
		}
	}
}

// stamped gives every record timestamp 0 (FromSlice's records have none).
func stamped[T any]() watermark.Strategy[T] {
	return watermark.NoWatermarks[T]().WithTimestamp(func(T, int64) (int64, bool) { return 0, true })
}

type tagged struct {
	ID     int64  `pg:"id"`
	Name   string `pg:"name"`
	Note   string // not a column
	Skip   int    `pg:"-"`
	hidden int
}

// TestStructColumns maps a struct's tagged fields to columns and writes
// it.
func TestStructColumns(t *testing.T) {
	cols, row, err := postgres.StructColumns[*tagged]()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cols, []string{"id", "name"}) {
		t.Fatalf("columns %v", cols)
	}
	if _, err := row(nil); err == nil {
		t.Fatal("a nil pointer gave no error")
	}
	if _, _, err := postgres.StructColumns[int](); err == nil || !strings.Contains(err.Error(), "not a struct") {
		t.Fatalf("int: %v", err)
	}
	s := server(t)
	table := newTable(t, s, "tagged", "id bigint PRIMARY KEY, name text NOT NULL")
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "rows", []*tagged{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}, {ID: 1, Name: "c"}}, stamped[*tagged]())
	postgres.Sink(src, "pg", postgres.Options[*tagged]{URL: s.ConnString, Table: table, Columns: cols, Row: row, Key: []string{"id"}})
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := query(t, s.ConnString, "SELECT id, name FROM "+table+" ORDER BY id"); !slices.Equal(got, []string{"1|c", "2|b"}) {
		t.Fatalf("table %v", got)
	}
}
