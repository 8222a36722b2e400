package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/weirproject/weir/agent"
)

// TestAgentSeedsAreDrawn: about a third of the seeds have the agent
// branch, with its faults, and adding it left the workloads and fault
// schedules of earlier versions alone (the draw is a stream of its own).
func TestAgentSeedsAreDrawn(t *testing.T) {
	n, hung, late := 0, 0, 0
	stores := map[AgentStore]int{}
	for seed := uint64(1); seed <= fixedSeeds; seed++ {
		s := Generate(seed)
		if s.Agent == nil {
			continue
		}
		n++
		stores[s.Agent.Store]++
		f := s.Agent.faults()
		hung += f[AgentHang]
		late += f[AgentLate]
		if len(s.Agent.Inputs) != s.Records || f[AgentPermanent]+f[AgentToolRejected]+f["retried"] == 0 && s.Records > 100 {
			t.Fatalf("seed %d: %s for %d records", seed, s.Agent, s.Records)
		}
	}
	if n < fixedSeeds/5 || n > fixedSeeds/2 || hung == 0 || late == 0 || stores[StoreWAL] == 0 || stores[StoreMemory] == 0 || stores[StoreKafka] == 0 {
		t.Fatalf("%d of %d seeds have the agent branch, %d hung and %d late model calls", n, fixedSeeds, hung, late)
	}
	t.Logf("%d of %d seeds have the agent branch (%d hung, %d late model calls; stores %v)", n, fixedSeeds, hung, late, stores)
}

// TestAgentOracleByHand checks S10's relation on a workload worked out by
// hand: one line per input, the decision or the dead letter its fault
// allows, a time-out only where the action saw its deadline pass.
func TestAgentOracleByHand(t *testing.T) {
	rec := func(key string, id int64) Step { return Step{Kind: StepRecord, Key: key, TS: id, ID: id} }
	s := &Spec{Splits: 1, WindowMS: 10, Records: 4, Steps: []Step{rec("a", 0), rec("a", 1), rec("b", 2), rec("b", 3)},
		Agent: &AgentSpec{Every: 1, Inputs: []AgentInput{
			{Verdict: "approve", Prompt: 1, Completion: 2},
			{Verdict: "hold", Fault: AgentLate},
			{Fault: AgentPermanent},
			{Verdict: "reject", Fault: AgentToolRejected},
		}}}
	w := newAgentWorld(s.Agent)
	good := []string{
		"A a id=0 verdict=approve tokens=3 effect=applied-0-approve",
		"D a id=1 reason=timeout",
		"D b id=2 reason=model-permanent",
		"D b id=3 reason=tool-rejected",
	}
	w.begin(1)
	w.request(1, callRef{0, "tool"}, strings.Repeat("0", 32), true, true)
	if f := checkAgentOutput(s, w, good); f != nil {
		t.Fatalf("a right output fails: %v %q", f, f.Records)
	}
	for _, bad := range [][]string{
		good[1:],                            // input 0 lost
		append(slices.Clone(good), good[0]), // input 0 twice
		append(slices.Clone(good[1:]), "D a id=0 reason=timeout"),                                  // a time-out its action never saw
		append(slices.Clone(good[:3]), "A b id=3 verdict=reject tokens=0 effect=applied-3-reject"), // a rejected call's decision
	} {
		if f := checkAgentOutput(s, w, bad); f == nil {
			t.Fatalf("output %q passes", bad)
		}
	}
	w.expire(0)
	if f := checkAgentOutput(s, w, append(slices.Clone(good[1:]), "D a id=0 reason=timeout")); f != nil {
		t.Fatalf("a time-out the action saw fails: %v", f)
	}
	// A decision whose side effect never happened.
	w2 := newAgentWorld(s.Agent)
	if f := checkAgentOutput(s, w2, good); f == nil || f.Invariant != InvAgentEffects {
		t.Fatalf("a decision without its effect: %v", f)
	}
}

