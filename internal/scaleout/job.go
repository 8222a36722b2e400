package scaleout

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/cluster"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// Event is an input record: a key and an amount; its event time is the
// Kafka record's timestamp.
type Event struct {
	Key    string `json:"k"`
	Amount int64  `json:"a"`
}

// Total is an output record: the count and sum of one key's events in
// one tumbling window.
type Total struct {
	Key   string `json:"k"`
	Start int64  `json:"s"`
	Count int64  `json:"c"`
	Sum   int64  `json:"sum"`
}

// Window is the tumbling window of the job.
const Window = time.Second

// OutOfOrderness is the watermark bound; the generated input is never
// more out of order than half of it, so no record is late in any run.
const OutOfOrderness = 200 * time.Millisecond

type acc struct{ Count, Sum int64 }

// WindowJob is the experiment's job: events keyed by Key, counted and
// summed per key in tumbling event-time windows of one second, written as
// JSON Totals to outTopic by the exactly-once sink.
//
// pace, if positive, bounds the records per second each source subtask
// passes on (a sleep every 64 records when ahead), so that a small input
// lasts long enough to kill a process in the middle of it.
func WindowJob(outTopic string, pace int) cluster.Job[Event, Event, string, Total] {
	return cluster.Job[Event, Event, string, Total]{
		Source:     kafka.JSON[Event](),
		Watermarks: watermark.ForBoundedOutOfOrderness[Event](OutOfOrderness),
		Upstream: func(s weir.Stream[Event]) weir.Stream[Event] {
			valid := weir.Filter(s, "valid", func(e Event) bool { return e.Key != "" })
			if pace <= 0 {
				return valid
			}
			return weir.Transform(valid, "pace", func() runtime.OneInputOperator[Event, Event] { return &pacer[Event]{perSec: pace} })
		},
		Key: func(e Event) string { return e.Key },
		Keyed: func(ks weir.KeyedStream[string, Event]) weir.Stream[Total] {
			agg := window.AggregateFuncs[Event, acc, acc]{
				AddFn:    func(e Event, a acc) acc { return acc{a.Count + 1, a.Sum + e.Amount} },
				ResultFn: func(a acc) acc { return a },
			}
			res := window.AggregateKeyed(ks, "totals", window.Tumbling(Window), agg)
			return weir.Map(res, "total", func(r window.Result[string, acc]) Total {
				return Total{Key: r.Key, Start: r.Window.Start, Count: r.Value.Count, Sum: r.Value.Sum}
			})
		},
		Sink: kafka.SinkOptions[Total]{Topic: outTopic, Serialize: kafka.SerializeJSON[Total](func(t Total) []byte { return []byte(t.Key) })},
	}
}

// Input describes the generated input.
type Input struct {
	Partitions int
	Records    int
	Keys       int
	Seed       uint64
	// StepMillis is the event-time step between records of a partition.
	StepMillis int64
}

// Produce writes the input to topic: per partition, timestamps rising by
// StepMillis with a jitter below OutOfOrderness/2.
func Produce(ctx context.Context, brokers []string, topic string, in Input) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(in.Seed, 7))
	base := int64(1_700_000_000_000)
	jitter := (OutOfOrderness / 2).Milliseconds()
	per := (in.Records + in.Partitions - 1) / in.Partitions
	var firstErr error
	n := 0
	for i := range per {
		for p := range in.Partitions {
			if n == in.Records {
				break
			}
			n++
			e := Event{Key: fmt.Sprintf("key-%03d", rng.IntN(in.Keys)), Amount: int64(rng.IntN(100))}
			b, _ := json.Marshal(e)
			ts := base + int64(i)*in.StepMillis + rng.Int64N(jitter)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: b, Timestamp: time.UnixMilli(ts)},
				func(_ *kgo.Record, err error) {
					if err != nil && firstErr == nil {
						firstErr = err
					}
				})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return firstErr
}

// ReadTotals reads every committed record of topic (read_committed, up to
// the end offsets when it starts) and counts each distinct Total. It reads
// with weir's own Kafka source (K14: the end is exact, transaction markers
// included).
func ReadTotals(ctx context.Context, brokers []string, topic string) (map[Total]int, error) {
	stop := make(chan struct{})
	close(stop)
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Logger: slog.New(slog.DiscardHandler)})
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, ReadCommitted: true, Stop: stop}, kafka.JSON[Total]())
	got := weir.Collect(weir.FromSource(env, "read", src, watermark.NoWatermarks[Total]()))
	if err := env.Execute(ctx); err != nil {
		return nil, err
	}
	out := map[Total]int{}
	for _, t := range got.Values() {
		out[t]++
	}
	return out, nil
}

// Compare counts the expected totals missing from got (lost) and the
// extra copies in got (duplicated, including totals that were never
// expected).
func Compare(want, got map[Total]int) (lost, duplicated int) {
	for t, n := range want {
		if g := got[t]; g < n {
			lost += n - g
		}
	}
	for t, g := range got {
		if g > want[t] {
			duplicated += g - want[t]
		}
	}
	return lost, duplicated
}

// pacer passes records on at no more than perSec per second.
type pacer[T any] struct {
	runtime.Base[T]
	perSec int
	n      int64
	start  time.Time
}

func (p *pacer[T]) ProcessRecord(r runtime.Record[T]) error {
	if p.n == 0 {
		p.start = time.Now()
	}
	p.n++
	if p.n%64 == 0 {
		due := p.start.Add(time.Duration(p.n) * time.Second / time.Duration(p.perSec))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
	}
	p.Out.Collect(r)
	return nil
}
