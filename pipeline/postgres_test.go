package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir/internal/pgtest"
	"github.com/weirproject/weir/pipeline"
)

const pgTail = `
source:
  generate: {count: 3, fields: {id: i, t: i}}
  timestamp: t
`

// TestPostgresSinkBadSpecs: each bad sink.postgres gives its first error
// with file:line:column and what is accepted.
func TestPostgresSinkBadSpecs(t *testing.T) {
	t.Setenv("WEIR_TEST_PG_PW", "pw")
	for _, c := range []struct{ name, sink, want string }{
		{"missing url", "sink:\n  postgres: {table: t, columns: {id: id}}\n", `p.yaml:6:14: sink.postgres: missing key "url"`},
		{"unknown key", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}, upsert: true}\n", `p.yaml:6:67: sink.postgres: unknown key "upsert"; accepted: batch, columns, deadLetters, delete, delivery, id, key, mode, password, table, url`},
		{"bad mode", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}, mode: xa}\n", `p.yaml:6:73: sink.postgres.mode: "xa": want one of progress-table, two-phase`},
		{"bad delivery", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}, delivery: twice}\n", `sink.postgres.delivery: "twice": want one of exactly-once, at-least-once`},
		{"empty columns", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {}}\n", `p.yaml:6:57: sink.postgres.columns: empty; want a mapping of column names to field paths`},
		{"bad path", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: 'a..b'}}\n", `p.yaml:6:58: sink.postgres.columns.id: field path "a..b" has an empty part`},
		{"key not a column", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}, key: [nope]}\n", `p.yaml:6:3: sink.postgres.key: column "nope" is not one of columns; want key columns among [id]`},
		{"delete without key", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}, delete: 'op == \"d\"'}\n", `p.yaml:6:3: sink.postgres.delete: needs key`},
		{"bad delete", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}, key: [id], delete: 'op +'}\n", `p.yaml:6:87: sink.postgres.delete: bad expression`},
		{"literal password", "sink:\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}, password: hunter2}\n", `p.yaml:6:77: sink.postgres.password: a literal secret is refused`},
		{"bad table", "sink:\n  postgres: {url: 'postgres://h/db', table: a.b.c, columns: {id: id}}\n", `p.yaml:6:3: sink.postgres: postgres: table "a.b.c"; want name or schema.name`},
		{"two sinks", "sink:\n  stdout: {}\n  postgres: {url: 'postgres://h/db', table: t, columns: {id: id}}\n", `p.yaml:5:1: sink: want exactly one of stdout, file, kafka, parquet, postgres, http (got 2)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pipeline.Parse("p.yaml", []byte("name: j"+pgTail+c.sink))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestPostgresSinkPipeline runs a pipeline file ending in sink.postgres
// (upserts and deletes by an expression, nested field paths, the password
// from ${ENV}) against a real server, exactly once with checkpoints.
func TestPostgresSinkPipeline(t *testing.T) {
	ctx := context.Background()
	conn, url := startPostgres(t, "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty integer, tags jsonb)")
	t.Setenv("WEIR_TEST_PG_PW", "any-password") // trust auth ignores it
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var lines []string
	want := map[int]string{}
	for i := range 50 {
		id := i % 10
		op := "upsert"
		if i%7 == 6 {
			op = "delete"
			delete(want, id)
		} else {
			want[id] = fmt.Sprintf("%d|item-%d|%d|[\"t%d\"]", id, i, i, i%3)
		}
		lines = append(lines, fmt.Sprintf(`{"time": %d, "op": %q, "item": {"id": %d, "name": "item-%d", "qty": %d}, "tags": ["t%d"]}`, i, op, id, i, i, i%3))
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
name: pg-test
job:
  checkpoint: {interval: 50ms, dir: %s}
source:
  file: {paths: [%s]}
  timestamp: time
sink:
  postgres:
    url: %q
    password: ${WEIR_TEST_PG_PW}
    table: items
    columns: {id: item.id, name: item.name, qty: item.qty, tags: tags}
    key: [id]
    delete: op == "delete"
    batch: 4
`, filepath.Join(dir, "chk"), in, url)
	spec, err := pipeline.Parse("pg.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := pipeline.Run(ctx, spec, pipeline.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Outputs["sink"] != 50 {
		t.Fatalf("%d records reached the sink, want 50", sum.Outputs["sink"])
	}
	rows, err := conn.Query(ctx, "SELECT id, name, qty, tags::text FROM items ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var id, qty int
		var name, tags string
		if err := rows.Scan(&id, &name, &qty, &tags); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d|%s|%d|%s", id, name, qty, tags))
	}
	var wantRows []string
	for id := range 10 {
		if w, ok := want[id]; ok {
			wantRows = append(wantRows, w)
		}
	}
	if !slices.Equal(got, wantRows) {
		t.Fatalf("table:\n%v\nwant:\n%v", got, wantRows)
	}
}

