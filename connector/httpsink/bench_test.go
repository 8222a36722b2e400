package httpsink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/httpsink"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/watermark"
)

const (
	benchRecords = 50_000
	benchBatch   = 500
)

type benchRec struct {
	ID    int64   `json:"id"`
	Key   string  `json:"key"`
	TS    int64   `json:"ts"`
	Value float64 `json:"value"`
}

func benchValue(i int64) benchRec {
	return benchRec{ID: i, Key: fmt.Sprintf("user-%d", i%1000), TS: 1_700_000_000_000 + i, Value: float64(i%97) + 0.25}
}

// benchServer counts the lines of JSON-lines bodies (what a service that
// takes batches does at the least: read them).
func benchServer(b *testing.B) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		n.Add(int64(bytes.Count(body, []byte{'\n'})))
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	return srv, &n
}

func report(b *testing.B, cpu0 time.Duration) {
	recs := float64(benchRecords) * float64(b.N)
	b.ReportMetric(recs/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(testenv.CPUTime()-cpu0)/recs, "cpu-ns/record")
}

// BenchmarkHTTPSinkBatches sends benchRecords records through a job (a
// generator chained to the sink) in batches of benchBatch, as JSON lines,
// to a local server.
func BenchmarkHTTPSinkBatches(b *testing.B) {
	srv, n := benchServer(b)
	b.ReportAllocs()
	cpu0 := testenv.CPUTime()
	for b.Loop() {
		n.Store(0)
		env := weir.NewEnvironment(weir.Config{Parallelism: 1})
		s := weir.Generate(env, "gen", benchRecords, func(i int64) weir.Record[benchRec] {
			return weir.Record[benchRec]{Value: benchValue(i), Timestamp: i}
		}, watermark.ForMonotonous[benchRec]())
		httpsink.Sink(s, "post", httpsink.Options[benchRec]{URL: srv.URL, Batch: benchBatch, Format: httpsink.FormatLines})
		job, err := env.Start(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if err := job.Wait(); err != nil {
			b.Fatal(err)
		}
		if n.Load() != benchRecords {
			b.Fatalf("%d records", n.Load())
		}
	}
	report(b, cpu0)
}

// BenchmarkHTTPClientBatches is the baseline: a hand-written net/http loop
// that encodes the same records and posts the same batches (JSON lines,
// with a key header) to the same kind of server.
func BenchmarkHTTPClientBatches(b *testing.B) {
	srv, n := benchServer(b)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	b.ReportAllocs()
	var body bytes.Buffer
	cpu0 := testenv.CPUTime()
	for b.Loop() {
		n.Store(0)
		for first := int64(0); first < benchRecords; first += benchBatch {
			body.Reset()
			for i := first; i < first+benchBatch; i++ {
				data, err := json.Marshal(benchValue(i))
				if err != nil {
					b.Fatal(err)
				}
				body.Write(data)
				body.WriteByte('\n')
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body.Bytes()))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-ndjson")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("bench/%d", first))
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		if n.Load() != benchRecords {
			b.Fatalf("%d records", n.Load())
		}
	}
	report(b, cpu0)
}
