package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/internal/pgtest"
	"github.com/weirproject/weir/pipeline"
)

// TestPostgresSourceBadFiles: source.postgres is checked strictly, each
// problem at its file:line:column with what is accepted; the clustered
// form refuses it.
func TestPostgresSourceBadFiles(t *testing.T) {
	const sink = "sink: {stdout: {}}\n"
	for _, c := range []struct{ name, src, want string }{
		{"unknown key", "source:\n  postgres: {url: 'postgres://h/db', slots: x}\n" + sink,
			`p.yaml:2:38: source.postgres: unknown key "slots"; accepted: bounded, publication, slot, snapshot, tables, url`},
		{"no url", "source:\n  postgres: {slot: x}\n" + sink, `p.yaml:2:14: source.postgres: missing key "url"`},
		{"bad url", "source:\n  postgres: {url: 'postgres://h:notaport/db'}\n" + sink, "p.yaml:2:19: source.postgres.url: cdc: Options.URL:"},
		{"bad slot", "source:\n  postgres: {url: 'postgres://h/db', slot: My-Slot}\n" + sink, `p.yaml:2:44: source.postgres.slot: cdc: Options.Slot "My-Slot": want 1 to 63 lower-case letters, digits or _`},
		{"bad table", "source:\n  postgres: {url: 'postgres://h/db', tables: [a.b.c]}\n" + sink, `p.yaml:2:47: source.postgres.tables[0]: cdc: Options.Tables: "a.b.c"`},
		{"snapshot not bool", "source:\n  postgres: {url: 'postgres://h/db', snapshot: yes please}\n" + sink, "p.yaml:2:48: source.postgres.snapshot: got a string, want true or false"},
		{"two sources", "source:\n  postgres: {url: 'postgres://h/db'}\n  generate: {count: 1, fields: {a: i}}\n  timestamp: t\n" + sink,
			"p.yaml:1:1: source: want exactly one of kafka, file, generate, postgres, http (got 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pipeline.Parse("p.yaml", []byte(c.src))
			var es pipeline.Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %T %v; want Errors", err, err)
			}
			if got := es[0].Error(); !strings.HasPrefix(got, c.want) {
				t.Errorf("got  %s\nwant %s...", got, c.want)
			}
		})
	}
	spec, err := pipeline.Parse("p.yaml", []byte("kafka: {brokers: ['h:1']}\nsource:\n  postgres: {url: 'postgres://h/db'}\nsteps:\n  - keyBy: table\n  - window: {tumbling: 1m, aggregate: {n: count}}\nsink:\n  kafka: {topic: out}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pipeline.CheckCluster(spec, pipeline.ClusterOptions{Group: "g"}); err == nil || !strings.Contains(err.Error(), "source.postgres: the processes share the partitions of one Kafka topic") {
		t.Fatalf("CheckCluster: %v; want source.postgres refused", err)
	}
}

func startPG(t *testing.T, settings map[string]string) *pgtest.Server {
	t.Helper()
	s, err := pgtest.Start(pgtest.Options{Settings: settings})
	if errors.Is(err, pgtest.ErrNotInstalled) {
		t.Skipf("PostgreSQL tests skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TestPostgresSourcePipeline: a bounded pipeline copies the snapshot of a
// table, filters on a column, and writes the changes as JSON with their
// values in JSON form; against a server with wal_level = replica the run
// is refused naming the setting.
func TestPostgresSourcePipeline(t *testing.T) {
	srv := startPG(t, map[string]string{"wal_level": "logical", "max_replication_slots": "4", "max_wal_senders": "4"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, srv.ConnString)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE orders (id int PRIMARY KEY, item text, amount numeric(10,2), at timestamptz, big bigint)",
		"INSERT INTO orders VALUES (1, 'apple', 2.50, '2026-12-04T10:00:00Z', 9007199254740993), (2, 'pear', 0.75, '2026-12-04T11:00:00Z', 5)",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PG_URL", srv.ConnString)
	spec, err := pipeline.Parse("p.yaml", []byte(`
source:
  postgres: {url: '${PG_URL}', tables: [orders], snapshot: true, bounded: true}
steps:
  - filter: after.amount > 1
sink:
  stdout: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := pipeline.Run(ctx, spec, pipeline.Options{Stdout: &out, Logger: slog.New(slog.DiscardHandler)}, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("output:\n%s\nwant one record (the filter keeps amount > 1)", out.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	after, _ := rec["after"].(map[string]any)
	if rec["op"] != "read" || rec["table"] != "orders" || rec["schema"] != "public" || after == nil ||
		after["id"] != 1.0 || after["item"] != "apple" || after["amount"] != 2.5 || after["at"] != "2026-12-04T10:00:00Z" || after["big"] != "9007199254740993" {
		t.Fatalf("record %s: want the snapshot row of apple with JSON-shaped values", lines[0])
	}

	replica := startPG(t, map[string]string{"wal_level": "replica"})
	t.Setenv("PG_URL", replica.ConnString)
	spec, err = pipeline.Parse("p.yaml", []byte("source:\n  postgres: {url: '${PG_URL}'}\nsink:\n  stdout: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Run(ctx, spec, pipeline.Options{Stdout: io.Discard, Logger: slog.New(slog.DiscardHandler)}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "p.yaml:2:3: source.postgres:") || !strings.Contains(err.Error(), "wal_level is replica; set wal_level = logical") {
		t.Fatalf("run against wal_level = replica: %v; want the setting named at source.postgres", err)
	}
}

// TestPostgresCDCExample runs examples/pipelines/postgres-cdc.yaml as its
// comment says: a first run copies the snapshot (the big orders); after
// an update and a delete, a second run resumes from the first one's
// checkpoint and adds those two changes; the exactly-once files hold each
// once.
func TestPostgresCDCExample(t *testing.T) {
	srv := startPG(t, map[string]string{"wal_level": "logical", "max_replication_slots": "4", "max_wal_senders": "4"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, srv.ConnString)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	sql := func(qs ...string) {
		for _, q := range qs {
			if _, err := db.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	sql("CREATE TABLE orders (id int PRIMARY KEY, customer text, amount numeric(10,2))", "ALTER TABLE orders REPLICA IDENTITY FULL",
		"INSERT INTO orders VALUES (1, 'ada', 120), (2, 'bob', 300), (3, 'cy', 450)")
	outDir := t.TempDir()
	t.Setenv("PG_URL", srv.ConnString)
	t.Setenv("WEIR_OUT", outDir)
	run := func() []string {
		t.Helper()
		if _, err := pipeline.Run(ctx, parse(t, "postgres-cdc.yaml"), pipeline.Options{Logger: slog.New(slog.DiscardHandler)}, io.Discard); err != nil {
			t.Fatal(err)
		}
		parts, err := file.Committed(outDir + "/postgres-cdc/out")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(parts[0])), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			before, _ := r["before"].(map[string]any)
			after, _ := r["after"].(map[string]any)
			got = append(got, fmt.Sprintf("%v %v %v", r["op"], before, after))
		}
		return got
	}
	want := []string{
		"read map[] map[amount:300 customer:bob id:2]",
		"read map[] map[amount:450 customer:cy id:3]",
	}
	if got := run(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("first run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	sql("UPDATE orders SET amount = 500 WHERE id = 1", "DELETE FROM orders WHERE id = 2")
	want = append(want,
		"update map[amount:120 customer:ada id:1] map[amount:500 customer:ada id:1]",
		"delete map[amount:300 customer:bob id:2] map[]")
	if got := run(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("second run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
