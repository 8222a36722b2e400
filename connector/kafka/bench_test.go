package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
)

// The benchmarks read the same topic (4 partitions, benchRecords JSON
// records of about 30 bytes) through the weir source (bytes and JSON, into
// the first operator) and through franz-go's own consumer, in one run:
//
//	go test -run XXX -bench . ./connector/kafka/
const benchRecords = 200_000

var bench struct {
	once sync.Once
	b    *broker.Broker
	err  error
}

func benchBroker(b *testing.B) *broker.Broker {
	bench.once.Do(func() {
		bench.b, bench.err = broker.Start(broker.Options{Topics: map[string]int32{"bench": 4}})
		if bench.err != nil {
			return
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(bench.b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			bench.err = err
			return
		}
		defer cl.Close()
		recs := make([]*kgo.Record, 0, benchRecords)
		for i := range benchRecords {
			v, _ := json.Marshal(order{ID: fmt.Sprint("order-", i), Qty: i % 100})
			recs = append(recs, &kgo.Record{Topic: "bench", Partition: int32(i % 4), Value: v, Timestamp: time.UnixMilli(int64(i))})
		}
		bench.err = cl.ProduceSync(context.Background(), recs...).FirstErr()
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.b
}

type countOp[T any] struct {
	runtime.Base[struct{}]
	n *atomic.Int64
}

func (o *countOp[T]) ProcessRecord(runtime.Record[T]) error { o.n.Add(1); return nil }
func (o *countOp[T]) EndInput() error                       { return nil }

func benchSource[T any](b *testing.B, d Deserializer[T]) {
	br := benchBroker(b)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		var n atomic.Int64
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
		src := NewSource(Options{Brokers: br.Addrs(), Topics: []string{"bench"}, CatchUp: CatchUpOff}, d)
		weir.Transform(weir.FromSource(env, "kafka", src, watermark.ForMonotonous[T]()), "count",
			func() runtime.OneInputOperator[T, struct{}] { return &countOp[T]{n: &n} })
		job, err := env.Start(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for n.Load() < benchRecords {
			time.Sleep(100 * time.Microsecond)
		}
		job.Cancel()
		job.Wait()
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkSourceBytes: records/s from Kafka into the first operator.
func BenchmarkSourceBytes(b *testing.B) { benchSource(b, Bytes()) }

// BenchmarkSourceJSON: the same with JSON decoding into a struct.
func BenchmarkSourceJSON(b *testing.B) { benchSource(b, JSON[order]()) }

func benchFranz(b *testing.B, decode bool) {
	br := benchBroker(b)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.ConsumeTopics("bench"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for n < benchRecords {
			cl.PollFetches(context.Background()).EachRecord(func(r *kgo.Record) {
				if decode {
					var o order
					if err := gojson.Unmarshal(r.Value, &o); err != nil {
						b.Fatal(err)
					}
				}
				n++
			})
		}
		cl.Close()
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkFranzGoConsume: franz-go's consumer alone, same data.
func BenchmarkFranzGoConsume(b *testing.B) { benchFranz(b, false) }

// BenchmarkFranzGoConsumeJSON: franz-go's consumer with the same JSON
// decoding (the decoder kafka.JSON uses).
func BenchmarkFranzGoConsumeJSON(b *testing.B) { benchFranz(b, true) }
