package protobuf

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weirproject/weir/format"
)

const commonProto = `syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 cents = 2; }
enum Channel { WEB = 0; STORE = 1; }
`

const ordersProto = `syntax = "proto3";
package shop;
import "shop/common.proto";
import "google/protobuf/timestamp.proto";
message Header { string source = 1; }
message Order {
  string customer = 1;
  shop.common.Money total = 2;
  google.protobuf.Timestamp at = 3;
  repeated string items = 4;
  shop.common.Channel channel = 5;
  map<string, int32> counts = 6;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 7;
}
`

func registry(t *testing.T) (*format.Memory, int) {
	t.Helper()
	reg := format.NewMemory()
	ctx := context.Background()
	if _, err := reg.Register(ctx, "shop-common", sr.Schema{Schema: commonProto, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	id, err := reg.Register(ctx, "orders-value", sr.Schema{Schema: ordersProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "shop/common.proto", Subject: "shop-common", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, id
}

// TestDynamicWithReferences: a message whose schema imports another
// subject's and a well-known type, written from a JSON-like record and
// read back field for field (P1, P4); the index of Order is [1].
func TestDynamicWithReferences(t *testing.T) {
	reg, id := registry(t)
	e, err := NewEncoder(context.Background(), Options{Registry: reg, Subject: "orders-value", Message: "shop.Order"})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"customer": "ann", "total": map[string]any{"currency": "EUR", "cents": float64(1250)},
		"at": float64(1767225600123), "items": []any{"a", "b"}, "channel": "STORE", "counts": map[string]any{"a": float64(2)},
		"lines": []any{map[string]any{"sku": "x", "qty": float64(3)}}}
	b, err := e.AppendRecord(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if b[5] != 2 || b[6] != 2 { // index [1]: count 1, entry 1, zig-zag
		t.Fatalf("index bytes %x; want 0202 for [1]", b[5:7])
	}
	d, _ := Records(Options{Registry: reg})
	got, err := d.Deserialize(&kgo.Record{Value: b})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"customer", "at", "channel"} {
		if got[k] != in[k] {
			t.Errorf("%s = %v (%T); want %v", k, got[k], got[k], in[k])
		}
	}
	if tot := got["total"].(map[string]any); tot["cents"] != float64(1250) || tot["currency"] != "EUR" {
		t.Errorf("total %v", tot)
	}
	if l := got["lines"].([]any); len(l) != 1 || l[0].(map[string]any)["qty"] != float64(3) {
		t.Errorf("lines %v", l)
	}
	if c := got["counts"].(map[string]any); c["a"] != float64(2) {
		t.Errorf("counts %v", c)
	}
	_ = id
	// A nested message: index [1, 0].
	e2, err := NewEncoder(context.Background(), Options{Registry: reg, ID: id, Message: "shop.Order.Line"})
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := e2.AppendRecord(nil, map[string]any{"sku": "y", "qty": float64(1)})
	got, err = d.Deserialize(&kgo.Record{Value: b2})
	if err != nil || got["sku"] != "y" {
		t.Fatalf("nested: %v %v", got, err)
	}
}

// TestGenerated: a generated type reads records of its message and refuses
// records of another (P2).
func TestGenerated(t *testing.T) {
	reg, _ := registry(t)
	ts := `syntax = "proto3"; package google.protobuf; message Timestamp { int64 seconds = 1; int32 nanos = 2; }`
	id, _ := reg.Register(context.Background(), "ts-value", sr.Schema{Schema: ts, Type: sr.TypeProtobuf})
	e, err := NewEncoder(context.Background(), Options{Registry: reg, ID: id, Message: "google.protobuf.Timestamp"})
	if err != nil {
		t.Fatal(err)
	}
	want := timestamppb.New(time.UnixMilli(1767225600123))
	b, err := e.Append(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Generated(Options{Registry: reg}, func() *timestamppb.Timestamp { return new(timestamppb.Timestamp) })
	got, err := d.Deserialize(&kgo.Record{Value: b})
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("got %v %v; want %v", got, err, want)
	}
	eo, _ := NewEncoder(context.Background(), Options{Registry: reg, Subject: "orders-value", Message: "shop.Order"})
	bo, _ := eo.AppendRecord(nil, map[string]any{"customer": "x"})
	_, err = d.Deserialize(&kgo.Record{Value: bo})
	if !errors.Is(err, format.ErrPayload) || !strings.Contains(err.Error(), "shop.Order") {
		t.Fatalf("an Order into a Timestamp: %v; want an error naming shop.Order", err)
	}
}

func TestProtobufBadInput(t *testing.T) {
	reg, id := registry(t)
	d, _ := NewDecoder(Options{Registry: reg})
	for _, c := range []struct {
		in   []byte
		want error
	}{
		{[]byte("{}"), format.ErrMagic},
		{format.AppendHeader(nil, 77), format.ErrIndex},
		{append(format.AppendHeader(nil, 77), 0), format.ErrUnknownSchema},
		{append(format.AppendHeader(nil, id), 2, 18), format.ErrIndex},           // message 9 of 2
		{append(format.AppendHeader(nil, id), 0, 0x0a, 0x50), format.ErrPayload}, // string longer than the payload
	} {
		if _, err := d.Record(c.in); !errors.Is(err, c.want) {
			t.Errorf("%x: %v; want %v", c.in, err, c.want)
		}
	}
}

// TestSerializedDescriptors: schemas registered as base64
// FileDescriptorProtos (as Confluent's serializers register them), with a
// reference and a well-known import, decode like .proto text.
func TestSerializedDescriptors(t *testing.T) {
	text, _ := registry(t)
	ctx := context.Background()
	ss, _ := text.SchemaByVersion(ctx, "orders-value", 1)
	fd, err := Compile(ctx, text, "shop/orders.proto", ss.Schema)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(f protoreflect.FileDescriptor) string {
		b, _ := proto.Marshal(protodesc.ToFileDescriptorProto(f))
		return base64.StdEncoding.EncodeToString(b)
	}
	reg := format.NewMemory()
	reg.Register(ctx, "shop-common", sr.Schema{Schema: b64(fd.Imports().Get(0).FileDescriptor), Type: sr.TypeProtobuf})
	id, _ := reg.Register(ctx, "orders-value", sr.Schema{Schema: b64(fd), Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "shop/common.proto", Subject: "shop-common", Version: 1}}})
	e, err := NewEncoder(ctx, Options{Registry: reg, ID: id, Message: "shop.Order"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.AppendRecord(nil, map[string]any{"customer": "ann", "total": map[string]any{"cents": float64(5)}, "at": float64(1000)})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewDecoder(Options{Registry: reg})
	got, err := d.Record(b)
	if err != nil || got["customer"] != "ann" || got["at"] != float64(1000) {
		t.Fatalf("got %v %v", got, err)
	}
}
