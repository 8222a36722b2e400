package protobuf_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/weirproject/weir/format"
	"github.com/weirproject/weir/format/protobuf"
)

const benchProto = `syntax = "proto3";
package bench;
message Event { string key = 1; int64 v = 2; int64 ts = 3; }`

// BenchmarkDecode: the peers-style record in the wire format, decoded into
// a dynamic message by protobuf.Dynamic (header, index, cached compiled
// schema by id) and by a hand-written loop (header and index read with
// package format, the descriptor compiled once, proto.Unmarshal into a
// dynamicpb message).
//
//	go test -run XXX -bench Decode -benchtime 200000x ./format/protobuf/
func BenchmarkDecode(b *testing.B) {
	ctx := context.Background()
	reg := format.NewMemory()
	enc, err := protobuf.NewEncoder(ctx, protobuf.Options{Registry: reg, Subject: "events-value", Schema: benchProto, AutoRegister: true, Message: "bench.Event"})
	if err != nil {
		b.Fatal(err)
	}
	wire, err := enc.AppendRecord(nil, map[string]any{"key": "k0042", "v": float64(7), "ts": float64(1_700_000_000_000)})
	if err != nil {
		b.Fatal(err)
	}
	rec := &kgo.Record{Value: wire}
	b.Run("weir", func(b *testing.B) {
		d, err := protobuf.Dynamic(protobuf.Options{Registry: reg})
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
		files := map[int]protoreflect.FileDescriptor{}
		for b.Loop() {
			id, rest, err := format.ParseHeader(rec.Value)
			if err != nil {
				b.Fatal(err)
			}
			index, payload, err := format.ParseIndex(id, rest)
			if err != nil {
				b.Fatal(err)
			}
			f, ok := files[id]
			if !ok {
				raw, _ := reg.SchemaByID(ctx, id)
				if f, err = protobuf.Compile(ctx, reg, "main.proto", raw); err != nil {
					b.Fatal(err)
				}
				files[id] = f
			}
			md, err := protobuf.MessageAt(f, index)
			if err != nil {
				b.Fatal(err)
			}
			m := dynamicpb.NewMessage(md)
			if err := proto.Unmarshal(payload, m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
