package nexmark

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/watermark"
)

// Produce writes g's events 0 .. events-1 to topic as JSON (Event.AppendJSON),
// event n to partition n % partitions, with the event's time as the Kafka
// timestamp and no key, and returns once every record is acknowledged. Each
// partition then holds a split of Source's (N6) in offset order, so its
// timestamps never decrease. The topic must exist with at least
// `partitions` partitions (broker.Options.Topics creates it). Any
// produce error stops the load and is returned.
func Produce(ctx context.Context, brokers []string, topic string, partitions int32, g *Generator, events int64) error {
	if partitions < 1 {
		return fmt.Errorf("nexmark: Produce: %d partitions: want 1 or more", partitions)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		return fmt.Errorf("nexmark: Produce: %w", err)
	}
	defer cl.Close()
	var (
		mu    sync.Mutex
		first error
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	}
	var e Event
	for n := int64(0); n < events; n++ {
		if n%4096 == 0 {
			mu.Lock()
			err := first
			mu.Unlock()
			if err != nil {
				break
			}
		}
		g.Fill(n, &e)
		rec := &kgo.Record{Topic: topic, Partition: int32(n % int64(partitions)),
			Timestamp: time.UnixMilli(e.Timestamp()), Value: e.AppendJSON(nil)}
		cl.Produce(ctx, rec, done)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("nexmark: Produce: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return fmt.Errorf("nexmark: Produce to %q: %w", topic, first)
	}
	return nil
}

// KafkaSource adds a source reading the JSON events Produce wrote to topic,
// with each event's time as its timestamp and a monotonous watermark per
// partition. stop, if not nil, ends the source at the end offsets of the
// moment it is closed (kafka.Options.Stop): closed from the start, the
// source reads what the topic holds and ends. An undecodable record goes to
// the source's dead letters (weir.DeadLetters).
func KafkaSource(env *weir.Environment, name string, brokers []string, topic string, stop <-chan struct{}) weir.Stream[Event] {
	src := kafka.NewSource(kafka.Options{Brokers: brokers, Topics: []string{topic}, Stop: stop}, kafka.JSON[Event]())
	strategy := watermark.ForMonotonous[Event]().WithTimestamp(func(e Event, _ int64) (int64, bool) {
		return e.Timestamp(), true
	})
	return weir.FromSource(env, name, src, strategy)
}
