package cdc_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/connector/file"
	"github.com/weirproject/weir/connector/postgres/cdc"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// runJob runs a bounded job reading o into exactly-once files in out,
// checkpointing into chk (restoring from its newest checkpoint when
// restore), through a step that fails the job once, at the failAt-th
// change (0: never), restarted in the process from the newest checkpoint.
func runJob(t *testing.T, o cdc.Options, out, chk string, restore bool, failAt int64) int64 {
	t.Helper()
	cfg := runtime.CheckpointConfig{Interval: 5 * time.Millisecond, Dir: chk}
	if restore {
		p, _, err := checkpoint.Latest(chk)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RestoreFrom = p
	}
	env := weir.NewEnvironment(weir.Config{Logger: quiet, Checkpoint: cfg,
		Restart: runtime.RestartStrategy{Kind: runtime.RestartFixedDelay, Attempts: 1, Delay: time.Millisecond}})
	src := weir.FromSource(env, "pg", cdc.NewSource(o), watermark.ForBoundedOutOfOrderness[cdc.Change](0)).UID("pg")
	var seen atomic.Int64
	lines := weir.MapErr(src, "check", func(c cdc.Change) (string, error) {
		if seen.Add(1) == failAt {
			return "", fmt.Errorf("change %d: injected failure", failAt)
		}
		return line(c), nil
	}).UID("check")
	weir.TwoPhaseCommit(lines, "sink", file.ExactlyOnce(out, func(s string) ([]byte, error) { return []byte(s), nil })).UID("sink")
	job, err := env.Start(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	return job.Metrics().Sum("job", runtime.MetricRestarts)
}

func committed(t *testing.T, dir string) []string {
	t.Helper()
	parts, err := file.Committed(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	return strings.Split(strings.TrimSuffix(string(all), "\n"), "\n")
}

// TestChangesExactlyOnceAcrossRestarts: a first bounded run copies the
// snapshot of the existing rows; changes are made (update with before and
// after under REPLICA IDENTITY FULL, delete, inserts in single-row and in
// one large transaction, truncate); a second run restored from the first
// run's final checkpoint streams them, fails in the middle of the large
// transaction and is restarted in the process from its newest checkpoint.
// The exactly-once files hold every change once, in order, and the slot
// has confirmed the positions of the completed checkpoints only.
func TestChangesExactlyOnceAcrossRestarts(t *testing.T) {
	url, slot := freshDB(t)
	db := connect(t, url)
	execSQL(t, db, "CREATE TABLE orders (id int PRIMARY KEY, item text, qty bigint)", "ALTER TABLE orders REPLICA IDENTITY FULL",
		"INSERT INTO orders VALUES (1, 'apple', 1), (2, 'pear', 2), (3, 'plum', 3)")
	o := cdc.Options{URL: url, Slot: slot, Tables: []string{"orders"}, Snapshot: true, Bounded: true}
	out, chk := t.TempDir(), t.TempDir()

	runJob(t, o, out, chk, false, 0)
	want := []string{
		"read public.orders before=- after=id:1,item:apple,qty:1",
		"read public.orders before=- after=id:2,item:pear,qty:2",
		"read public.orders before=- after=id:3,item:plum,qty:3",
	}
	if got := committed(t, out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after the snapshot run, committed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	afterSnapshot := confirmedFlush(t, db, slot)

	execSQL(t, db, "UPDATE orders SET qty = 10 WHERE id = 1", "DELETE FROM orders WHERE id = 2")
	want = append(want,
		"update public.orders before=id:1,item:apple,qty:1 after=id:1,item:apple,qty:10",
		"delete public.orders before=id:2,item:pear,qty:2 after=-")
	for i := 4; i < 204; i++ {
		execSQL(t, db, fmt.Sprintf("INSERT INTO orders VALUES (%d, 'x', %d)", i, i))
		want = append(want, fmt.Sprintf("insert public.orders before=- after=id:%d,item:x,qty:%d", i, i))
	}
	execSQL(t, db, "INSERT INTO orders SELECT i, 'big', i FROM generate_series(204, 803) i")
	for i := 204; i < 804; i++ {
		want = append(want, fmt.Sprintf("insert public.orders before=- after=id:%d,item:big,qty:%d", i, i))
	}
	execSQL(t, db, "TRUNCATE orders", "INSERT INTO orders VALUES (1000, 'last', 1)")
	want = append(want, "truncate public.orders before=- after=-", "insert public.orders before=- after=id:1000,item:last,qty:1")

	// The 500th change is inside the large transaction.
	if restarts := runJob(t, o, out, chk, true, 500); restarts != 1 {
		t.Fatalf("%d restarts, want 1", restarts)
	}
	got := committed(t, out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("committed %d lines, want %d; first difference: %s", len(got), len(want), firstDiff(got, want))
	}
	if end := confirmedFlush(t, db, slot); end <= afterSnapshot {
		t.Fatalf("slot confirmed %s after the second run, %s before it: the completed checkpoints' positions were not confirmed", end, afterSnapshot)
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, got[i], want[i])
		}
	}
	return fmt.Sprintf("the common prefix is %d lines", min(len(got), len(want)))
}

// TestConfirmedOnlyAfterCheckpoint: changes read and emitted are not
// confirmed to the server (pg_replication_slots.confirmed_flush_lsn) until
// a checkpoint that covers them completes; then they are. Also: once
// caught up and quiet, the split is idle, and active again before its
// next change.
func TestConfirmedOnlyAfterCheckpoint(t *testing.T) {
	url, slot := freshDB(t)
	db := connect(t, url)
	execSQL(t, db, "CREATE TABLE confirm (id int PRIMARY KEY)")
	env := weir.NewEnvironment(weir.Config{Logger: quiet, Checkpoint: runtime.CheckpointConfig{Dir: t.TempDir()}})
	s := cdc.NewSource(cdc.Options{URL: url, Slot: slot, Tables: []string{"confirm"}})
	obs := weirtest.Observe(weir.FromSource(env, "pg", s, watermark.ForBoundedOutOfOrderness[cdc.Change](0)).UID("pg"))
	ctx := testCtx(t)
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); job.Wait() }()
	if err := obs.WaitUntil(ctx, s.CaughtUp); err != nil {
		t.Fatal(err)
	}
	// Caught up and quiet: the split goes idle (C7).
	idle := func() bool {
		ev := obs.Events(0)
		return len(ev) > 0 && ev[len(ev)-1].Kind == weirtest.IdleEvent
	}
	if err := obs.WaitUntil(ctx, idle); err != nil {
		t.Fatal(err)
	}
	// A checkpoint before any change: the slot's position as it starts.
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	before := confirmedFlush(t, db, slot)
	for i := range 5 {
		execSQL(t, db, fmt.Sprintf("INSERT INTO confirm VALUES (%d)", i))
	}
	if err := obs.WaitRecords(ctx, 5); err != nil {
		t.Fatal(err)
	}
	last := obs.Values()[4].LSN
	// Active again before the first change after the quiet time.
	var kinds []string
	for _, e := range obs.Events(0) {
		if e.Kind != weirtest.WatermarkEvent {
			kinds = append(kinds, e.Kind.String())
		}
	}
	if seq := strings.Join(kinds, " "); !strings.HasPrefix(seq, "idle active record") {
		t.Fatalf("events %s: want idle (quiet after the catch-up), then active before the first record", seq)
	}
	if last <= before {
		t.Fatalf("the last insert committed at %s, not after the slot's position %s", last, before)
	}
	// Read and emitted, but no checkpoint covers them: a status update is
	// sent at least every 100ms; wait for a few, then look.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if now := confirmedFlush(t, db, slot); now != before {
			t.Fatalf("confirmed_flush_lsn moved from %s to %s before a checkpoint covered the changes", before, now)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := job.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	for confirmedFlush(t, db, slot) <= last {
		if ctx.Err() != nil {
			t.Fatalf("confirmed_flush_lsn is %s after the checkpoint completed; want past %s", confirmedFlush(t, db, slot), last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServerNotSetUp: wal_level = replica, and a role without the
// REPLICATION privilege, are refused at the start with one line naming
// what to change; a job fails with it.
func TestServerNotSetUp(t *testing.T) {
	t.Run("wal_level", func(t *testing.T) {
		srv := startServer(t, map[string]string{"wal_level": "replica"})
		s := cdc.NewSource(cdc.Options{URL: srv.ConnString})
		err := s.Check(testCtx(t))
		if !errors.Is(err, cdc.ErrServerSetup) || !strings.Contains(err.Error(), "wal_level is replica; set wal_level = logical") {
			t.Fatalf("Check: %v; want the wal_level error", err)
		}
		env := weir.NewEnvironment(weir.Config{Logger: quiet})
		weirtest.Observe(weir.FromSource(env, "pg", s, watermark.ForBoundedOutOfOrderness[cdc.Change](0)))
		if err := env.Execute(testCtx(t)); err == nil || !strings.Contains(err.Error(), "wal_level") {
			t.Fatalf("job: %v; want the wal_level error", err)
		}
	})
	t.Run("replication privilege", func(t *testing.T) {
		srv := logicalServer(t)
		execSQL(t, connect(t, srv.ConnString), "DO $$ BEGIN CREATE ROLE plain LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
		url := strings.Replace(srv.ConnString, "user=weir", "user=plain", 1)
		err := cdc.NewSource(cdc.Options{URL: url}).Check(testCtx(t))
		if !errors.Is(err, cdc.ErrServerSetup) || !strings.Contains(err.Error(), `role "plain" lacks the REPLICATION privilege`) {
			t.Fatalf("Check: %v; want the privilege error", err)
		}
	})
}

// TestOptionsValidate: bad options are refused before any connection.
func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    cdc.Options
		want string
	}{
		{cdc.Options{}, "Options.URL is empty"},
		{cdc.Options{URL: "postgres://x/y", Slot: "Bad-Slot"}, "Options.Slot"},
		{cdc.Options{URL: "postgres://x/y", Tables: []string{"a.b.c"}}, "Options.Tables"},
		{cdc.Options{URL: "postgres://x/y", StatusInterval: -1}, "Options.StatusInterval"},
		{cdc.Options{URL: "postgres://x/y", BatchSize: -1}, "Options.BatchSize"},
	} {
		err := cdc.NewSource(c.o).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.want)
		}
	}
	if err := cdc.NewSource(cdc.Options{URL: "postgres://x/y"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestTypedValues: column values are decoded by their type (C4), in the
// stream as in the snapshot; an update that leaves a large (TOASTed) value
// as it was names the column in Unchanged; a delete under the default
// replica identity carries the key only; a type pgx does not know (an
// enum) is its text.
func TestTypedValues(t *testing.T) {
	url, slot := freshDB(t)
	db := connect(t, url)
	// The jobs end, and the source's goroutines with them.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	execSQL(t, db, "CREATE TYPE mood AS ENUM ('sad', 'happy')",
		"CREATE TABLE v (id int PRIMARY KEY, n numeric(10,2), at timestamptz, u uuid, j jsonb, ok bool, b bytea, m mood, big text)",
		"ALTER TABLE v ALTER COLUMN big SET STORAGE EXTERNAL",
		"INSERT INTO v VALUES (1, 12.50, '2026-12-04T10:00:00Z', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"k\": [1, \"x\"]}', true, '\\x0102', 'happy', repeat('x', 10000))")
	o := cdc.Options{URL: url, Snapshot: true, Bounded: true, Slot: slot, Tables: []string{"v"}}
	chk := t.TempDir()
	read := func() []cdc.Change {
		cfg := runtime.CheckpointConfig{Interval: 5 * time.Millisecond, Dir: chk}
		if p, _, err := checkpoint.Latest(chk); err == nil && p != "" {
			cfg.RestoreFrom = p
		}
		env := weir.NewEnvironment(weir.Config{Logger: quiet, Checkpoint: cfg})
		obs := weirtest.Observe(weir.FromSource(env, "pg", cdc.NewSource(o), watermark.ForBoundedOutOfOrderness[cdc.Change](0)).UID("pg"))
		if err := env.Execute(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		return obs.Values()
	}
	check := func(what string, row map[string]any) {
		t.Helper()
		want := map[string]string{"id": "int32", "n": "pgtype.Numeric", "at": "time.Time", "u": "[16]uint8", "j": "map[string]interface {}",
			"ok": "bool", "b": "[]uint8", "m": "string", "big": "string"}
		for col, typ := range want {
			if got := fmt.Sprintf("%T", row[col]); got != typ {
				t.Errorf("%s: column %s is %s (%v), want %s", what, col, got, row[col], typ)
			}
		}
		if at, _ := row["at"].(time.Time); !at.Equal(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: at = %v", what, row["at"])
		}
		if row["m"] != "happy" {
			t.Errorf("%s: m = %v", what, row["m"])
		}
	}
	got := read()
	if len(got) != 1 || got[0].Op != cdc.OpRead {
		t.Fatalf("snapshot: %+v", got)
	}
	check("snapshot", got[0].After)

	execSQL(t, db, "INSERT INTO v SELECT 2, n, at, u, j, ok, b, m, big FROM v WHERE id = 1",
		"UPDATE v SET n = 13 WHERE id = 1", "DELETE FROM v WHERE id = 2")
	got = read()
	if len(got) != 3 || got[0].Op != cdc.OpInsert || got[1].Op != cdc.OpUpdate || got[2].Op != cdc.OpDelete {
		t.Fatalf("stream: %d changes %+v; want insert, update, delete", len(got), got)
	}
	check("insert", got[0].After)
	u := got[1]
	if _, has := u.After["big"]; has || u.Before != nil || fmt.Sprint(u.Unchanged) != "[big]" || u.After["id"] != int32(1) {
		t.Errorf("update: before %v, unchanged %v, after %v; want no before (the key did not change), big unchanged and absent", u.Before, u.Unchanged, u.After)
	}
	if d := got[2]; d.Before["id"] != int32(2) || d.Before["n"] != nil || d.After != nil {
		t.Errorf("delete: before %v after %v; want the key only", d.Before, d.After)
	}
	for _, c := range got {
		if c.LSN == 0 || c.CommitTime.IsZero() || c.Table != "v" || c.Schema != "public" {
			t.Errorf("change %+v: want its table, commit position and time", c)
		}
	}
}
