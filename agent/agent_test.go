package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirproject/weir/agent/model"
	"github.com/weirproject/weir/state"
)

func TestCompileRejectsBadAgents(t *testing.T) {
	run := func(*RunnerContext, Event) error { return nil }
	cases := []struct {
		name string
		a    *Agent
		want string
	}{
		{"nil", nil, "nil agent"},
		{"no actions", &Agent{}, "no actions"},
		{"no name", &Agent{Actions: []Action{{On: []string{TypeInput}, Run: run}}}, "has no name"},
		{"duplicate", &Agent{Actions: []Action{NewAction("a", run, TypeInput), NewAction("a", run, "x")}}, "two actions are named"},
		{"no run", &Agent{Actions: []Action{{Name: "a", On: []string{TypeInput}}}}, "no Run"},
		{"no types", &Agent{Actions: []Action{NewAction("a", run)}}, "listens to no event type"},
		{"output", &Agent{Actions: []Action{NewAction("a", run, TypeOutput)}}, "output events leave"},
		{"nil model", &Agent{Actions: []Action{NewAction("a", run, TypeInput)}, Models: map[string]model.ChatModel{"m": nil}}, `model "m" is nil`},
	}
	for _, c := range cases {
		if _, err := compile(c.a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	c, err := compile(&Agent{Actions: []Action{NewAction("a", run, TypeInput, "x"), NewAction("b", run, "x")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.byType["x"]; len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("listeners of x: %v", got)
	}
}

// TestKeyStateCodecKeepsTheInputInProgress: the input in progress is
// checkpointed with its value, so that a restored input whose action then
// fails reaches FailedInputs with its value (G8), not nil; a
// checkpoint without it (written before it was added) takes the value
// from the input's task. Found by the simulator (internal/sim, seed 17
// with the agent branch: a dead letter without its input).
func TestKeyStateCodecKeepsTheInputInProgress(t *testing.T) {
	run := func(*RunnerContext, Event) error { return nil }
	def, _ := compile(&Agent{Actions: []Action{NewAction("a", run, TypeInput)}})
	codec := keyStateCodec[string, msg]{def: def, in: state.JSONCodec[msg]()}
	in := msg{Key: "K", Text: "late", N: 7}
	r := &runState{seq: 2, ts: 9, nextID: 1}
	r.input = Event{Type: TypeInput, Value: in, Parent: -1}
	r.tasks = []task{{ev: &r.input, action: 0}}
	b, err := codec.Append(nil, &keyState[string, msg]{key: "K", run: r})
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.run.input.Value.(msg); !ok || v != in || got.run.input.Type != TypeInput {
		t.Fatalf("restored input %+v (value %T), want %+v", got.run.input, got.run.input.Value, in)
	}
	// The form before: no "input" in the run.
	old := strings.Replace(string(b), `"input":`, `"inputGone":`, 1)
	if old == string(b) {
		t.Fatalf("no input in %s", b)
	}
	got, err = codec.Decode([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.run.input.Value.(msg); !ok || v != in {
		t.Fatalf("restored input from the older form %+v (value %T), want %+v", got.run.input, got.run.input.Value, in)
	}
}

func TestConfig(t *testing.T) {
	c := Config{"s": "v", "i": 3, "f": 2.0, "obj": map[string]any{"key": "k"}}
	if c.String("s", "d") != "v" || c.String("x", "d") != "d" || c.Int("i", 0) != 3 || c.Int("f", 0) != 2 || c.Int("s", 9) != 9 {
		t.Fatal("typed getters")
	}
	var m msg
	if ok, err := c.Decode("obj", &m); !ok || err != nil || m.Key != "k" {
		t.Fatalf("Decode: %v %v %+v", ok, err, m)
	}
	if _, err := c.Decode("s", &m); err == nil {
		t.Fatal("string decoded into a struct")
	}
}

func TestKeyStateCodecRoundTrip(t *testing.T) {
	run := func(*RunnerContext, Event) error { return nil }
	def, _ := compile(&Agent{Actions: []Action{NewAction("a", run, TypeInput), NewAction("b", run, "x")}})
	codec := keyStateCodec[string, msg]{def: def, in: state.JSONCodec[msg]()}
	ev := &Event{Type: "x", Attrs: map[string]any{"n": 1}, ID: 3, Parent: 0, Action: "a"}
	ks := &keyState[string, msg]{nextSeq: 5, memory: map[string]json.RawMessage{"m": json.RawMessage(`1`)}, key: "K",
		pending: []pendingInput[msg]{{value: msg{Key: "gone"}}, {value: msg{Key: "K", N: 9}, ts: 77}}, head: 1,
		run: &runState{seq: 4, ts: 70, nextID: 4, thead: 1, tasks: []task{{}, {ev: ev, action: 1}, {ev: ev, action: 0}}}}
	b, err := codec.Append(nil, ks)
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.nextSeq != 5 || string(got.memory["m"]) != "1" || len(got.pending) != 1 || got.pending[0].value.N != 9 || got.pending[0].ts != 77 {
		t.Fatalf("decoded %+v", got)
	}
	r := got.run
	if r.seq != 4 || r.ts != 70 || r.nextID != 4 || len(r.tasks) != 2 || r.tasks[0].action != 1 || r.tasks[1].action != 0 || r.tasks[0].ev != r.tasks[1].ev || r.tasks[0].ev.ID != 3 {
		t.Fatalf("decoded run %+v", r)
	}
	if r.input.Value != nil {
		t.Fatalf("restored input %+v from a run without one", r.input)
	}
	// A restore with an agent that lost action "b" says what to do.
	def2, _ := compile(&Agent{Actions: []Action{NewAction("a", run, TypeInput)}})
	if _, err := (keyStateCodec[string, msg]{def: def2, in: state.JSONCodec[msg]()}).Decode(b); err == nil || !strings.Contains(err.Error(), `action "b"`) {
		t.Fatalf("missing action: %v", err)
	}
}
