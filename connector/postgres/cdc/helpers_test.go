package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir/connector/postgres/cdc"
	"github.com/weirproject/weir/internal/pgtest"
	"github.com/weirproject/weir/internal/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

// logical are the settings logical replication needs.
var logical = map[string]string{"wal_level": "logical", "max_replication_slots": "10", "max_wal_senders": "10"}

// shared is the package's logical-replication server, started by the
// first test that needs it and stopped by TestMain; each test uses its own
// tables, publication and slot.
var shared struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// logicalServer returns the shared server, skipping the test when
// PostgreSQL is not installed.
func logicalServer(t testing.TB) *pgtest.Server {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = pgtest.Start(pgtest.Options{Settings: logical}) })
	if errors.Is(shared.err, pgtest.ErrNotInstalled) {
		t.Skipf("PostgreSQL tests skipped: %v", shared.err)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

var dbSeq atomic.Int64

// freshDB creates a new database on the shared server and returns its
// connection string and a name unique in the server, for the test's slot
// (slots are the server's, not a database's), so that tests, and -count
// repetitions, never see each other's tables and slots.
func freshDB(t testing.TB) (url, name string) {
	t.Helper()
	srv := logicalServer(t)
	name = fmt.Sprintf("test_%d_%d", os.Getpid(), dbSeq.Add(1))
	execSQL(t, connect(t, srv.ConnString), "CREATE DATABASE "+name)
	return strings.Replace(srv.ConnString, "dbname=postgres", "dbname="+name, 1), name
}

// startServer starts a throwaway server, skipping the test when
// PostgreSQL is not installed.
func startServer(t testing.TB, settings map[string]string) *pgtest.Server {
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

func testCtx(t testing.TB) context.Context { return testenv.Context(t, 2*time.Minute) }

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(testCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func execSQL(t testing.TB, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.Exec(testCtx(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// line renders a change for comparison: op, table, before and after with
// their columns sorted.
func line(c cdc.Change) string {
	return fmt.Sprintf("%s %s.%s before=%s after=%s", c.Op, c.Schema, c.Table, cols(c.Before), cols(c.After))
}

func cols(m map[string]any) string {
	if m == nil {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%v", k, m[k])
	}
	return b.String()
}

// confirmedFlush is the slot's confirmed_flush_lsn.
func confirmedFlush(t testing.TB, c *pgx.Conn, slot string) cdc.LSN {
	t.Helper()
	var l cdc.LSN
	if err := c.QueryRow(testCtx(t), "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&l); err != nil {
		t.Fatal(err)
	}
	return l
}
