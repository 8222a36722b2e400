package sim

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestAgentNotifySeedsAreDrawn: half the agent seeds make notify calls in
// a second action, and the draw changed nothing else of a seed.
func TestAgentNotifySeedsAreDrawn(t *testing.T) {
	agents, notify := 0, 0
	for seed := uint64(1); seed <= fixedSeeds; seed++ {
		s := Generate(seed)
		if s.Agent == nil {
			continue
		}
		agents++
		if strings.Contains(s.Agent.moreShape(), "notify") {
			notify++
		}
	}
	if notify == 0 || notify == agents {
		t.Fatalf("%d of %d agent seeds make notify calls", notify, agents)
	}
	t.Logf("%d of %d agent seeds make notify calls", notify, agents)
}

// TestAgentNotifyOracleByHand: a decision's effect names every call, and
// a committed decision needs every call to have taken effect.
func TestAgentNotifyOracleByHand(t *testing.T) {
	rec := func(key string, id int64) Step { return Step{Kind: StepRecord, Key: key, TS: id, ID: id} }
	s := &Spec{Splits: 1, WindowMS: 10, Records: 1, Steps: []Step{rec("a", 0)},
		Agent: &AgentSpec{Every: 1, Inputs: []AgentInput{{Verdict: "approve", Prompt: 1, Completion: 2, Notify: 2}}}}
	good := []string{"A a id=0 verdict=approve tokens=3 effect=applied-0-approve+notified-0-1+notified-0-2"}
	w := newAgentWorld(s.Agent)
	w.begin(1)
	w.request(1, callRef{0, "tool"}, strings.Repeat("1", 32), true, true)
	w.request(1, notifyRef(0, 1), strings.Repeat("2", 32), true, true)
	if f := checkAgentOutput(s, w, good); f == nil || f.Invariant != InvAgentEffects {
		t.Fatalf("a decision whose second notify call never took effect: %v", f)
	}
	w.request(1, notifyRef(0, 2), strings.Repeat("3", 32), true, true)
	if f := checkAgentOutput(s, w, good); f != nil {
		t.Fatalf("a right output fails: %v %q", f, f.Records)
	}
	if f := checkAgentOutput(s, w, []string{"A a id=0 verdict=approve tokens=3 effect=applied-0-approve+notified-0-1"}); f == nil {
		t.Fatal("a decision missing a notify call's effect passes")
	}
	// The first notify call took effect while the apply call's result
	// was not durable: two calls of one input in the window (S11).
	if f := w.failure(); f == nil || f.Invariant != InvAgentEffects || !strings.Contains(f.Detail, "not durable") {
		t.Fatalf("calls in the window: %v", f)
	}
}

// TestSeedsFromEnv runs the seeds WEIR_SIM_SEEDS names (comma-separated),
// for working on the simulator.
func TestSeedsFromEnv(t *testing.T) {
	v := os.Getenv("WEIR_SIM_SEEDS")
	if v == "" {
		t.Skip("set WEIR_SIM_SEEDS")
	}
	for _, f := range strings.Split(v, ",") {
		seed, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), seed, Options{SkipKafka: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %s; %d attempts: %v", seed, res.Shape, res.Attempts, res.Failure)
		if res.Failure != nil {
			t.Errorf("seed %d: %v %q", seed, res.Failure, res.Failure.Records)
		}
	}
}
