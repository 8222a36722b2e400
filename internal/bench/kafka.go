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
// (records, keys, shape) and reused by every run of both sides.
const (
	kafkaTopic      = "bench-events"
	kafkaPartitions = 4
)

// Shape is the form of the Kafka scenario's records.
type Shape int

const (
	// ShapePeers is what users send (issue 31): every record carries its
	// event's key as the Kafka key, and its value is a JSON object of
	// three fields, {"key":"key-17","value":345,"ts":1733000000123}
	// (PeerEvent), the peers-style record of the formats scenario.
	ShapePeers Shape = iota
	// ShapeBare is the shape `weir bench` used before: no Kafka key and a
	// JSON value of two fields, {"Key":"key-17","V":345} (Event).
	ShapeBare
)

func (s Shape) String() string {
	if s == ShapeBare {
		return "no Kafka key, 2-field value"
	}
	return "Kafka key, 3-field value"
}

// PeerEvent is the value of a ShapePeers record.
type PeerEvent struct {
	Key   string `json:"key"`
	Value int64  `json:"value"`
	TS    int64  `json:"ts"`
}

// peerEpoch is the first record's ts in ShapePeers (Unix milliseconds),
// so that the field has a realistic width.
const peerEpoch = 1_733_000_000_000

// kafkaRecord is the i-th record of n in shape, to be produced round-robin
// over kafkaPartitions partitions.
func kafkaRecord(keys []string, i int64, shape Shape) (*kgo.Record, error) {
	e := eventAt(keys, i)
	r := &kgo.Record{Topic: kafkaTopic, Partition: int32(i % kafkaPartitions), Timestamp: time.UnixMilli(i)}
	var err error
	if shape == ShapePeers {
		r.Key = []byte(e.Key)
		r.Value, err = gojson.Marshal(PeerEvent{Key: e.Key, Value: e.V, TS: peerEpoch + i})
	} else {
		r.Value, err = gojson.Marshal(e)
	}
	return r, err
}

var kafkaData struct {
	mu   sync.Mutex
	b    map[Shape]*broker.Broker
	n    int64
	keys int
}

// kafkaEvents returns a broker whose topic holds n JSON events over nKeys
// keys (eventAt's sequence) in shape, producing them on first use.
func kafkaEvents(n int64, nKeys int, shape Shape) (*broker.Broker, error) {
	d := &kafkaData
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n != n || d.keys != nKeys {
		for _, b := range d.b {
			b.Close()
		}
		d.b, d.n, d.keys = nil, n, nKeys
	}
	if b := d.b[shape]; b != nil {
		return b, nil
	}
	b, err := broker.Start(broker.Options{Topics: map[string]int32{kafkaTopic: kafkaPartitions}})
	if err != nil {
		return nil, err
	}
	if err := produceEvents(b.Addrs(), kafkasec.Security{}, n, nKeys, shape); err != nil {
		b.Close()
		return nil, err
	}
	if d.b == nil {
		d.b = map[Shape]*broker.Broker{}
	}
	d.b[shape] = b
	return b, nil
}

// KafkaKeyedCount counts n JSON events over nKeys keys in shape read from
// the in-process broker: the engine reads them with the Kafka source in
// bounded mode (kafka.JSON, the goccy/go-json decoder), keys them by the
// value's key field and counts per key in value state at the given
// parallelism; the loop is a hand-written franz-go consumer decoding with
// the same decoder into the same struct and counting in a map. The events
// are produced once, before either side is timed. The sides alternate,
// each going first in every other round (alternate), Reps rounds; the
// result carries process CPU per record of each side as well (getrusage),
// the figure a loaded machine distorts least, and the median of the
// rounds' paired time ratios.
func KafkaKeyedCount(n int64, nKeys, par int, shape Shape) (Result, error) {
	b, err := kafkaEvents(n, nKeys, shape)
	if err != nil {
		return Result{}, err
	}
	var ecpu, lcpu []time.Duration
	engine := func() (time.Duration, error) {
		var total int64
		env := kafkaCountJob(b.Addrs(), par, shape, &total)
		t, cpu, err := runCPU(env)
		ecpu = append(ecpu, cpu)
		if err == nil && total != n {
			return 0, fmt.Errorf("kafka keyed count: %d outputs, want %d", total, n)
		}
		return t, err
	}
	loop := func() (time.Duration, error) {
		settle()
		c0 := cpuNanos()
		var t time.Duration
		var keys int
		var err error
		if shape == ShapePeers {
			t, keys, err = kafkaKeyedCountLoop(b.Addrs(), n, func(e *PeerEvent) string { return e.Key })
		} else {
			t, keys, err = kafkaKeyedCountLoop(b.Addrs(), n, func(e *Event) string { return e.Key })
		}
		lcpu = append(lcpu, time.Duration(cpuNanos()-c0))
		if err == nil && keys != min(nKeys, int(n)) {
			return 0, fmt.Errorf("kafka keyed count loop: %d keys, want %d", keys, min(nKeys, int(n)))
		}
		return t, err
	}
	e, l, paired, err := alternate(engine, loop)
	if err != nil {
		return Result{}, err
	}
	r := result(fmt.Sprintf("Kafka JSON (%s), key-by, keyed count (parallelism %d)", shape, par), n, e, l, 0, par)
	r.EngineCPUNsPerRecord = float64(median(ecpu)) / float64(n)
	r.LoopCPUNsPerRecord = float64(median(lcpu)) / float64(n)
	r.PairedRatio = paired
	return r, nil
}

// kafkaCountJob is KafkaKeyedCount's engine side: a bounded job reading
// the topic at addrs in shape, counting per key into total.
func kafkaCountJob(addrs []string, par int, shape Shape, total *int64) *weir.Environment {
	env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: discard})
	stop := make(chan struct{})
	close(stop)
	opts := kafka.Options{Brokers: addrs, Topics: []string{kafkaTopic}, Stop: stop}
	if shape == ShapePeers {
		src := kafka.NewSource(opts, kafka.JSON[PeerEvent]())
		countPerKeyOf(weir.FromSource(env, "events", src, monotone[PeerEvent]()), func(e PeerEvent) string { return e.Key }, total)
	} else {
		src := kafka.NewSource(opts, kafka.JSON[Event]())
		countPerKey(weir.FromSource(env, "events", src, monotone[Event]()), total)
	}
	return env
}

// KafkaKeyedCountLoop is KafkaKeyedCount's baseline for ShapeBare records.
func KafkaKeyedCountLoop(brokers []string, n int64) (time.Duration, error) {
	t, _, err := kafkaKeyedCountLoop(brokers, n, func(e *Event) string { return e.Key })
	return t, err
}

// kafkaKeyedCountLoop is KafkaKeyedCount's baseline: franz-go's consumer
// from the start of the topic, each value decoded with goccy/go-json into
// a T and counted per key in a map, until n records. It returns the time
// and the number of distinct keys.
func kafkaKeyedCountLoop[T any](brokers []string, n int64, key func(*T) string) (time.Duration, int, error) {
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	m := make(map[string]int64)
	var got int64
	var decodeErr error
	for got < n {
		fs := cl.PollFetches(context.Background())
		if errs := fs.Errors(); len(errs) > 0 {
			return 0, 0, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			var e T
			if err := gojson.Unmarshal(r.Value, &e); err != nil {
				decodeErr = err
				return
			}
			m[key(&e)]++
			got++
		})
		if decodeErr != nil {
			return 0, 0, decodeErr
		}
	}
	return time.Since(start), len(m), nil
}

// discard is the engine's logger: the source's lines about stopping would
// interleave with benchmark output.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
