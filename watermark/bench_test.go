package watermark

import (
	"testing"
	"time"

	"github.com/weirproject/weir/clock"
)

// BenchmarkCombinerWatermark feeds rising watermarks round-robin into a
// Combiner of 4 inputs (every call moves the minimum). 0 allocs/op (I10).
func BenchmarkCombinerWatermark(b *testing.B) {
	c := NewCombiner(4, &nopOutput{})
	b.ReportAllocs()
	var ts int64
	for i := 0; b.Loop(); i++ {
		ts++
		c.Watermark(i&3, ts)
	}
}

// BenchmarkCombinerWatermark1 is the single-input pass-through.
func BenchmarkCombinerWatermark1(b *testing.B) {
	c := NewCombiner(1, &nopOutput{})
	b.ReportAllocs()
	var ts int64
	for b.Loop() {
		ts++
		c.Watermark(0, ts)
	}
}

// BenchmarkBoundedOnEvent is the per-record cost of bounded out-of-orderness.
// 0 allocs/op.
func BenchmarkBoundedOnEvent(b *testing.B) {
	g := BoundedOutOfOrderness[record](5 * time.Second)
	out := &nopOutput{}
	b.ReportAllocs()
	var ts int64
	for b.Loop() {
		ts++
		g.OnEvent(record{ts}, ts, out)
	}
}

// BenchmarkSplitsOnEvent is the per-record path of a source subtask with 8
// splits and idleness detection. 0 allocs/op (I17).
func BenchmarkSplitsOnEvent(b *testing.B) {
	s := NewSplits(ForBoundedOutOfOrderness[record](5*time.Second).WithIdleness(time.Minute),
		clock.NewManual(epoch), &nopOutput{})
	for id := range 8 {
		s.Add(id)
	}
	b.ReportAllocs()
	var ts int64
	for i := 0; b.Loop(); i++ {
		ts++
		s.OnEvent(i&7, record{ts}, ts)
	}
}

// BenchmarkSplitsPeriodicEmit is one auto-watermark tick over 64 splits.
func BenchmarkSplitsPeriodicEmit(b *testing.B) {
	s := NewSplits(ForBoundedOutOfOrderness[record](5*time.Second), clock.NewManual(epoch), &nopOutput{})
	for id := range 64 {
		s.Add(id)
	}
	b.ReportAllocs()
	var ts int64
	for b.Loop() {
		for id := range 64 {
			ts++
			s.OnEvent(id, record{ts}, ts)
		}
		s.OnPeriodicEmit()
	}
}
