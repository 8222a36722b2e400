package sim

import (
	"context"
	"slices"
	"testing"
)

// TestSessionReferenceByHand checks the session oracle on a workload worked
// out by hand: gap 5ms, lateness 5ms, one split.
func TestSessionReferenceByHand(t *testing.T) {
	rec := func(key string, ts, id int64) Step { return Step{Kind: StepRecord, Key: key, TS: ts, ID: id} }
	wm := func(ts int64) Step { return Step{Kind: StepWatermark, TS: ts} }
	s := &Spec{Splits: 1, WindowMS: 1000, Session: &SessionSpec{GapMS: 5, LatenessMS: 5}, Steps: []Step{
		rec("a", 10, 1), // [10,15)
		rec("a", 20, 2), // [20,25): 15 < 20, apart
		rec("a", 15, 3), // [15,20) touches both: one session [10,25)
		wm(24),          // [10,25) fires
		rec("a", 26, 4), // [26,31): apart from [10,25), within its lateness
		rec("a", 25, 5), // [25,30) touches both: [10,31), not yet due
		wm(30),          // [10,31) fires
		rec("a", 12, 6), // inside [10,31), which has fired: fires again at once
		wm(36),          // [10,31) is gone (30+5 <= 36)
		rec("a", 3, 7),  // [3,8) joins nothing and 7+5 <= 36: late
		rec("b", 33, 8), // [33,38)
		rec("b", 30, 9), // [30,35) joins it: [30,38), fires at the end
	}}
	want := []string{
		sessionLine("a", 10, 25, 3, 6),
		sessionLine("a", 10, 31, 5, 15),
		sessionLine("a", 10, 31, 6, 21),
		sessionLateLine("a", 3, 7),
		sessionLine("b", 30, 38, 2, 17),
	}
	got := sessionReference(s)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("reference:\n%q\nwant\n%q", got, want)
	}
}

// TestSessionSeedsAreDrawn: about a third of the seeds have sessions, and
// the draw is the seed's last: a seed's other draws stay those of earlier
// versions (its Spec without the sessions is Generate's before them).
func TestSessionSeedsAreDrawn(t *testing.T) {
	n, overlap := 0, 0
	for seed := uint64(1); seed <= 300; seed++ {
		s := Generate(seed)
		if s.Session == nil {
			continue
		}
		n++
		if s.Session.Overlap {
			overlap++
		}
		if s.Session.Overlap != (s.ProcDelayMS == 0) {
			t.Fatalf("seed %d: overlap %v with processing-time timers at %dms", seed, s.Session.Overlap, s.ProcDelayMS)
		}
	}
	if n < 60 || n > 140 || overlap == 0 {
		t.Fatalf("%d of 300 seeds have sessions, %d overlapping checkpoints", n, overlap)
	}
	t.Logf("%d of 300 seeds have sessions, %d of them overlap checkpoints with processing", n, overlap)
}

// TestSessionSeedsKeepTheInvariants runs the first session seeds whose
// checkpoints overlap processing and that restore at least once.
func TestSessionSeedsKeepTheInvariants(t *testing.T) {
	ran := 0
	for seed := uint64(1); ran < 6; seed++ {
		s := Generate(seed)
		if s.Session == nil || !s.Session.Overlap || len(s.Faults) == 0 {
			continue
		}
		ran++
		res, err := Run(context.Background(), seed, Options{SkipKafka: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failure != nil {
			t.Fatalf("seed %d (%s; %s): %v %q", seed, res.Shape, res.Schedule(), res.Failure, res.Failure.Records)
		}
		t.Logf("seed %d: %d attempts, %d restores: %s", seed, res.Attempts, res.Restores, res.Shape)
	}
}
