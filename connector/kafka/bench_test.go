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
	"github.com/weirproject/weir/internal/testenv"
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

func benchSource[T any](b *testing.B, d Deserializer[T]) { benchSourceStop(b, d, false) }

// benchSourceStop reads the topic into a counting operator; bounded uses
// the source's Stop mode (end offsets listed at start), where the job ends
// by itself. It reports records/s and the process's CPU per record.
func benchSourceStop[T any](b *testing.B, d Deserializer[T], bounded bool) {
	br := benchBroker(b)
	b.ResetTimer()
	start, cpu0 := time.Now(), testenv.CPUTime()
	for b.Loop() {
		var n atomic.Int64
		env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: quiet})
		o := Options{Brokers: br.Addrs(), Topics: []string{"bench"}, CatchUp: CatchUpOff}
		if bounded {
			stop := make(chan struct{})
			close(stop)
			o.Stop = stop
		}
		weir.Transform(weir.FromSource(env, "kafka", NewSource(o, d), watermark.ForMonotonous[T]()), "count",
			func() runtime.OneInputOperator[T, struct{}] { return &countOp[T]{n: &n} })
		job, err := env.Start(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if bounded {
			if err := job.Wait(); err != nil {
				b.Fatal(err)
			}
			if got := n.Load(); got != benchRecords {
				b.Fatalf("bounded read gave %d records, want %d", got, benchRecords)
			}
			continue
		}
		for n.Load() < benchRecords {
			time.Sleep(100 * time.Microsecond)
		}
		job.Cancel()
		job.Wait()
	}
	recs := float64(benchRecords) * float64(b.N)
	b.ReportMetric(recs/time.Since(start).Seconds(), "records/s")
	b.ReportMetric(float64(testenv.CPUTime()-cpu0)/recs, "cpu-ns/record")
}

// BenchmarkSourceBoundedJSON: BenchmarkSourceJSON in bounded (Stop) mode.
func BenchmarkSourceBoundedJSON(b *testing.B) { benchSourceStop(b, JSON[order](), true) }

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

// BenchmarkExactlyOnceCheckpoint: one checkpoint of one ExactlyOnceSink
// subtask with 3 records, on the embedded broker: Begin, Write, PreCommit,
// Commit (and Release of the previous transaction, as TwoPhaseCommit calls
// it). "pool" is the sink; "client-per-checkpoint" does what it did before
// the pool: a new producer with a new transactional id per checkpoint.
//
//	go test -run XXX -bench ExactlyOnceCheckpoint -benchtime 300x ./connector/kafka/
func BenchmarkExactlyOnceCheckpoint(b *testing.B) {
	br, err := broker.Start(broker.Options{Topics: map[string]int32{"out": 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	opts, err := SinkOptions[string]{Brokers: br.Addrs(), Topic: "out", Serialize: SerializeString(nil),
		TransactionalIDPrefix: "bench"}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	recs := []string{"r1", "r2", "r3"}
	b.Run("pool", func(b *testing.B) {
		admin, err := kgo.NewClient(opts.clientOpts()...)
		if err != nil {
			b.Fatal(err)
		}
		s := &txnSink[string]{opts: opts, ctx: &runtime.Context{Parallelism: 1}, admin: admin}
		defer s.Close()
		if err := s.Recover(nil, false); err != nil {
			b.Fatal(err)
		}
		open, err := s.Begin()
		if err != nil {
			b.Fatal(err)
		}
		var prev *Txn
		for b.Loop() {
			for _, v := range recs {
				if err := s.Write(open, runtime.Record[string]{Value: v, Timestamp: 1}); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.PreCommit(open); err != nil {
				b.Fatal(err)
			}
			next, err := s.Begin()
			if err != nil {
				b.Fatal(err)
			}
			// The checkpoint completes: commit its transaction and
			// release the one the previous checkpoint listed.
			if err := s.Commit(open); err != nil {
				b.Fatal(err)
			}
			if prev != nil {
				if err := s.Release(prev); err != nil {
					b.Fatal(err)
				}
			}
			prev, open = open, next
		}
		b.ReportMetric(float64(len(s.slots)), "ids")
	})
	b.Run("client-per-checkpoint", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n++
			cl, err := kgo.NewClient(opts.clientOpts(kgo.TransactionalID(fmt.Sprint("bench-old-", n)),
				kgo.TransactionTimeout(opts.TransactionTimeout))...)
			if err != nil {
				b.Fatal(err)
			}
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			for _, v := range recs {
				cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, nil)
			}
			ctx := context.Background()
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if _, _, err := cl.ProducerID(ctx); err != nil {
				b.Fatal(err)
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
			cl.Close()
		}
		b.ReportMetric(float64(n), "ids")
	})
}
