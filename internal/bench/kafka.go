package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/kafkasec"
)

// kafkaTopic holds the records of the Kafka scenario: JSON events over
// kafkaPartitions partitions of an in-process broker, produced once per
// (records, keys) and reused by every run of both sides.
const (
	kafkaTopic      = "bench-events"
	kafkaPartitions = 4
)

var kafkaData struct {
	mu      sync.Mutex
	b       *broker.Broker
	n       int64
	keys    int
	cleanup func()
}

// kafkaEvents returns a broker whose topic holds n JSON events over nKeys
// keys (eventAt's sequence), producing them on first use.
func kafkaEvents(n int64, nKeys int) (*broker.Broker, error) {
	kafkaData.mu.Lock()
	defer kafkaData.mu.Unlock()
	if kafkaData.b != nil && kafkaData.n == n && kafkaData.keys == nKeys {
		return kafkaData.b, nil
	}
	if kafkaData.b != nil {
		kafkaData.b.Close()
		kafkaData.b = nil
	}
	b, err := broker.Start(broker.Options{Topics: map[string]int32{kafkaTopic: kafkaPartitions}})
	if err != nil {
		return nil, err
	}
	if err := produceEvents(b.Addrs(), kafkasec.Security{}, n, nKeys); err != nil {
		b.Close()
		return nil, err
	}
	kafkaData.b, kafkaData.n, kafkaData.keys = b, n, nKeys
	return b, nil
}

// KafkaKeyedCount counts n JSON events over nKeys keys read from the
// in-process broker: the engine reads them with the Kafka source in
// bounded mode (kafka.JSON, the goccy/go-json decoder), keys them and
// counts per key in value state at the given parallelism; the loop is a
// hand-written franz-go consumer decoding with the same decoder into the
// same struct and counting in a map. The events are produced once, before
// either side is timed. The result carries process CPU per record of each
// side as well (getrusage), the figure a loaded machine distorts least.
func KafkaKeyedCount(n int64, nKeys, par int) (Result, error) {
	b, err := kafkaEvents(n, nKeys)
	if err != nil {
		return Result{}, err
	}
	var ecpu, lcpu []time.Duration
	engine := func() (time.Duration, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: discard})
		stop := make(chan struct{})
		close(stop)
		src := kafka.NewSource(kafka.Options{Brokers: b.Addrs(), Topics: []string{kafkaTopic}, Stop: stop}, kafka.JSON[Event]())
		var total int64
		countPerKey(weir.FromSource(env, "events", src, monotone[Event]()), &total)
		c0 := cpuNanos()
		t, err := run(env)
		ecpu = append(ecpu, time.Duration(cpuNanos()-c0))
		if err == nil && total != n {
			return 0, fmt.Errorf("kafka keyed count: %d outputs, want %d", total, n)
		}
		return t, err
	}
	loop := func() (time.Duration, error) {
		c0 := cpuNanos()
		t, err := KafkaKeyedCountLoop(b.Addrs(), n)
		lcpu = append(lcpu, time.Duration(cpuNanos()-c0))
		return t, err
	}
	e, l, err := sides(engine, loop)
	if err != nil {
		return Result{}, err
	}
	r := result(fmt.Sprintf("Kafka JSON, key-by, keyed count (parallelism %d)", par), n, e, l, 0, par)
	r.EngineCPUNsPerRecord = float64(median(ecpu)) / float64(n)
	r.LoopCPUNsPerRecord = float64(median(lcpu)) / float64(n)
	return r, nil
}

// KafkaKeyedCountLoop is KafkaKeyedCount's baseline: franz-go's consumer
// from the start of the topic, each value decoded with goccy/go-json into
// an Event and counted per key in a map, until n records.
func KafkaKeyedCountLoop(brokers []string, n int64) (time.Duration, error) {
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	m := make(map[string]int64)
	var got int64
	var decodeErr error
	for got < n {
		fs := cl.PollFetches(context.Background())
		if errs := fs.Errors(); len(errs) > 0 {
			return 0, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			var e Event
			if err := gojson.Unmarshal(r.Value, &e); err != nil {
				decodeErr = err
				return
			}
			m[e.Key]++
			got++
		})
		if decodeErr != nil {
			return 0, decodeErr
		}
	}
	return time.Since(start), nil
}

// discard is the engine's logger: the source's lines about stopping would
// interleave with benchmark output.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
