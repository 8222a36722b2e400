package avro

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/format"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},
 {"name":"qty","type":"int"},
 {"name":"note","type":["null","string"],"default":null}]}`

// v2: qty promoted to long, note removed, price added with a default.
const orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},
 {"name":"qty","type":"long"},
 {"name":"price","type":"double","default":1.5}]}`

type OrderV1 struct {
	ID   string  `avro:"id"`
	Qty  int32   `avro:"qty"`
	Note *string `avro:"note"`
}

type OrderV2 struct {
	ID    string  `avro:"id"`
	Qty   int64   `avro:"qty"`
	Price float64 `avro:"price"`
}

func register(t *testing.T, reg format.Registry, subject, schema string) int {
	t.Helper()
	id, err := reg.Register(context.Background(), subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func encode(t *testing.T, reg format.Registry, id int, v any) []byte {
	t.Helper()
	e, err := NewEncoder(context.Background(), Options{Registry: reg, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEvolutionV1WriterV2Reader: a v2 reader reads v1's records (A2):
// qty promoted int -> long, note dropped, price from its default.
func TestEvolutionV1WriterV2Reader(t *testing.T) {
	reg := format.NewMemory()
	v1 := register(t, reg, "orders-value", orderV1)
	note := "gift"
	b := encode(t, reg, v1, OrderV1{ID: "o1", Qty: 3, Note: &note})

	d, err := Deserializer[OrderV2](Options{Registry: reg, Schema: orderV2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Deserialize(&kgo.Record{Value: b})
	if err != nil {
		t.Fatal(err)
	}
	if want := (OrderV2{ID: "o1", Qty: 3, Price: 1.5}); got != want {
		t.Fatalf("got %+v; want %+v", got, want)
	}
}

// TestEvolutionV2WriterV1Reader: a v1 reader reads v2's records: price
// skipped, note from its default. qty long -> int is not a promotion, so
// this v1 reader reads qty as long (the reverse direction needs the
// reader's type to be at least the writer's).
func TestEvolutionV2WriterV1Reader(t *testing.T) {
	reg := format.NewMemory()
	v1Long := strings.Replace(orderV1, `"type":"int"`, `"type":"long"`, 1)
	register(t, reg, "orders-value", v1Long)
	v2 := register(t, reg, "orders-value", orderV2)
	b := encode(t, reg, v2, OrderV2{ID: "o2", Qty: 1 << 40, Price: 9.25})

	d, err := NewDecoder(Options{Registry: reg, Schema: v1Long})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if _, err := d.Decode(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["id"] != "o2" || m["qty"] != int64(1<<40) || m["note"] != nil || len(m) != 3 {
		t.Fatalf("map %v; want id o2, qty 2^40, note nil and no price", m)
	}
	rec, err := d.Record(b)
	if err != nil {
		t.Fatal(err)
	}
	if rec["qty"] != float64(1<<40) {
		t.Fatalf("record qty %v (%T); want float64 2^40", rec["qty"], rec["qty"])
	}
	// Without a reader schema the writer's shape comes out.
	d2, _ := NewDecoder(Options{Registry: reg})
	rec, err = d2.Record(b)
	if err != nil || rec["price"] != 9.25 {
		t.Fatalf("writer's shape: %v %v; want price 9.25", rec, err)
	}
}

// TestIncompatibleReader: a reader whose field has no default and is not
// in the writer's schema makes a dead letter naming the writer's id.
func TestIncompatibleReader(t *testing.T) {
	reg := format.NewMemory()
	v1 := register(t, reg, "s", orderV1)
	b := encode(t, reg, v1, OrderV1{ID: "x"})
	reader := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"sku","type":"string"}]}`
	d, _ := NewDecoder(Options{Registry: reg, Schema: reader})
	_, err := d.Record(b)
	if !errors.Is(err, format.ErrPayload) || !strings.Contains(err.Error(), "schema id 1") {
		t.Fatalf("err %v; want ErrPayload naming schema id 1", err)
	}
}

const logicalSchema = `{"type":"record","name":"Ev","fields":[
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"atMicros","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"maybe","type":["null",{"type":"long","logicalType":"timestamp-millis"}],"default":null}]}`

type Ev struct {
	At       time.Time  `avro:"at"`
	AtMicros time.Time  `avro:"atMicros"`
	Day      time.Time  `avro:"day"`
	Amount   *big.Rat   `avro:"amount"`
	UID      string     `avro:"uid"`
	Maybe    *time.Time `avro:"maybe"`
}

// TestLogicalTypes: timestamp-millis/micros, date, decimal and uuid into a
// struct, and into the pipeline's JSON-like record and back (A4).
func TestLogicalTypes(t *testing.T) {
	reg := format.NewMemory()
	id := register(t, reg, "ev-value", logicalSchema)
	at := time.UnixMilli(1767225600123).UTC()
	ev := Ev{At: at, AtMicros: time.UnixMicro(1767225600123456).UTC(), Day: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
		Amount: big.NewRat(12345, 100), UID: "6f1c7a4e-1a2b-4c3d-9e8f-001122334455", Maybe: &at}
	b := encode(t, reg, id, ev)

	sd, _ := Deserializer[Ev](Options{Registry: reg})
	got, err := sd.Deserialize(&kgo.Record{Value: b})
	if err != nil {
		t.Fatal(err)
	}
	if !got.At.Equal(at) || !got.Day.Equal(ev.Day) || got.Amount.Cmp(ev.Amount) != 0 || got.UID != ev.UID || !got.Maybe.Equal(at) || !got.AtMicros.Equal(ev.AtMicros) {
		t.Fatalf("struct %+v; want %+v", got, ev)
	}

	rd, _ := Records(Options{Registry: reg})
	rec, err := rd.Deserialize(&kgo.Record{Value: b})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"at": float64(1767225600123), "atMicros": 1767225600123.456, "day": "2026-01-02",
		"amount": "123.45", "uid": ev.UID, "maybe": float64(1767225600123)}
	for k, w := range want {
		if rec[k] != w {
			t.Errorf("record %s = %v (%T); want %v", k, rec[k], rec[k], w)
		}
	}
	// And back: the record encodes to the same bytes.
	e, _ := NewEncoder(context.Background(), Options{Registry: reg, ID: id})
	b2, err := e.AppendRecord(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	if string(b2) != string(b) {
		t.Fatalf("record re-encodes to %x; want %x", b2, b)
	}
}

// TestBadInput: every way a record can be wrong is an error naming what
// and, where there is one, the schema id (W4).
func TestBadInput(t *testing.T) {
	reg := format.NewMemory()
	id := register(t, reg, "s", orderV1)
	good := encode(t, reg, id, OrderV1{ID: "a", Qty: 1})
	d, _ := NewDecoder(Options{Registry: reg})
	for _, c := range []struct {
		name string
		in   []byte
		want error
		id   string
	}{
		{"json", []byte(`{"id":"a"}`), format.ErrMagic, ""},
		{"short", []byte{0, 0}, format.ErrShort, ""},
		{"unknown id", format.AppendHeader(nil, 99), format.ErrUnknownSchema, "schema id 99"},
		{"corrupt", append(format.AppendHeader(nil, id), 0x7f, 0xff), format.ErrPayload, "schema id 1"},
		{"cut", good[:len(good)-2], format.ErrPayload, "schema id 1"},
	} {
		_, err := d.Record(c.in)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.id) {
			t.Errorf("%s: %v; want %v naming %q", c.name, err, c.want, c.id)
		}
	}
}

// TestEncoderModes: fixed id, latest of the subject, auto-register.
func TestEncoderModes(t *testing.T) {
	ctx := context.Background()
	reg := format.NewMemory()
	if _, err := NewEncoder(ctx, Options{Registry: reg, Subject: "none-value"}); err == nil {
		t.Fatal("latest of an empty subject: no error")
	}
	e, err := NewEncoder(ctx, Options{Registry: reg, Subject: "o-value", Schema: orderV1, AutoRegister: true})
	if err != nil || e.ID() != 1 {
		t.Fatalf("auto-register: id %v err %v; want 1", e, err)
	}
	register(t, reg, "o-value", orderV2)
	e, err = NewEncoder(ctx, Options{Registry: reg, Subject: "o-value"})
	if err != nil || e.ID() != 2 {
		t.Fatalf("latest: %v; want id 2", err)
	}
	if _, err := e.AppendRecord(nil, map[string]any{"id": "x", "qty": 1.5}); err == nil || !strings.Contains(err.Error(), "qty") {
		t.Fatalf("qty 1.5 for a long: %v; want an error naming qty", err)
	}
}

// TestErrorDoesNotCarryOver: a corrupt record does not make the next good
// one fail (the decoder's pooled readers start clean).
func TestErrorDoesNotCarryOver(t *testing.T) {
	reg := format.NewMemory()
	id := register(t, reg, "s", orderV1)
	good := encode(t, reg, id, OrderV1{ID: "a", Qty: 1})
	d, _ := NewDecoder(Options{Registry: reg})
	for range 3 {
		if _, err := d.Record(append(format.AppendHeader(nil, id), 0x7f)); err == nil {
			t.Fatal("corrupt record decoded")
		}
		if _, err := d.Record(good); err != nil {
			t.Fatalf("good record after a corrupt one: %v", err)
		}
	}
}

// FuzzDecode: no bytes make the decoder panic; each either decodes or is
// an error naming its cause.
func FuzzDecode(f *testing.F) {
	reg := format.NewMemory()
	id, _ := reg.Register(context.Background(), "s", sr.Schema{Schema: logicalSchema, Type: sr.TypeAvro})
	d, _ := NewDecoder(Options{Registry: reg})
	f.Add(format.AppendHeader(nil, id))
	f.Add(append(format.AppendHeader(nil, id), 0x02, 0x04, 0x06))
	f.Add([]byte{0, 0, 0, 0, 9, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := d.Record(b); err != nil && !errors.Is(err, format.ErrPayload) && !errors.Is(err, format.ErrMagic) &&
			!errors.Is(err, format.ErrShort) && !errors.Is(err, format.ErrUnknownSchema) {
			t.Fatalf("%x: %v: not a format error", b, err)
		}
	})
}
