package avro_test

import (
	"context"
	"testing"
	"time"

	havro "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/format/avro"
)

const benchAvsc = `{"type":"record","name":"Event","fields":[
 {"name":"Key","type":"string"},{"name":"V","type":"long"},
 {"name":"TS","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

type benchEvent struct {
	Key string    `avro:"Key"`
	V   int64     `avro:"V"`
	TS  time.Time `avro:"TS"`
}

// BenchmarkDecode: the peers-style record (three fields) in the wire
// format, decoded by avro.Deserializer (header, cached schema by id) and
// by a hand-written loop (header read by hand, the schema parsed once,
// hamba/avro's Unmarshal): what the Kafka source pays per record on top of
// the broker (BENCHMARKS.md, "Record formats").
//
//	go test -run XXX -bench Decode -benchtime 200000x ./format/avro/
func BenchmarkDecode(b *testing.B) {
	ctx := context.Background()
	reg := format.NewMemory()
	enc, err := avro.NewEncoder(ctx, avro.Options{Registry: reg, Subject: "events-value", Schema: benchAvsc, AutoRegister: true})
	if err != nil {
		b.Fatal(err)
	}
	wire, err := enc.Append(nil, benchEvent{Key: "k0042", V: 7, TS: time.UnixMilli(1_700_000_000_000)})
	if err != nil {
		b.Fatal(err)
	}
	rec := &kgo.Record{Value: wire}
	b.Run("weir", func(b *testing.B) {
		d, err := avro.Deserializer[benchEvent](avro.Options{Registry: reg})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := d.Deserialize(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("loop", func(b *testing.B) {
		schemas := map[int]havro.Schema{}
		for b.Loop() {
			id, payload, err := format.ParseHeader(rec.Value)
			if err != nil {
				b.Fatal(err)
			}
			s, ok := schemas[id]
			if !ok {
				raw, _ := reg.SchemaByID(ctx, id)
				if s, err = havro.Parse(raw.Schema); err != nil {
					b.Fatal(err)
				}
				schemas[id] = s
			}
			var ev benchEvent
			if err := havro.Unmarshal(s, payload, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
