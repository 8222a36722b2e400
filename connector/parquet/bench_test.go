package parquet_test

import (
	"bufio"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/parquet"
	"github.com/weirproject/weir/runtime"
)

// perCheckpoint is how many records a benchmark round writes: one
// transaction of the sink (pre-committed and committed), one file by hand.
const perCheckpoint = 200_000

// BenchmarkParquetVsHandWritten writes b.N orders (zstd) twice, round by
// round so that both see the same machine: by hand with parquet-go (a
// generic writer into one buffered file per round, batches of 256,
// fsynced), and through the sink driven as a job drives it (a transaction
// per round: Write each record, PreCommit, Commit), alternately first, unpartitioned or
// partitioned by hour (an hour holds 360,000 records). Metrics: records/s
// of each, their ratio (sink/hand), and file bytes per record of each.
func BenchmarkParquetVsHandWritten(b *testing.B) {
	recs := make([]weir.Record[order], 1<<20)
	for i := range recs {
		recs[i] = makeOrder(int64(i))
		recs[i].Timestamp = base + int64(i)*10
	}
	for _, c := range []struct{ name, partition string }{{"unpartitioned", parquet.NoPartition}, {"by-hour", ""}} {
		b.Run(c.name, func(b *testing.B) {
			handDir, sinkDir := b.TempDir(), b.TempDir()
			codec := &zstd.Codec{Level: zstd.SpeedDefault} // its encoders are pooled: one for every file, as the sink does
			s, err := parquet.ExactlyOnce[order](parquet.Options{Path: sinkDir, Partition: c.partition})(&runtime.Context{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.(interface{ Close() error }).Close()
			goruntime.GC()
			b.ResetTimer()
			var handTime, sinkTime time.Duration
			var handBytes, sinkBytes int64
			round := 0
			for done := 0; done < b.N; {
				n := min(b.N-done, perCheckpoint)
				hand := func() {
					start := time.Now()
					handBytes += handWrite(b, filepath.Join(handDir, "part.parquet"), codec, recs, done, n)
					handTime += time.Since(start)
				}
				var txn *parquet.Txn
				sinkRound := func() {
					start := time.Now()
					txn, _ = s.Begin()
					for i := range n {
						if err := s.Write(txn, recs[(done+i)%len(recs)]); err != nil {
							b.Fatal(err)
						}
					}
					if err := s.PreCommit(txn); err != nil {
						b.Fatal(err)
					}
					if err := s.Commit(txn); err != nil {
						b.Fatal(err)
					}
					sinkTime += time.Since(start)
				}
				// Alternate which goes first: neither always pays for the
				// other's garbage.
				if round%2 == 0 {
					hand()
					sinkRound()
				} else {
					sinkRound()
					hand()
				}
				round++
				for _, p := range txn.Parts {
					sinkBytes += p.Bytes
				}
				done += n
			}
			hand, sink := float64(b.N)/handTime.Seconds(), float64(b.N)/sinkTime.Seconds()
			b.ReportMetric(hand, "hand-records/s")
			b.ReportMetric(sink, "sink-records/s")
			b.ReportMetric(sink/hand, "ratio")
			b.ReportMetric(float64(handBytes)/float64(b.N), "hand-B/record")
			b.ReportMetric(float64(sinkBytes)/float64(b.N), "sink-B/record")
		})
	}
}

// handWrite writes records [from, from+n) into a new file at path with
// parquet-go alone, compressed with codec, and returns its size.
func handWrite(b *testing.B, path string, codec *zstd.Codec, recs []weir.Record[order], from, n int) int64 {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 256<<10)
	w := pq.NewGenericWriter[order](bw, pq.Compression(codec))
	batch := make([]order, 0, 256)
	for i := range n {
		batch = append(batch, recs[(from+i)%len(recs)].Value)
		if len(batch) == cap(batch) {
			if _, err := w.Write(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := w.Write(batch); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