// TestAgentWorldBoundsRepeats checks S11's bound on scripted requests: a
// call runs again only after a failure that struck while its outcome was
// not yet durable, once per such failure, and never under another key.
func TestAgentWorldBoundsRepeats(t *testing.T) {
	key := func(c byte) string { return strings.Repeat(string(c), 32) }
	model, tool := callRef{7, "model"}, callRef{7, "tool"}
	confirm := func(w *agentWorld, n int, keys ...string) {
		st := &agent.ActionState{}
		for _, k := range keys {
			st.Calls = append(st.Calls, agent.CallResult{Result: []byte(`"key=` + k + `"`)})
		}
		w.confirm(n, st)
	}
	// Allowed: the tool's outcome was not durable when the failure struck.
	w := newAgentWorld(&AgentSpec{})
	w.begin(1)
	w.request(1, model, key('a'), true, true)
	confirm(w, 1, key('a'))
	w.request(1, tool, key('b'), true, true)
	w.strike(&Fault{Machine: true})
	w.begin(2)
	w.request(2, tool, key('b'), true, true)
	if f := w.failure(); f != nil {
		t.Fatalf("a repeat in the window: %v", f)
	}
	for name, script := range map[string]func(w *agentWorld){
		"a repeat after the outcome was durable": func(w *agentWorld) {
			w.begin(1)
			w.request(1, tool, key('b'), true, true)
			confirm(w, 1, key('b'))
			w.strike(&Fault{})
			w.begin(2)
			w.request(2, tool, key('b'), true, true)
		},
		"a repeat without a failure": func(w *agentWorld) {
			w.begin(1)
			w.request(1, tool, key('b'), true, true)
			w.begin(2)
			w.request(2, tool, key('b'), true, true)
		},
		"a repeat in the same attempt": func(w *agentWorld) {
			w.begin(1)
			w.request(1, tool, key('b'), true, true)
			w.request(1, tool, key('b'), true, true)
		},
		"another key for the same call": func(w *agentWorld) {
			w.begin(1)
			w.request(1, tool, key('b'), false, false)
			w.request(1, tool, key('c'), true, true)
		},
		"a call without a key": func(w *agentWorld) {
			w.begin(1)
			w.request(1, tool, "", true, true)
		},
		"the tool takes effect before the model's result is durable": func(w *agentWorld) {
			w.begin(1)
			w.request(1, model, key('a'), true, true)
			w.request(1, tool, key('b'), true, true)
		},
		"a confirmation after the crash does not count": func(w *agentWorld) {
			w.begin(1)
			w.request(1, tool, key('b'), true, true)
			w.strike(&Fault{Machine: true})
			confirm(w, 1, key('b'))
			w.begin(2)
			w.request(2, tool, key('b'), true, true)
			w.strike(&Fault{Machine: true})
			w.begin(3)
			w.request(3, tool, key('b'), true, true) // allowed: a second window
			w.begin(4)
			w.request(4, tool, key('b'), true, true) // not allowed
		},
	} {
		w := newAgentWorld(&AgentSpec{})
		script(w)
		if w.failure() == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}

// TestAgentWorldTracesTheInput: a violation of S11 about an input comes
// with the input's trace: its requests, what the store reported durable,
// and the attempts' begins and strikes, in order.
func TestAgentWorldTracesTheInput(t *testing.T) {
	key := strings.Repeat("b", 32)
	w := newAgentWorld(&AgentSpec{})
	w.begin(1)
	w.request(1, callRef{7, "tool"}, key, true, true)
	w.confirm(1, &agent.ActionState{Calls: []agent.CallResult{{Name: "tool:apply", Result: []byte(`"key=` + key + `"`)}}})
	w.strike(&Fault{Kind: FaultRecord, At: 1, Struck: true})
	w.begin(2)
	w.request(1, callRef{8, "tool"}, strings.Repeat("c", 32), true, true) // a dead attempt's: not traced
	w.request(2, callRef{7, "tool"}, key, true, true)
	f := w.failure()
	if f == nil {
		t.Fatal("a repeat after the outcome was durable is not caught")
	}
	var trace []string
	for _, r := range f.Records {
		if _, text, ok := strings.Cut(r, ": "); ok && strings.HasPrefix(r, "trace ") {
			trace = append(trace, text)
		}
	}
	want := []string{
		"attempt 1 begins",
		"tool request, key " + key + ": outcome true, effect true",
		"the store reports durable: seq 0 completed false calls [\"tool:apply bbbbbbbb\"]",
		"record#1 strikes (machine crash: false)",
		"attempt 2 begins",
		"tool request, key " + key + ": outcome true, effect true",
	}
	if !slices.Equal(trace, want) {
		t.Fatalf("the trace of input 7:\n%s\nwant\n%s", strings.Join(trace, "\n"), strings.Join(want, "\n"))
	}
}

// TestAgentStoreCheck: S17 fails when the store has lost a state it
// reported durable, and not once a discard or prune of its key may have
// removed it.
func TestAgentStoreCheck(t *testing.T) {
	id := agent.RunID{Key: []byte("k"), Seq: 3, Action: "decide"}
	for _, c := range []struct {
		name  string
		after func(w *agentWorld)
		fails bool
	}{
		{"lost", func(*agentWorld) {}, true},
		{"discarded", func(w *agentWorld) { w.discarded([]byte("k"), agent.Position{Seq: 2}) }, false},
		{"discarded later", func(w *agentWorld) { w.discarded([]byte("k"), agent.Position{Seq: 4}) }, true},
		{"pruned", func(w *agentWorld) { w.pruned(1, 1, []agent.KeySeq{{Key: []byte("k"), Seq: 3}}) }, false},
		{"other key pruned", func(w *agentWorld) { w.pruned(1, 1, []agent.KeySeq{{Key: []byte("j"), Seq: 9}}) }, true},
	} {
		w := newAgentWorld(&AgentSpec{})
		w.begin(1)
		w.confirm(1, &agent.ActionState{ID: id})
		c.after(w)
		w.gotNothing(2, id)
		if f := w.failure(); (f != nil) != c.fails || f != nil && f.Invariant != InvAgentStore {
			t.Errorf("%s: failure %v, want one: %v", c.name, f, c.fails)
		}
	}
}
