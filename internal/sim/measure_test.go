package sim

import (
	"context"
	"os"
	"testing"
)

// TestMeasureShapes prints the figures of BENCHMARKS.md (Simulation):
// seeds and simulated job-seconds (the event time a seed's workload
// spans) per CPU-second, for small jobs (under 200 records) and large ones
// (450 records or more), over seeds 1..300 run one at a time. It runs only
// with WEIR_SIM_MEASURE=1.
func TestMeasureShapes(t *testing.T) {
	if os.Getenv("WEIR_SIM_MEASURE") == "" {
		t.Skip("set WEIR_SIM_MEASURE=1 to measure")
	}
	type agg struct {
		seeds, records, attempts int
		cpu, jobSec              float64
	}
	var small, large agg
	for seed := uint64(1); seed <= 300; seed++ {
		spec := Generate(seed)
		lo, hi := int64(1<<62), int64(-1<<62)
		for _, st := range spec.Steps {
			if st.Kind == StepRecord {
				lo, hi = min(lo, st.TS), max(hi, st.TS)
			}
		}
		var a *agg
		switch {
		case spec.Records < 200:
			a = &small
		case spec.Records >= 450:
			a = &large
		default:
			continue
		}
		c0 := cpuSeconds()
		res, err := Run(context.Background(), seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		a.cpu += cpuSeconds() - c0
		a.seeds++
		a.records += spec.Records
		a.attempts += res.Attempts
		a.jobSec += float64(hi-lo) / 1000
	}
	for _, s := range []struct {
		name string
		a    agg
	}{{"small (<200 records)", small}, {"large (>=450 records)", large}} {
		a := s.a
		t.Logf("%s: %d seeds, %.1f records and %.2f attempts a seed, %.2f CPU-s: %.1f seeds per CPU-second, %.2f simulated job-seconds per CPU-second",
			s.name, a.seeds, float64(a.records)/float64(a.seeds), float64(a.attempts)/float64(a.seeds), a.cpu, float64(a.seeds)/a.cpu, a.jobSec/a.cpu)
	}
}

// TestMeasureKafka prints the Kafka form's figures (docs/reliability.md,
// Simulation): the Kafka forms of seeds 1..300 alone, on two workers. It
// runs only with WEIR_SIM_MEASURE=1.
func TestMeasureKafka(t *testing.T) {
	if os.Getenv("WEIR_SIM_MEASURE") == "" {
		t.Skip("set WEIR_SIM_MEASURE=1 to measure")
	}
	n, restores, attempts := 0, 0, 0
	sum, err := RunSeeds(context.Background(), 1, 300, 2, Options{onlyKafka: true}, func(res *Result) {
		if Generate(res.Seed).Kafka == nil {
			return
		}
		n++
		restores += res.Restores
		attempts += res.Attempts
		if res.Failure != nil {
			t.Errorf("seed %d: %v %q", res.Seed, res.Failure, res.Failure.Records)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Kafka forms of seeds 1-300: %.1f s, %.1f CPU-s: %.1f Kafka seeds/s, %.1f per CPU-second; %.2f attempts and %.2f restores a seed",
		n, sum.Seconds, sum.CPUSeconds, float64(n)/sum.Seconds, float64(n)/sum.CPUSeconds, float64(attempts)/float64(n), float64(restores)/float64(n))
}
