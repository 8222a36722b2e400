package agentbench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirproject/weir/agent/model"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestExperimentSmall runs a small experiment: every input produces one
// output, no output is behind a watermark, in both variants.
func TestExperimentSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Experiment(ctx, ExperimentConfig{
		Config:         Config{Inputs: 3000, Keys: 500, MaxConcurrentKeys: 64, Latency: model.Latency{Dist: "exponential", Mean: 2 * time.Millisecond}, WatermarkInterval: time.Millisecond},
		BlockingInputs: 50,
		CPUInputs:      2000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Async.ActionsRun != 3000 || rep.Blocking.ActionsRun != 50 {
		t.Fatalf("actions run: async %d, blocking %d", rep.Async.ActionsRun, rep.Blocking.ActionsRun)
	}
	if rep.WatermarkViolations != 0 {
		t.Fatalf("%d outputs behind a watermark", rep.WatermarkViolations)
	}
	if rep.Async.Watermarks == 0 || rep.Async.MaxInFlightCalls < 2 || rep.Blocking.MaxInFlightCalls != 1 {
		t.Fatalf("report %+v", rep)
	}
	if rep.IdealPerSec <= 0 || rep.CPU == nil || rep.CPU.AgentMicros <= 0 || rep.CPU.LoopMicros <= 0 {
		t.Fatalf("report %+v", rep)
	}
	t.Logf("throughput %.0f/s of ideal %.0f/s, blocking %.0f/s, held max %d, CPU %+v",
		rep.ThroughputPerSec, rep.IdealPerSec, rep.BlockingPerSec, rep.HeldWatermarksMax, *rep.CPU)
}

// BenchmarkAgent compares the asynchronous operator with the blocking
// variant (actions on the subtask goroutine) on the same workload: 1ms
// model latency, 10,000 keys, in-flight limit 1,000. One op is one input.
func BenchmarkAgent(b *testing.B) {
	for _, blocking := range []bool{false, true} {
		name := "async"
		if blocking {
			name = "blocking"
		}
		b.Run(name, func(b *testing.B) {
			r, err := Run(context.Background(), Config{Inputs: max(b.N, 100), Latency: model.Latency{Dist: "fixed", Mean: time.Millisecond}, Blocking: blocking})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.OverallPerSec, "inputs/s")
			b.ReportMetric(float64(r.WatermarkViolations), "violations")
		})
	}
}

// BenchmarkOverhead measures the operator's CPU per action against the
// hand-written loop, with zero latency.
func BenchmarkOverhead(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var c CPU
			for b.Loop() {
				var err error
				if c, err = MeasureCPU(context.Background(), Config{Inputs: n, Latency: model.Latency{Dist: "fixed"}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(c.AgentMicros, "agent-µs/input")
			b.ReportMetric(c.LoopMicros, "loop-µs/input")
			b.ReportMetric(c.Overhead(), "overhead-µs/action")
		})
	}
}

// discard is a span exporter that drops what it gets: the cost measured is
// the operator's and the SDK's, not an exporter's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracing measures the operator's CPU per input (zero model
// latency, one action and one model call per input) without tracing and
// with a tracer provider sampling nothing, 1% and every input (spans
// batched to an exporter that drops them).
func BenchmarkTracing(b *testing.B) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"off", nil}, {"sampled-none", sdktrace.NeverSample()}, {"sampled-1pct", sdktrace.TraceIDRatioBased(0.01)}, {"sampled-all", sdktrace.AlwaysSample()}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := Config{Inputs: 20_000, Latency: model.Latency{Dist: "fixed"}}
			var tp *sdktrace.TracerProvider
			if c.sampler != nil {
				tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithBatcher(discard{}))
				defer tp.Shutdown(context.Background())
				cfg.TracerProvider = tp
			}
			var cpu CPU
			for b.Loop() {
				var err error
				if cpu, err = MeasureCPU(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(cpu.AgentMicros, "agent-µs/input")
		})
	}
}
