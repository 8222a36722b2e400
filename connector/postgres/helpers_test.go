package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir/internal/pgtest"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

var (
	srvOnce sync.Once
	srv     *pgtest.Server
	srvErr  error
	tables  atomic.Int64
)

// TestMain runs a child job of the conformance suite's kill9 mode when
// started as one, else the tests, and stops the shared server after them.
func TestMain(m *testing.M) {
	sinkconformance.MaybeChild(conformanceSinks...)
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	os.Exit(code)
}

// server returns the package's PostgreSQL server (max_prepared_transactions
// 20), started on first use; the test is skipped when PostgreSQL is not
// installed.
func server(t testing.TB) *pgtest.Server {
	t.Helper()
	srvOnce.Do(func() {
		srv, srvErr = pgtest.Start(pgtest.Options{Settings: map[string]string{"max_prepared_transactions": "20"}})
	})
	if errors.Is(srvErr, pgtest.ErrNotInstalled) {
		t.Skipf("PostgreSQL is not installed: %v", srvErr)
	}
	if srvErr != nil {
		t.Fatal(srvErr)
	}
	return srv
}

// exec runs statements on the server.
func execSQL(t testing.TB, connString string, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), connString)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// newTable creates a table named after prefix with the columns given
// (such as "id bigint PRIMARY KEY, name text") and returns its name.
func newTable(t testing.TB, s *pgtest.Server, prefix, columns string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, tables.Add(1))
	execSQL(t, s.ConnString, "CREATE TABLE "+name+" ("+columns+")")
	return name
}

// query returns the rows of sql, each as its columns' text, joined by '|'.
func query(t testing.TB, connString, sql string, args ...any) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), connString)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		line := ""
		for i, v := range vals {
			if i > 0 {
				line += "|"
			}
			if v == nil {
				line += "NULL"
			} else {
				line += fmt.Sprint(v)
			}
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
