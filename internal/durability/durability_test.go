package durability

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	MaybeRunChild()
	os.Exit(m.Run())
}

// TestCrashMatrix kills the agent job's child process at every kill point
// (one first kill per point, further kills at random points) and checks
// that every input is answered once, every output committed once, and
// every side effect asked for under one idempotency key, with repeated
// calls only where a kill fell between a call and its record.
// WEIR_DURABILITY_TRIALS sets the trials per store (default 6, one per
// kill point).
func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	trials := 6
	if v := os.Getenv("WEIR_DURABILITY_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WEIR_DURABILITY_TRIALS=%q: want an integer >= 1", v)
		}
		trials = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Trials: trials, Inputs: 60, Program: os.Args[0], Args: []string{"-test.run=^$"}, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%+v", r)
		if !r.OK() {
			t.Errorf("store %s: %+v", r.Store, r)
		}
		if r.Kills < trials {
			t.Errorf("store %s: %d kills in %d trials: the kill points were not reached", r.Store, r.Kills, trials)
		}
		if len(r.KillPoints) < 4 {
			t.Errorf("store %s: kills at %v only", r.Store, r.KillPoints)
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p))
	return len(p), nil
}
