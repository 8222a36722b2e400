package parquet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/parquet"
	"github.com/weirproject/weir/internal/npmtools"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// duckDBPackage is the npm package (and version) the DuckDB tests read
// Parquet with; .ci/install-npm-tools installs the same.
const duckDBPackage = "@duckdb/node-api@1.5.6-r.1"

// duckDB returns node and the directory of the installed @duckdb/node-api
// module (internal/npmtools installs it when missing), or skips the test
// saying why.
func duckDB(t *testing.T) (node, module string) {
	t.Helper()
	node, modules := npmtools.Require(t, "the DuckDB reader", duckDBPackage)
	return node, filepath.Join(modules, "@duckdb", "node-api")
}

// duckDBScript reads the committed files with DuckDB and prints, as JSON,
// aggregates and the column types (DESCRIBE) of the table read.
const duckDBScript = `
const { DuckDBInstance } = require(process.argv[2]);
(async () => {
  const con = await (await DuckDBInstance.create(':memory:')).connect();
  const from = "read_parquet('" + process.argv[3].replaceAll("'", "''") + "/**/*.parquet', hive_partitioning=true)";
  const agg = await con.runAndReadAll(
    "SELECT count(*) AS n, sum(id) AS ids, count(DISTINCT id) AS distinct_ids, sum(amount) AS amount, " +
    "count(note) AS notes, count(*) FILTER (WHERE paid) AS paid, epoch_ms(min(placed)) AS first_at, epoch_ms(max(placed)) AS last_at, " +
    "count(DISTINCT (dt, hour)) AS partitions FROM " + from);
  const types = await con.runAndReadAll("DESCRIBE SELECT * FROM " + from);
  const schema = {};
  for (const r of types.getRowObjectsJson()) schema[r.column_name] = r.column_type;
  console.log(JSON.stringify({ agg: agg.getRowObjectsJson()[0], schema }));
})().catch(e => { console.error(String(e)); process.exit(1); });
`

// TestDuckDBReadsCommittedFiles: records written with declared fields
// (through a failure and a restore) are read back by DuckDB, not by
// parquet-go: the count, sums, nulls and partitions match what was
// written, and the columns have the declared types (int64 BIGINT, double
// DOUBLE, boolean BOOLEAN, timestamp TIMESTAMP WITH TIME ZONE, string
// VARCHAR; hive partitions dt DATE and hour VARCHAR: DuckDB keeps "09" a string).
func TestDuckDBReadsCommittedFiles(t *testing.T) {
	node, module := duckDB(t)
	const n = 2000
	dir := t.TempDir()
	var failed atomic.Bool
	env := weir.NewEnvironment(weir.Config{Parallelism: 2,
		Restart:    runtime.RestartStrategy{Kind: runtime.RestartFixedDelay, Attempts: 1, Delay: time.Millisecond},
		Checkpoint: runtime.CheckpointConfig{Interval: 3 * time.Millisecond, Dir: t.TempDir()}})
	src := weir.Generate(env, "orders", n, func(i int64) weir.Record[map[string]any] {
		ts := base + i*60_000
		r := map[string]any{"id": float64(i), "customer": fmt.Sprintf("c%d", i%7), "amount": float64(i%100) + 0.25,
			"paid": i%3 == 0, "placed": time.UnixMilli(ts).UTC().Format(time.RFC3339), "extra": "not declared"}
		if i%2 == 0 {
			r["note"] = "even"
		}
		return weir.Record[map[string]any]{Value: r, Timestamp: ts}
	}, watermark.ForMonotonous[map[string]any]()).UID("orders")
	checked := weir.MapErr(src, "crash", func(r map[string]any) (map[string]any, error) {
		if r["id"] == float64(1234) && failed.CompareAndSwap(false, true) {
			return nil, fmt.Errorf("injected failure")
		}
		return r, nil
	}).UID("crash")
	fields := []parquet.Field{{Name: "id", Type: "int64"}, {Name: "customer", Type: "string"}, {Name: "amount", Type: "double"},
		{Name: "paid", Type: "boolean"}, {Name: "placed", Type: "timestamp"}, {Name: "note", Type: "string", Optional: true}}
	parquet.SinkFields(checked, "sink", parquet.Options{Path: dir, RollSize: 8 << 10}, fields).UID("sink")
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if !failed.Load() {
		t.Fatal("the injected failure did not happen")
	}

	script := filepath.Join(t.TempDir(), "read.js")
	if err := os.WriteFile(script, []byte(duckDBScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, script, module, dir).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("DuckDB: %v: %s", err, stderr)
	}
	var got struct {
		Agg    map[string]any    `json:"agg"`
		Schema map[string]string `json:"schema"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("DuckDB printed %s: %v", out, err)
	}
	var amount float64
	paid := 0
	for i := range int64(n) {
		amount += float64(i%100) + 0.25
		if i%3 == 0 {
			paid++
		}
	}
	want := map[string]any{
		"n": fmt.Sprint(n), "ids": fmt.Sprint(n * (n - 1) / 2), "distinct_ids": fmt.Sprint(n), "amount": amount,
		"notes": fmt.Sprint(n / 2), "paid": fmt.Sprint(paid), "first_at": fmt.Sprint(base), "last_at": fmt.Sprint(base + (n-1)*60_000), "partitions": fmt.Sprint((n + 59) / 60),
	}
	for k, v := range want {
		if fmt.Sprint(got.Agg[k]) != fmt.Sprint(v) {
			t.Errorf("DuckDB %s = %v; want %v (all: %s)", k, got.Agg[k], v, out)
		}
	}
	wantSchema := map[string]string{"id": "BIGINT", "customer": "VARCHAR", "amount": "DOUBLE", "paid": "BOOLEAN",
		"placed": "TIMESTAMP WITH TIME ZONE", "note": "VARCHAR", "dt": "DATE", "hour": "VARCHAR"}
	if fmt.Sprint(got.Schema) != fmt.Sprint(wantSchema) {
		t.Errorf("DuckDB schema %v; want %v", got.Schema, wantSchema)
	}
}
