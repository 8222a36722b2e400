package postgres_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres"
	"github.com/weirproject/weir/runtime"
)

// recordSink is the sink of TestRetryAfterTerminate and the conformance
// suite: one text column, no key, so a row written twice shows twice.
func recordSink(url, table string, mode postgres.Mode) postgres.Options[string] {
	return postgres.Options[string]{URL: url, Table: table, Columns: []string{"rec"}, Mode: mode, Batch: 50,
		Row: func(r string) ([]any, error) { return []any{r}, nil }}
}

func diff(got, want []string) (twice, missing []string) {
	n := map[string]int{}
	for _, g := range got {
		n[g]++
	}
	for _, w := range want {
		switch n[w] {
		case 0:
			missing = append(missing, w)
		case 1:
		default:
			twice = append(twice, w)
		}
	}
	return twice, missing
}

func first(s []string) []string { return s[:min(3, len(s))] }

// TestRetryAfterTerminate terminates the sink's server session
// (pg_terminate_backend) in the middle of a transaction, in every
// delivery and mode: the transaction is retried whole and every row is
// in the table exactly once (P5).
func TestRetryAfterTerminate(t *testing.T) {
	s := server(t)
	for _, c := range []struct {
		delivery postgres.Delivery
		mode     postgres.Mode
	}{{postgres.ExactlyOnce, postgres.ProgressTable}, {postgres.ExactlyOnce, postgres.TwoPhase}, {postgres.AtLeastOnce, ""}} {
		t.Run(string(c.delivery)+"-"+string(c.mode), func(t *testing.T) {
			table := newTable(t, s, "retry", "rec text NOT NULL")
			o := recordSink(s.ConnString, table, c.mode)
			o.Delivery, o.Batch, o.RetryBackoff = c.delivery, 10, time.Millisecond
			var logs syncBuffer
			sk, err := postgres.New(o)(&runtime.Context{Name: "pg", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer sk.(interface{ Close() error }).Close()
			if err := sk.Recover(nil, false); err != nil {
				t.Fatal(err)
			}
			terminate := func() {
				// Every session of the sink's pool (the only other
				// client); in progress-table mode there is none while
				// rows are only buffered.
				query(t, s.ConnString, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
			}
			n := 0
			var txns []*postgres.Txn
			for round := range 3 {
				txn, _ := sk.Begin()
				for i := range 25 {
					if err := sk.Write(txn, weir.Record[string]{Value: fmt.Sprintf("r%d-%d", round, i)}); err != nil {
						t.Fatal(err)
					}
					n++
					if i == 14 {
						terminate() // mid-transaction (two-phase: the open one)
					}
				}
				if err := sk.PreCommit(txn); err != nil {
					t.Fatal(err)
				}
				terminate()
				txns = append(txns, txn)
				if err := sk.Commit(txn); err != nil {
					t.Fatal(err)
				}
				if err := sk.Commit(txn); err != nil { // again: a no-op
					t.Fatal(err)
				}
			}
			// pgxpool pings a connection idle for over a second before
			// handing it out, and replaces it quietly if it was
			// terminated; a slow machine may thus retry less often than
			// it terminates, but not never in three rounds.
			if n := strings.Count(logs.String(), "retrying the transaction"); n < 1 {
				t.Fatalf("no retry logged:\n%s", logs.String())
			}
			got := query(t, s.ConnString, "SELECT rec FROM "+table)
			dup, _ := diff(got, got)
			if len(got) != n || len(dup) > 0 {
				t.Fatalf("%d rows (twice: %v), want %d", len(got), first(dup), n)
			}
		})
	}
}

// TestRecoverRollsBackLingering: a two-phase sink whose process died with
// a transaction prepared but not in a completed checkpoint leaves it in
// pg_prepared_xacts (holding its locks); the restored sink rolls it back
// and commits the one the checkpoint lists as pending (P4).
func TestRecoverRollsBackLingering(t *testing.T) {
	s := server(t)
	table := newTable(t, s, "linger", "id bigint PRIMARY KEY, name text NOT NULL")
	o := changeOptions(s.ConnString, table)
	o.Mode = postgres.TwoPhase
	rc := &runtime.Context{Name: "pg"}
	first, err := postgres.New(o)(rc)
	if err != nil {
		t.Fatal(err)
	}
	first.Recover(nil, false)
	t1, _ := first.Begin()
	first.Write(t1, weir.Record[change]{Value: change{ID: 1, Name: "committed by the restore"}})
	if err := first.PreCommit(t1); err != nil {
		t.Fatal(err)
	}
	t2, _ := first.Begin() // open at the checkpoint: the restore aborts it and later ones
	first.Write(t2, weir.Record[change]{Value: change{ID: 2, Name: "aborted"}})
	if err := first.PreCommit(t2); err != nil {
		t.Fatal(err)
	}
	t3, _ := first.Begin()
	first.Write(t3, weir.Record[change]{Value: change{ID: 4, Name: "aborted too"}})
	if err := first.PreCommit(t3); err != nil {
		t.Fatal(err)
	}
	first.(interface{ Close() error }).Close() // the process "dies": three prepared
	if got := query(t, s.ConnString, "SELECT count(*) FROM pg_prepared_xacts"); !slices.Equal(got, []string{"3"}) {
		t.Fatalf("prepared: %v, want 3", got)
	}
	open := *t2
	open.Rows = 0
	second, err := postgres.New(o)(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer second.(interface{ Close() error }).Close()
	if err := second.Commit(t1); err != nil { // the checkpoint's pending one
		t.Fatal(err)
	}
	if err := second.Recover(&open, true); err != nil {
		t.Fatal(err)
	}
	if got := query(t, s.ConnString, "SELECT gid FROM pg_prepared_xacts"); len(got) != 0 {
		t.Fatalf("still prepared: %v", got)
	}
	t4, _ := second.Begin()
	if t4.Seq != t2.Seq || t4.Run == t2.Run || strings.Contains(t4.Name(), t2.Run) {
		t.Fatalf("the restored sink's first transaction %s: want seq %d (the open one's) with a new run", t4.Name(), t2.Seq)
	}
	second.Write(t4, weir.Record[change]{Value: change{ID: 3, Name: "after"}})
	if err := second.PreCommit(t4); err != nil {
		t.Fatal(err)
	}
	if err := second.Commit(t4); err != nil {
		t.Fatal(err)
	}
	got := query(t, s.ConnString, "SELECT id, name FROM "+table+" ORDER BY id")
	if want := []string{"1|committed by the restore", "3|after"}; !slices.Equal(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
