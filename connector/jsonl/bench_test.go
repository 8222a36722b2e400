package jsonl_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/jsonl"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

const benchRecords = 100_000

type benchRec struct {
	ID    int64   `json:"id"`
	Key   string  `json:"key"`
	TS    int64   `json:"ts"`
	Value float64 `json:"value"`
}

// benchFile writes benchRecords small records (about 60 bytes a line).
func benchFile(b *testing.B) string {
	b.Helper()
	var sb strings.Builder
	for i := range benchRecords {
		fmt.Fprintf(&sb, `{"id":%d,"key":"user-%d","ts":%d,"value":%d.25}`+"\n", i, i%1000, 1_700_000_000_000+int64(i), i%97)
	}
	p := filepath.Join(b.TempDir(), "bench.jsonl")
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkJSONLSource reads the file through a job (source, per-split
// watermark generator, chained counting sink).
func BenchmarkJSONLSource(b *testing.B) {
	p := benchFile(b)
	strat := watermark.ForBoundedOutOfOrderness[benchRec](0).
		WithTimestamp(func(r benchRec, _ int64) (int64, bool) { return r.TS, true })
	b.ReportAllocs()
	for b.Loop() {
		var n atomic.Int64
		env := weir.NewEnvironment(weir.Config{})
		s := weir.FromSource(env, "src", jsonl.Source[benchRec](p), strat)
		weir.ToSink(s, "count", func(*runtime.Context) (weir.SinkWriter[benchRec], error) {
			return weir.SinkFunc[benchRec](func(weir.Record[benchRec]) error { n.Add(1); return nil }), nil
		})
		execute(b, env)
		if n.Load() != benchRecords {
			b.Fatalf("%d records", n.Load())
		}
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkJSONLLoop is the baseline: a hand-written bufio.Scanner and
// json.Unmarshal loop over the same file.
func BenchmarkJSONLLoop(b *testing.B) {
	p := benchFile(b)
	b.ReportAllocs()
	for b.Loop() {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), jsonl.DefaultMaxLineSize)
		n := 0
		for sc.Scan() {
			var r benchRec
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if n != benchRecords {
			b.Fatalf("%d records", n)
		}
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
