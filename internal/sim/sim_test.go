package sim

import (
	"context"
	"slices"
	"testing"
)

// fixedSeeds is the set every `go test` runs: about 40 ms a seed.
const fixedSeeds = 60

func TestFixedSeedsKeepTheInvariants(t *testing.T) {
	restores, struck := 0, 0
	var heap0 uint64
	for seed := uint64(1); seed <= fixedSeeds; seed++ {
		if seed == 11 {
			heap0 = liveHeap() // after the caches have filled
		}
		// The Kafka forms: TestKafkaFormKeepsTheInvariants.
		res, err := Run(context.Background(), seed, Options{SkipKafka: true})
		if err != nil {
			t.Fatal(err)
		}
		if f := res.Failure; f != nil {
			t.Errorf("seed %d (%s; faults %s): %v %q\nreplay: %s", seed, res.Shape, res.Schedule(), f, f.Records, res.Replay)
		}
		restores += res.Restores
		for _, f := range res.Faults {
			if f.Struck {
				struck++
			}
		}
	}
	// S7 for a run: what the 50 seeds after the first ten keep is at most
	// a few hundred bytes each (measured: none; a leak of a job's graph
	// or state is tens of KiB a seed).
	if heap, limit := liveHeap(), heap0+(1<<20); heap > limit {
		t.Errorf("%v: the live heap grew from %d KiB to %d KiB over seeds 11-%d", InvMemory, heap0>>10, heap>>10, fixedSeeds)
	}
	// The seeds must exercise recovery, or passing proves little.
	if restores < fixedSeeds/3 || struck < fixedSeeds/3 {
		t.Fatalf("%d seeds: only %d restores from a checkpoint and %d faults struck", fixedSeeds, restores, struck)
	}
	t.Logf("%d seeds: %d faults struck, %d restores from a checkpoint", fixedSeeds, struck, restores)
}

func TestGenerateIsAFunctionOfTheSeed(t *testing.T) {
	a, b := Generate(42), Generate(42)
	if !slices.Equal(a.Steps, b.Steps) || !slices.Equal(a.Faults, b.Faults) || a.Shape() != b.Shape() {
		t.Fatal("two specs of seed 42 differ")
	}
	if c := Generate(43); slices.Equal(a.Steps, c.Steps) {
		t.Fatal("seeds 42 and 43 generate the same workload")
	}
}

// TestReferenceByHand checks the oracle on a workload worked out by hand:
// windows of 10ms, lateness 5ms, two splits.
func TestReferenceByHand(t *testing.T) {
	rec := func(split int, key string, ts, id int64) Step {
		return Step{Kind: StepRecord, Split: split, Key: key, TS: ts, ID: id}
	}
	wm := func(split int, ts int64) Step { return Step{Kind: StepWatermark, Split: split, TS: ts} }
	s := &Spec{Splits: 2, WindowMS: 10, LatenessMS: 5, Steps: []Step{
		rec(0, "a", 1, 1),
		rec(1, "a", 3, 2),
		wm(0, 20), // the minimum is still split 1's (none): nothing fires
		rec(0, "a", 12, 3),
		wm(1, 9),           // minimum 9: [0,10) fires with ids 1, 2
		rec(1, "a", 4, 4),  // joins [0,10) within its lateness: fires again
		wm(1, 14),          // minimum 14: [0,10) is gone (9+5 <= 14)
		rec(1, "a", 5, 5),  // late
		rec(1, "b", 13, 6), // [10,20) is open
	}}
	want := []string{
		lateLine("a", 5, 5),
		windowLine("a", 0, 10, 2, 3),
		windowLine("a", 0, 10, 3, 7),
		windowLine("a", 10, 20, 1, 3), // at the end, maximum watermark
		windowLine("b", 10, 20, 1, 6),
	}
	slices.Sort(want)
	if got := Reference(s); !slices.Equal(got, want) {
		t.Fatalf("reference:\n%q\nwant\n%q", got, want)
	}
}

// TestReferenceSortByHand checks the oracle's sort lines (Spec.Sort) on the
// workload of TestReferenceByHand: every record once on the sort's output,
// and those at or behind the watermark when they arrive on its
// violations output too.
func TestReferenceSortByHand(t *testing.T) {
	rec := func(split int, key string, ts, id int64) Step {
		return Step{Kind: StepRecord, Split: split, Key: key, TS: ts, ID: id}
	}
	wm := func(split int, ts int64) Step { return Step{Kind: StepWatermark, Split: split, TS: ts} }
	steps := []Step{
		rec(0, "a", 1, 1),
		wm(0, 20),          // the minimum is still split 1's (none)
		rec(1, "a", 3, 2),  // held
		wm(1, 9),           // minimum 9
		rec(1, "a", 9, 3),  // at the watermark: a violation
		rec(1, "b", 10, 4), // above it: held
		rec(0, "b", 2, 5),  // behind it: a violation
	}
	plain := &Spec{Splits: 2, WindowMS: 10, Steps: steps}
	sorted := &Spec{Splits: 2, WindowMS: 10, Steps: steps, Sort: true}
	want := append(Reference(plain),
		sortLine("a", 1, 1), sortLine("a", 3, 2), sortLine("a", 9, 3), sortLine("b", 10, 4), sortLine("b", 2, 5),
		violationLine("a", 9, 3), violationLine("b", 2, 5))
	slices.Sort(want)
	if got := Reference(sorted); !slices.Equal(got, want) {
		t.Fatalf("reference:\n%q\nwant\n%q", got, want)
	}
}

// TestSortSeedsAreDrawn: about half the seeds sort, and adding the sort
// left the workloads of earlier versions alone (the draw is a stream of
// its own).
func TestSortSeedsAreDrawn(t *testing.T) {
	n := 0
	for seed := uint64(1); seed <= fixedSeeds; seed++ {
		if Generate(seed).Sort {
			n++
		}
	}
	if n < fixedSeeds/4 || n > 3*fixedSeeds/4 {
		t.Fatalf("%d of %d seeds sort", n, fixedSeeds)
	}
	t.Logf("%d of %d seeds sort", n, fixedSeeds)
}
