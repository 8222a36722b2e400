package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres"
	"github.com/weirproject/weir/runtime"
)

type benchRow struct {
	ID     int64
	Name   string
	Amount float64
	At     time.Time
}

const benchRows = 10_000

func benchData() []benchRow {
	rows := make([]benchRow, benchRows)
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		rows[i] = benchRow{ID: int64(i), Name: fmt.Sprintf("customer-%d", i%977), Amount: float64(i) * 1.25, At: at.Add(time.Duration(i) * time.Second)}
	}
	return rows
}

// BenchmarkSink writes 10,000 rows (bigint, text, double, timestamptz)
// per iteration through the sink in each delivery and mode, and through
// hand-written pgx (one CopyFrom; for upserts one pgx.Batch of INSERT ...
// ON CONFLICT), into the same server in the same run. rows/s is the
// figure; BENCHMARKS.md has the ratios. Each iteration empties the table
// first (in both).
//
//	go test -run '^$' -bench BenchmarkSink -benchtime 5x ./connector/postgres/
func BenchmarkSink(b *testing.B) {
	s := server(b)
	ctx := context.Background()
	data := benchData()
	cols := []string{"id", "name", "amount", "at"}
	row := func(r benchRow) ([]any, error) { return []any{r.ID, r.Name, r.Amount, r.At}, nil }
	run := func(b *testing.B, key bool, write func(table string) error) {
		ddl := "id bigint NOT NULL, name text NOT NULL, amount double precision, at timestamptz"
		if key {
			ddl = "id bigint PRIMARY KEY, name text NOT NULL, amount double precision, at timestamptz"
		}
		table := newTable(b, s, "bench", ddl)
		var elapsed time.Duration
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			execSQL(b, s.ConnString, "TRUNCATE "+table)
			b.StartTimer()
			start := time.Now()
			if err := write(table); err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(start)
		}
		b.ReportMetric(float64(b.N*benchRows)/elapsed.Seconds(), "rows/s")
	}
	conn, err := pgx.Connect(ctx, s.ConnString)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	handCopy := func(table string) error {
		_, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromSlice(len(data), func(i int) ([]any, error) { return row(data[i]) }))
		return err
	}
	handUpsert := func(table string) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			sql := "INSERT INTO " + table + " (id, name, amount, at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, amount = EXCLUDED.amount, at = EXCLUDED.at"
			for off := 0; off < len(data); off += 1000 {
				var batch pgx.Batch
				for _, r := range data[off:min(off+1000, len(data))] {
					batch.Queue(sql, r.ID, r.Name, r.Amount, r.At)
				}
				if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// viaSink opens the sink once (as a job's subtask does) and writes
	// one checkpoint interval per iteration: Begin, the rows, PreCommit
	// (the barrier), Commit (the checkpoint completed).
	viaSink := func(b *testing.B, key bool, delivery postgres.Delivery, mode postgres.Mode, batch int) {
		var sk weir.TwoPhaseCommitter[benchRow, *postgres.Txn]
		var table string
		defer func() {
			if sk != nil {
				sk.(interface{ Close() error }).Close()
			}
		}()
		run(b, key, func(tbl string) error {
			if sk == nil || tbl != table {
				o := postgres.Options[benchRow]{URL: s.ConnString, Table: tbl, Columns: cols, Row: row, Delivery: delivery, Mode: mode, Batch: batch}
				if key {
					o.Key = []string{"id"}
				}
				var err error
				if sk, err = postgres.New(o)(&runtime.Context{Name: "bench"}); err != nil {
					return err
				}
				table = tbl
				if err := sk.Recover(nil, false); err != nil {
					return err
				}
			}
			txn, err := sk.Begin()
			if err != nil {
				return err
			}
			for _, r := range data {
				if err := sk.Write(txn, weir.Record[benchRow]{Value: r}); err != nil {
					return err
				}
			}
			if err := sk.PreCommit(txn); err != nil {
				return err
			}
			return sk.Commit(txn)
		})
	}
	for _, key := range []bool{false, true} {
		kind, hand := "insert", handCopy
		if key {
			kind, hand = "upsert", handUpsert
		}
		b.Run(kind+"/pgx-by-hand", func(b *testing.B) { run(b, key, hand) })
		b.Run(kind+"/exactly-once-progress-table", func(b *testing.B) { viaSink(b, key, postgres.ExactlyOnce, postgres.ProgressTable, 0) })
		b.Run(kind+"/exactly-once-two-phase", func(b *testing.B) { viaSink(b, key, postgres.ExactlyOnce, postgres.TwoPhase, 0) })
		b.Run(kind+"/at-least-once", func(b *testing.B) { viaSink(b, key, postgres.AtLeastOnce, "", 0) })

	}
}

