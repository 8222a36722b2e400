package watermark

import (
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

func TestStrategyTimestamp(t *testing.T) {
	s := NoWatermarks[record]()
	if ts, ok := s.ExtractTimestamp(record{ts: 7}, 99); !ok || ts != 99 {
		t.Fatalf("nil Timestamp: got %d, %v; want the source timestamp 99", ts, ok)
	}
	s2 := s.WithTimestamp(func(ev record, _ int64) (int64, bool) { return ev.ts, ev.ts > 0 })
	if s.Timestamp != nil {
		t.Fatal("WithTimestamp modified the original")
	}
	if ts, ok := s2.ExtractTimestamp(record{ts: 7}, 99); !ok || ts != 7 {
		t.Fatalf("got %d, %v; want 7, true", ts, ok)
	}
	if _, ok := s2.ExtractTimestamp(record{ts: 0}, 99); ok {
		t.Fatal("a record without timestamp was accepted")
	}
}

func TestStrategyGenerator(t *testing.T) {
	clk := clock.NewManual(epoch)

	g := ForBoundedOutOfOrderness[record](5 * time.Second).Generator(clk)
	r := &recorder{}
	g.OnEvent(record{}, 10_000, r)
	g.OnPeriodicEmit(r)
	r.expect(t, "bounded 5s", wm(4999))

	g = ForMonotonous[record]().Generator(clk)
	g.OnEvent(record{}, 10_000, r)
	g.OnPeriodicEmit(r)
	r.expect(t, "monotonous", wm(9999))

	g = NoWatermarks[record]().Generator(clk)
	g.OnEvent(record{}, 10_000, r)
	g.OnPeriodicEmit(r)
	r.expect(t, "no watermarks")

	base := ForMonotonous[record]()
	withIdle := base.WithIdleness(time.Second)
	if base.Idleness != 0 {
		t.Fatal("WithIdleness modified the original")
	}
	ig, ok := withIdle.Generator(clk).(*IdlenessGenerator[record])
	if !ok {
		t.Fatal("Idleness > 0 did not wrap the generator")
	}
	if _, ok := ig.Inner().(*BoundedGenerator[record]); !ok {
		t.Fatalf("inner generator is %T", ig.Inner())
	}
	ig.OnPeriodicEmit(r)
	clk.Advance(time.Second + time.Millisecond)
	ig.OnPeriodicEmit(r)
	r.expect(t, "idleness on the given clock", wm(Min), "idle")

	if _, ok := withIdle.WithIdleness(0).Generator(clk).(*IdlenessGenerator[record]); ok {
		t.Fatal("WithIdleness(0) still wraps")
	}
	// Each call makes a fresh generator: splits do not share state.
	a, b := base.Generator(clk), base.Generator(clk)
	a.OnEvent(record{}, 100, r)
	b.OnPeriodicEmit(r)
	r.expect(t, "independent generators", wm(Min))
}

func TestForBoundedOutOfOrdernessRejectsNegative(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	ForBoundedOutOfOrderness[record](-time.Second)
}
