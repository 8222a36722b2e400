package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The demo's accounting: every produced, decodable record is in exactly one
// window total or in the late output; the malformed ones are dead letters;
// the history is sorted without an order violation, and the records held
// back past the watermark are late.
func TestDemoAccounts(t *testing.T) {
	var out bytes.Buffer
	o := Options{Orders: 6000, Days: 1, Customers: 7, Items: 40, Parallelism: 2, Seed: 3,
		Live: 400 * time.Millisecond, Rate: 1000, Malformed: 4, HeldBack: 2}
	s, err := Run(context.Background(), &out, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", s)
	// The history, regenerated independently of what Run counted.
	var n int64
	for _, c := range Counts(o) {
		n += c
	}
	if s.History != 6000 || n != 6000 || s.Malformed != 4 || s.HeldBack != 2 || s.Live == 0 ||
		s.Produced != s.History+s.Live+s.HeldBack {
		t.Fatalf("produced %+v", s)
	}
	if s.DeadLetters != s.Malformed {
		t.Fatalf("dead letters %d, want the %d malformed records", s.DeadLetters, s.Malformed)
	}
	if s.Windowed+s.Late != s.Produced {
		t.Fatalf("window totals over %d records + %d late != %d produced: a record was lost or counted twice", s.Windowed, s.Late, s.Produced)
	}
	if s.Amount+s.LateAmount != s.ProducedAmount {
		t.Fatalf("window amount %d + late %d != produced %d", s.Amount, s.LateAmount, s.ProducedAmount)
	}
	if s.Sorted != s.Produced {
		t.Fatalf("sort released %d records, want %d", s.Sorted, s.Produced)
	}
	if s.HistoryViolations != 0 {
		t.Fatalf("%d history records reached the sort behind its watermark, want 0 (catch-up by end offsets)", s.HistoryViolations)
	}
	if s.Late < s.HeldBack || s.OrderViolations < s.HeldBack {
		t.Fatalf("late %d, violations %d: the %d held-back records must be both", s.Late, s.OrderViolations, s.HeldBack)
	}
	if s.AgentInputs == 0 || s.AgentResumed != 0 || s.AgentDecisions != s.AgentInputs || s.AgentDecided != s.AgentInputs {
		t.Fatalf("inventory agent: %d decisions of %d orders for %d live orders (%d resumed), want one decision each",
			s.AgentDecisions, s.AgentDecided, s.AgentInputs, s.AgentResumed)
	}
	if s.Totals == 0 || s.CaughtUp <= 0 {
		t.Fatalf("totals %d, caught up %v", s.Totals, s.CaughtUp)
	}
	for _, want := range []string{"kafka topic caught up", "kafka partition caught up", "summary:"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
}
