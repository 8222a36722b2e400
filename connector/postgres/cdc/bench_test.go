package cdc_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres/cdc"
	"github.com/weirproject/weir/internal/pgtest"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// The benchmarks read the same changes (benchChanges inserts of a row of
// four columns, in transactions of 100) through the weir source into a
// counting operator, and through a hand-written pglogrepl loop that
// decodes every column with pgtype into a map, in one run:
//
//	go test -run XXX -bench SourceVsPglogrepl -benchtime 4x ./connector/postgres/cdc/
//
// Each iteration reads a copy of a slot made before the changes
// (pg_copy_logical_replication_slot), so both read the same WAL.
const benchChanges = 20_000

var bench struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
	seq  atomic.Int64
}

func benchServer(b *testing.B) *pgtest.Server {
	bench.once.Do(func() {
		bench.srv, bench.err = pgtest.Start(pgtest.Options{Settings: logical})
		if bench.err != nil {
			return
		}
		ctx := context.Background()
		c, err := pgconn.Connect(ctx, bench.srv.ConnString)
		if err != nil {
			bench.err = err
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{"CREATE TABLE orders (id bigint PRIMARY KEY, item text, qty int, at timestamptz)",
			"CREATE PUBLICATION bench FOR TABLE orders", "SELECT pg_create_logical_replication_slot('template', 'pgoutput')"} {
			if _, bench.err = c.Exec(ctx, q).ReadAll(); bench.err != nil {
				return
			}
		}
		for i := 0; i < benchChanges; i += 100 {
			q := fmt.Sprintf("INSERT INTO orders SELECT i, 'item-' || i, i %% 100, now() FROM generate_series(%d, %d) i", i, i+99)
			if _, bench.err = c.Exec(ctx, q).ReadAll(); bench.err != nil {
				return
			}
		}
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.srv
}

// copySlot makes a new slot at the template's position.
func copySlot(b *testing.B, srv *pgtest.Server) string {
	name := fmt.Sprintf("copy_%d", bench.seq.Add(1))
	ctx := context.Background()
	c, err := pgconn.Connect(ctx, srv.ConnString)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "SELECT pg_copy_logical_replication_slot('template', '"+name+"')").ReadAll(); err != nil {
		b.Fatal(err)
	}
	return name
}

func dropSlot(b *testing.B, srv *pgtest.Server, name string) {
	ctx := context.Background()
	c, err := pgconn.Connect(ctx, srv.ConnString)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "SELECT pg_drop_replication_slot('"+name+"')").ReadAll(); err != nil {
		b.Fatal(err)
	}
}

type countOp struct {
	runtime.Base[struct{}]
	n *atomic.Int64
}

func (o *countOp) ProcessRecord(runtime.Record[cdc.Change]) error { o.n.Add(1); return nil }
func (o *countOp) EndInput() error                                { return nil }

// runSource reads the slot to its end through the weir source (bounded)
// into a counting operator: the job's start and the source's checks
// included.
func runSource(b *testing.B, url, slot string) int64 {
	var n atomic.Int64
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
	src := cdc.NewSource(cdc.Options{URL: url, Slot: slot, Publication: "bench", Bounded: true})
	weir.Transform(weir.FromSource(env, "pg", src, watermark.ForBoundedOutOfOrderness[cdc.Change](0)), "count",
		func() runtime.OneInputOperator[cdc.Change, struct{}] { return &countOp{n: &n} })
	if err := env.Execute(context.Background()); err != nil {
		b.Fatal(err)
	}
	return n.Load()
}

// BenchmarkSourceVsPglogrepl reads the changes through the weir source
// and through the hand-written loop (handLoop) in every iteration, in
// alternating order (the machine's and the server's load drift alike for
// both), and reports both rates and their ratio.
func BenchmarkSourceVsPglogrepl(b *testing.B) {
	srv := benchServer(b)
	var weirT, handT, weirCPU, handCPU time.Duration
	i := 0
	for b.Loop() {
		for k := range 2 {
			slot := copySlot(b, srv)
			start, cpu := time.Now(), testenv.CPUTime()
			var got int64
			if (i+k)%2 == 0 {
				got = runSource(b, srv.ConnString, slot)
				weirT += time.Since(start)
				weirCPU += testenv.CPUTime() - cpu
			} else {
				got = int64(handLoop(b, srv.ConnString, slot))
				handT += time.Since(start)
				handCPU += testenv.CPUTime() - cpu
			}
			if got != benchChanges {
				b.Fatalf("read %d changes, want %d", got, benchChanges)
			}
			dropSlot(b, srv, slot)
		}
		i++
	}
	n := float64(benchChanges) * float64(b.N)
	b.ReportMetric(n/weirT.Seconds(), "weir-changes/s")
	b.ReportMetric(n/handT.Seconds(), "pglogrepl-changes/s")
	b.ReportMetric(handT.Seconds()/weirT.Seconds(), "ratio")
	b.ReportMetric(float64(weirCPU)/n, "weir-cpu-ns/change")
	b.ReportMetric(float64(handCPU)/n, "pglogrepl-cpu-ns/change")
}

// BenchmarkSource: changes/s from the slot into the first operator.
func BenchmarkSource(b *testing.B) { benchRead(b, runSource) }

// BenchmarkHandWrittenPglogrepl: the same changes through a minimal
// pglogrepl loop (connect, START_REPLICATION, receive, decode every column
// of every insert with pgtype into a map), without checkpoints, status
// updates or hand-over to another goroutine.
func BenchmarkHandWrittenPglogrepl(b *testing.B) {
	benchRead(b, func(b *testing.B, url, slot string) int64 { return int64(handLoop(b, url, slot)) })
}

// benchRead times read over a fresh copy of the slot per iteration (the
// copy and its drop not timed) and reports changes/s.
func benchRead(b *testing.B, read func(b *testing.B, url, slot string) int64) {
	srv := benchServer(b)
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		slot := copySlot(b, srv)
		b.StartTimer()
		start := time.Now()
		if got := read(b, srv.ConnString, slot); got != benchChanges {
			b.Fatalf("read %d changes, want %d", got, benchChanges)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		dropSlot(b, srv, slot)
		b.StartTimer()
	}
	b.ReportMetric(float64(benchChanges)*float64(b.N)/elapsed.Seconds(), "changes/s")
}

func handLoop(b *testing.B, url, slot string) int {
	ctx := context.Background()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'bench'"}}); err != nil {
		b.Fatal(err)
	}
	types := pgtype.NewMap()
	rels := map[uint32]*pglogrepl.RelationMessage{}
	var sink []map[string]any
	n := 0
	for n < benchChanges {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			b.Fatal(err)
		}
		lm, err := pglogrepl.Parse(xld.WALData)
		if err != nil {
			b.Fatal(err)
		}
		switch m := lm.(type) {
		case *pglogrepl.RelationMessage:
			rels[m.RelationID] = m
		case *pglogrepl.InsertMessage:
			rel := rels[m.RelationID]
			row := make(map[string]any, len(m.Tuple.Columns))
			for i, c := range m.Tuple.Columns {
				col := rel.Columns[i]
				if c.DataType != pglogrepl.TupleDataTypeText {
					row[col.Name] = nil
					continue
				}
				if t, ok := types.TypeForOID(col.DataType); ok {
					v, err := t.Codec.DecodeValue(types, col.DataType, pgtype.TextFormatCode, c.Data)
					if err != nil {
						b.Fatal(err)
					}
					row[col.Name] = v
				} else {
					row[col.Name] = string(c.Data)
				}
			}
			sink = append(sink[:0], row)
			n++
		}
	}
	return n
}
