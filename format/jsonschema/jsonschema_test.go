package jsonschema

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/weirproject/weir/format"
)

const orderSchema = `{"type":"object","properties":{
 "customer":{"type":"string"},"qty":{"type":"integer","minimum":1},
 "money":{"$ref":"https://example.com/money.json"}},
 "required":["customer","qty"]}`

const moneySchema = `{"type":"object","properties":{"cents":{"type":"integer"}},"required":["cents"]}`

type order struct {
	Customer string         `json:"customer"`
	Qty      int            `json:"qty"`
	Money    map[string]any `json:"money,omitempty"`
}

// TestValidation: a valid record round-trips; an invalid one is a dead
// letter naming the schema id, with Validate, and passes without it; the
// encoder refuses an invalid value (J2); a $ref resolves through the
// schema's references (J1).
func TestValidation(t *testing.T) {
	ctx := context.Background()
	reg := format.NewMemory()
	reg.Register(ctx, "money", sr.Schema{Schema: moneySchema, Type: sr.TypeJSON})
	id, _ := reg.Register(ctx, "orders-value", sr.Schema{Schema: orderSchema, Type: sr.TypeJSON,
		References: []sr.SchemaReference{{Name: "https://example.com/money.json", Subject: "money", Version: 1}}})
	ser, err := Serializer[order](ctx, Options{Registry: reg, Subject: "orders-value", Validate: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ser(order{Customer: "ann", Qty: 2, Money: map[string]any{"cents": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ser(order{Customer: "ann", Qty: 0}); !errors.Is(err, format.ErrValidation) {
		t.Fatalf("qty 0: %v; want ErrValidation", err)
	}
	if _, err := ser(order{Customer: "ann", Qty: 1, Money: map[string]any{"dollars": 5}}); !errors.Is(err, format.ErrValidation) {
		t.Fatalf("money without cents: %v; want ErrValidation (the $ref)", err)
	}
	d, _ := Deserializer[map[string]any](Options{Registry: reg, Validate: true})
	m, err := d.Deserialize(r)
	if err != nil || m["customer"] != "ann" || m["qty"] != float64(2) {
		t.Fatalf("decoded %v %v", m, err)
	}
	bad := &kgo.Record{Value: append(format.AppendHeader(nil, id), `{"customer":"bob"}`...)}
	_, err = d.Deserialize(bad)
	if !errors.Is(err, format.ErrValidation) || !strings.Contains(err.Error(), "schema id 2") {
		t.Fatalf("invalid record: %v; want ErrValidation naming schema id 2", err)
	}
	lax, _ := Deserializer[order](Options{Registry: reg})
	if o, err := lax.Deserialize(bad); err != nil || o.Customer != "bob" {
		t.Fatalf("without Validate: %v %v; want it decoded", o, err)
	}
	if _, err := lax.Deserialize(&kgo.Record{Value: []byte(`{"customer":"bob"}`)}); !errors.Is(err, format.ErrMagic) {
		t.Fatalf("plain JSON: %v; want ErrMagic", err)
	}
}