// TestPostgresSinkExample runs examples/pipelines/postgres-sink.yaml
// against a throwaway server, twice: upserts leave the same table.
func TestPostgresSinkExample(t *testing.T) {
	ctx := context.Background()
	conn, url := startPostgres(t, "CREATE TABLE orders (id text PRIMARY KEY, customer text NOT NULL, amount numeric, time_ms bigint)")
	t.Setenv("WEIR_PG_URL", url)
	in, err := os.ReadFile(filepath.Join("../examples/pipelines", "orders.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(string(in), `"id": "o-`) // its one bad line is a dead letter
	for run := range 2 {
		spec, err := pipeline.ParseFile("../examples/pipelines/postgres-sink.yaml")
		if err != nil {
			t.Fatal(err)
		}
		spec.Job.CheckpointDir = filepath.Join(t.TempDir(), "chk")
		if _, err := pipeline.Run(ctx, spec, pipeline.Options{}, io.Discard); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE amount IS NOT NULL AND time_ms > 0").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("run %d: %d rows, want %d (one per order id)", run, n, want)
		}
	}
}

// startPostgres starts a throwaway server (skipping the test where
// PostgreSQL is not installed; with prepared transactions, for mode
// two-phase), runs ddl on it and returns a connection and
// the server's URL; both are closed when the test ends.
func startPostgres(t *testing.T, ddl string) (*pgx.Conn, string) {
	t.Helper()
	s, err := pgtest.Start(pgtest.Options{Settings: map[string]string{"max_prepared_transactions": "10"}})
	if errors.Is(err, pgtest.ErrNotInstalled) {
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.ConnString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	return conn, s.ConnString
}

// TestPostgresSinkDeadLetters: records the table cannot hold (text in an
// integer column, no value for a NOT NULL column) go to
// sink.postgres.deadLetters with the reason, in both exactly-once modes;
// the other rows are committed.
func TestPostgresSinkDeadLetters(t *testing.T) {
	ctx := context.Background()
	conn, url := startPostgres(t, "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty integer)")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	lines := `{"time": 1, "id": 1, "name": "one", "qty": 1}
{"time": 2, "id": 2, "name": "two", "qty": "many"}
{"time": 3, "id": 3, "qty": 3}
{"time": 4, "id": 4, "name": "four"}
`
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"progress-table", "two-phase"} {
		t.Run(mode, func(t *testing.T) {
			if _, err := conn.Exec(ctx, "TRUNCATE items"); err != nil {
				t.Fatal(err)
			}
			src := fmt.Sprintf(`
name: pg-dead
job:
  checkpoint: {interval: 50ms, dir: %s}
source:
  file: {paths: [%s]}
  timestamp: time
sink:
  postgres:
    url: %q
    table: items
    columns: {id: id, name: name, qty: qty}
    key: [id]
    mode: %s
    deadLetters: misfits
outputs:
  misfits:
    stdout: {}
`, filepath.Join(dir, "chk-"+mode), in, url, mode)
			spec, err := pipeline.Parse("pg.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			sum, err := pipeline.Run(ctx, spec, pipeline.Options{Stdout: &out}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Outputs["sink"] != 2 || sum.DeadLetters != 2 || sum.Outputs["misfits"] != 2 {
				t.Fatalf("summary %+v; want 2 rows and 2 sink dead letters", sum)
			}
			for _, want := range []string{`"id":2`, `column \"qty\"`, `"id":3`, `column \"name\" is NOT NULL`} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("dead letters %s\nwant %s in them", out.String(), want)
				}
			}
			var ids []int64
			rows, err := conn.Query(ctx, "SELECT id FROM items ORDER BY id")
			if err != nil {
				t.Fatal(err)
			}
			if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, []int64{1, 4}) {
				t.Fatalf("rows %v, want 1 and 4", ids)
			}
		})
	}
}
