package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	havro "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/broker"
	"github.com/weirproject/weir/connector/kafka"
	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/format/avro"
	"github.com/weirproject/weir/format/protobuf"
)

// The record formats scenario (issue 26): the peers-style record of three
// fields (key, value, timestamp) in the Confluent wire format, Avro or
// Protobuf, its schema in a format.Memory registry (fetched once by either
// side: neither pays a registry request per record), read from the
// in-process broker into a keyed count. Engine: the Kafka source with
// format/avro's or format/protobuf's deserializer; loop: franz-go's
// consumer, the header read by hand, the same library decoding with the
// same cached schema, a map.

const eventAvsc = `{"type":"record","name":"Event","fields":[
 {"name":"Key","type":"string"},{"name":"V","type":"long"},
 {"name":"TS","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

const eventProto = `syntax = "proto3";
package bench;
message Event { string key = 1; int64 v = 2; int64 ts = 3; }`

// avroEvent is Event with its timestamp, as written.
type avroEvent struct {
	Key string
	V   int64
	TS  time.Time
}

var formatData struct {
	mu   sync.Mutex
	b    map[string]*broker.Broker
	reg  map[string]format.Registry
	id   map[string]int
	n    int64
	keys int
}

// formatEvents returns a broker whose topic holds n events in kind ("avro"
// or "protobuf") and the registry holding their schema.
func formatEvents(kind string, n int64, nKeys int) (*broker.Broker, format.Registry, int, error) {
	formatData.mu.Lock()
	defer formatData.mu.Unlock()
	if formatData.b == nil || formatData.n != n || formatData.keys != nKeys {
		for _, b := range formatData.b {
			b.Close()
		}
		formatData.b, formatData.reg, formatData.id = map[string]*broker.Broker{}, map[string]format.Registry{}, map[string]int{}
		formatData.n, formatData.keys = n, nKeys
	}
	if b := formatData.b[kind]; b != nil {
		return b, formatData.reg[kind], formatData.id[kind], nil
	}
	b, err := broker.Start(broker.Options{Topics: map[string]int32{kafkaTopic: kafkaPartitions}})
	if err != nil {
		return nil, nil, 0, err
	}
	reg := format.NewMemory()
	ctx := context.Background()
	var enc func(e Event, i int64) ([]byte, error)
	var id int
	switch kind {
	case "avro":
		e, err := avro.NewEncoder(ctx, avro.Options{Registry: reg, Subject: "events-value", Schema: eventAvsc, AutoRegister: true})
		if err != nil {
			return nil, nil, 0, err
		}
		id = e.ID()
		enc = func(ev Event, i int64) ([]byte, error) {
			return e.Append(nil, avroEvent{Key: ev.Key, V: ev.V, TS: time.UnixMilli(i)})
		}
	case "protobuf":
		e, err := protobuf.NewEncoder(ctx, protobuf.Options{Registry: reg, Subject: "events-value", Schema: eventProto, AutoRegister: true, Message: "bench.Event"})
		if err != nil {
			return nil, nil, 0, err
		}
		id = e.ID()
		enc = func(ev Event, i int64) ([]byte, error) {
			return e.AppendRecord(nil, map[string]any{"key": ev.Key, "v": float64(ev.V), "ts": float64(i)})
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Close()
		return nil, nil, 0, err
	}
	defer cl.Close()
	keys := Keys(nKeys)
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		v, err := enc(eventAt(keys, i), i)
		if err != nil {
			b.Close()
			return nil, nil, 0, err
		}
		cl.Produce(ctx, &kgo.Record{Topic: kafkaTopic, Partition: int32(i % kafkaPartitions), Value: v, Timestamp: time.UnixMilli(i)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			})
	}
	if err := cl.Flush(ctx); err != nil || firstErr != nil {
		b.Close()
		return nil, nil, 0, errors.Join(err, firstErr)
	}
	formatData.b[kind], formatData.reg[kind], formatData.id[kind] = b, reg, id
	return b, reg, id, nil
}

// KafkaFormatKeyedCount is the scenario for kind "avro" or "protobuf".
func KafkaFormatKeyedCount(kind string, n int64, nKeys, par int) (Result, error) {
	b, reg, id, err := formatEvents(kind, n, nKeys)
	if err != nil {
		return Result{}, err
	}
	var deser kafka.Deserializer[Event]
	switch kind {
	case "avro":
		deser, err = avro.Deserializer[Event](avro.Options{Registry: reg})
	case "protobuf":
		var d *protobuf.Decoder
		d, err = protobuf.NewDecoder(protobuf.Options{Registry: reg})
		deser = kafka.DeserializerFunc[Event](func(r *kgo.Record) (Event, error) {
			m, err := d.Decode(r.Value)
			if err != nil {
				return Event{}, err
			}
			f := m.Descriptor().Fields()
			return Event{Key: m.Get(f.ByNumber(1)).String(), V: m.Get(f.ByNumber(2)).Int()}, nil
		})
	}
	if err != nil {
		return Result{}, err
	}
	var ecpu, lcpu []time.Duration
	engine := func() (time.Duration, error) {
		env := weir.NewEnvironment(weir.Config{Parallelism: par, Logger: discard})
		stop := make(chan struct{})
		close(stop)
		src := kafka.NewSource(kafka.Options{Brokers: b.Addrs(), Topics: []string{kafkaTopic}, Stop: stop}, deser)
		var total int64
		countPerKey(weir.FromSource(env, "events", src, monotone[Event]()), &total)
		t, cpu, err := runCPU(env)
		ecpu = append(ecpu, cpu)
		if err == nil && total != n {
			return 0, fmt.Errorf("kafka %s keyed count: %d outputs, want %d", kind, total, n)
		}
		return t, err
	}
	loop := func() (time.Duration, error) {
		c0 := cpuNanos()
		t, err := kafkaFormatLoop(kind, b.Addrs(), reg, id, n)
		lcpu = append(lcpu, time.Duration(cpuNanos()-c0))
		return t, err
	}
	e, l, err := sides(engine, loop)
	if err != nil {
		return Result{}, err
	}
	r := result(fmt.Sprintf("Kafka %s, key-by, keyed count (parallelism %d)", kind, par), n, e, l, 0, par)
	r.EngineCPUNsPerRecord = float64(median(ecpu)) / float64(n)
	r.LoopCPUNsPerRecord = float64(median(lcpu)) / float64(n)
	return r, nil
}

// kafkaFormatLoop is the baseline: franz-go's consumer; the schema of the
// first id seen parsed (Avro) or compiled (Protobuf) once and kept in a
// map by id; each record's header read by hand, its payload decoded with
// hamba/avro into an Event (as the engine's deserializer does) or with
// dynamicpb, counted per key in a map, until n records.
func kafkaFormatLoop(kind string, brokers []string, reg format.Registry, id int, n int64) (time.Duration, error) {
	start := time.Now()
	ctx := context.Background()
	s, err := reg.SchemaByID(ctx, id)
	if err != nil {
		return 0, err
	}
	var decode func(payload []byte) (string, error)
	switch kind {
	case "avro":
		schema, err := havro.Parse(s.Schema)
		if err != nil {
			return 0, err
		}
		decode = func(p []byte) (string, error) {
			var e Event // the engine's type: TS skipped on both sides
			err := havro.Unmarshal(schema, p, &e)
			return e.Key, err
		}
	case "protobuf":
		fd, err := protobuf.Compile(ctx, reg, "event.proto", sr.Schema{Schema: s.Schema, Type: sr.TypeProtobuf})
		if err != nil {
			return 0, err
		}
		md := fd.Messages().Get(0)
		key, val := md.Fields().ByNumber(1), md.Fields().ByNumber(2)
		decode = func(p []byte) (string, error) {
			if len(p) == 0 || p[0] != 0 {
				return "", errors.New("index not [0]")
			}
			m := dynamicpb.NewMessage(md)
			err := proto.Unmarshal(p[1:], m)
			e := Event{Key: m.Get(key).String(), V: m.Get(val).Int()} // as the engine's deserializer builds
			return e.Key, err
		}
	}
	schemas := map[uint32]func([]byte) (string, error){uint32(id): decode}
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
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			return 0, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < 5 || r.Value[0] != 0 {
				decodeErr = errors.New("not the wire format")
				return
			}
			dec, ok := schemas[binary.BigEndian.Uint32(r.Value[1:5])]
			if !ok {
				decodeErr = errors.New("unknown schema id")
				return
			}
			k, err := dec(r.Value[5:])
			if err != nil {
				decodeErr = err
				return
			}
			m[k]++
			got++
		})
		if decodeErr != nil {
			return 0, decodeErr
		}
	}
	return time.Since(start), nil
}