// BenchmarkSinkVsHand is BenchmarkSink side by side: every iteration
// writes the 10,000 rows once by hand and once through the sink in each
// delivery and mode, each into its own emptied table, in an order rotated
// per iteration (so the machine's load drifts alike for all), and reports
// per mode the median over iterations of the sink's rows/s over the
// hand-written pgx's in the same iteration.
//
//	go test -run '^$' -bench BenchmarkSinkVsHand -benchtime 7x ./connector/postgres/
func BenchmarkSinkVsHand(b *testing.B) {
	s := server(b)
	ctx := context.Background()
	data := benchData()
	cols := []string{"id", "name", "amount", "at"}
	row := func(r benchRow) ([]any, error) { return []any{r.ID, r.Name, r.Amount, r.At}, nil }
	conn, err := pgx.Connect(ctx, s.ConnString)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, key := range []bool{false, true} {
		kind := map[bool]string{false: "insert", true: "upsert"}[key]
		b.Run(kind, func(b *testing.B) {
			ddl := "id bigint NOT NULL, name text NOT NULL, amount double precision, at timestamptz"
			if key {
				ddl = "id bigint PRIMARY KEY, name text NOT NULL, amount double precision, at timestamptz"
			}
			type writer struct {
				name, table string
				write       func(table string) error
			}
			hand := writer{name: "pgx-by-hand", table: newTable(b, s, "hand", ddl), write: func(table string) error {
				if !key {
					_, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromSlice(len(data), func(i int) ([]any, error) { return row(data[i]) }))
					return err
				}
				return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					sql := "INSERT INTO " + table + " (id, name, amount, at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, amount = EXCLUDED.amount, at = EXCLUDED.at"
					for off := 0; off < len(data); off += 1000 {
						var batch pgx.Batch
						for _, r := range data[off:min(off+1000, len(data))] {
							batch.Queue(sql, r.ID, r.Name, r.Amount, r.At)
						}
						if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
							return err
						}
					}
					return nil
				})
			}}
			viaSink := func(name string, delivery postgres.Delivery, mode postgres.Mode) writer {
				table := newTable(b, s, "sink", ddl)
				o := postgres.Options[benchRow]{URL: s.ConnString, Table: table, Columns: cols, Row: row, Delivery: delivery, Mode: mode}
				if key {
					o.Key = []string{"id"}
				}
				sk, err := postgres.New(o)(&runtime.Context{Name: "bench-" + name})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { sk.(interface{ Close() error }).Close() })
				if err := sk.Recover(nil, false); err != nil {
					b.Fatal(err)
				}
				return writer{name: name, table: table, write: func(string) error {
					txn, err := sk.Begin()
					if err != nil {
						return err
					}
					for _, r := range data {
						if err := sk.Write(txn, weir.Record[benchRow]{Value: r}); err != nil {
							return err
						}
					}
					if err := sk.PreCommit(txn); err != nil {
						return err
					}
					return sk.Commit(txn)
				}}
			}
			writers := []writer{hand,
				viaSink("exactly-once-progress-table", postgres.ExactlyOnce, postgres.ProgressTable),
				viaSink("exactly-once-two-phase", postgres.ExactlyOnce, postgres.TwoPhase),
				viaSink("at-least-once", postgres.AtLeastOnce, "")}
			ratios := map[string][]float64{}
			for i := 0; b.Loop(); i++ {
				took := map[string]time.Duration{}
				for j := range writers {
					w := writers[(i+j)%len(writers)]
					execSQL(b, s.ConnString, "TRUNCATE "+w.table)
					start := time.Now()
					if err := w.write(w.table); err != nil {
						b.Fatal(err)
					}
					took[w.name] = time.Since(start)
				}
				for _, w := range writers[1:] {
					ratios[w.name] = append(ratios[w.name], took[hand.name].Seconds()/took[w.name].Seconds())
				}
			}
			for _, w := range writers[1:] {
				r := ratios[w.name]
				slices.Sort(r)
				b.ReportMetric(r[len(r)/2], w.name+"-ratio")
			}
		})
	}
}
