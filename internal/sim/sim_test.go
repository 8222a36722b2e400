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
	for seed := uint64(1); seed <= fixedSeeds; seed++ {
		res, err := Run(context.Background(), seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if f := res.Failure; f != nil {
			t.Errorf("seed %d (%s; faults %s): %v %q\nreplay: %s", seed, res.Shape, FaultSchedule(res.Faults), f, f.Records, res.Replay)
		}
		restores += res.Restores
		for _, f := range res.Faults {
			if f.Struck {
				struck++
			}
		}
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
