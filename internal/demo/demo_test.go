package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The demo's totals add up to the generated orders that were neither late
// nor without a timestamp.
func TestDemoAccounts(t *testing.T) {
	var out bytes.Buffer
	o := Options{Orders: 20000, Customers: 7, Parallelism: 2, Seed: 3}
	s, err := Run(context.Background(), &out, o)
	if err != nil {
		t.Fatal(err)
	}
	o = o.withDefaults()
	var amount, dead int64
	for i := range o.Orders {
		g := Generate(o, i)
		if g.Time == 0 {
			dead++
			continue
		}
		amount += g.Amount
	}
	if s.DeadLetters != dead {
		t.Fatalf("dead letters %d, want %d", s.DeadLetters, dead)
	}
	if s.Amount+s.LateAmount != amount {
		t.Fatalf("window totals %d + late %d != generated %d: an order was lost or counted twice", s.Amount, s.LateAmount, amount)
	}
	if !strings.Contains(out.String(), "summary:") {
		t.Fatalf("no summary in:\n%s", out.String())
	}
	if s.Totals == 0 {
		t.Fatal("no window totals")
	}
}
