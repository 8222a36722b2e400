package wal

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/weirproject/weir/agent"
)

// goldenLog is a log written by the store as of the format's first
// version (before the hand-written encoder): every later version must load
// it, and write the same bytes for the same operations.
const goldenLog = "testdata/v1/kg-00000-00127.wal"

// goldenStates are states with every field in use: binary and non-ASCII
// keys, digests, memory writes and deletions, sent events with attributes,
// strings that encoding/json escapes, failed and pending calls.
func goldenStates() []*agent.ActionState {
	digest := [32]byte{}
	for i := range digest {
		digest[i] = byte(i * 7)
	}
	return []*agent.ActionState{
		{
			ID:  agent.RunID{Key: []byte("user-1"), Seq: 0, EventID: 0, EventType: agent.TypeInput, EventDigest: digest, Action: "answer"},
			Pos: agent.Position{Seq: 0}, KeyGroup: 3, Completed: true,
			Short: agent.MemoryWrites{Set: map[string]json.RawMessage{"z": json.RawMessage(`{"n":1}`), "a": json.RawMessage(`"<b>&"`)}, Deleted: []string{"old"}},
			Sent: []agent.Event{
				{Type: agent.TypeOutput, Value: "answer <1> & \u2028 é\n", ID: 1, Parent: 0, Action: "answer"},
				{Type: "note", Value: map[string]any{"k": []any{1, 2.5, "x"}, "b": nil}, Attrs: map[string]any{"w": 1e21, "a": true}, ID: 2, Action: "answer"},
			},
			Calls: []agent.CallResult{{Name: "chat:offline", ArgsDigest: "00ff", Result: json.RawMessage(`{"message":{"role":"assistant","content":"hi"}}`)}},
		},
		{
			ID:  agent.RunID{Key: []byte{0, 1, 0xff, 'k'}, Seq: 1 << 40, EventID: 5, EventType: "chat_response", Action: "tool"},
			Pos: agent.Position{Seq: 1 << 40, EventID: 5, Action: 2}, KeyGroup: 127,
			Sensory: agent.MemoryWrites{Set: map[string]json.RawMessage{"s": json.RawMessage(`[1,2]`)}},
			Calls: []agent.CallResult{
				{Name: "tool:search", ArgsDigest: "abc", Error: "boom \"quoted\"", Failed: true},
				{Name: "tool:pay", ArgsDigest: "def", Pending: true},
			},
		},
		{
			ID:  agent.RunID{Key: []byte("日本"), Seq: 2, EventType: agent.TypeInput, Action: "answer"},
			Pos: agent.Position{Seq: 2}, KeyGroup: 0,
		},
		{
			ID:  agent.RunID{Key: []byte("user-1"), Seq: 1, EventType: agent.TypeInput, EventDigest: digest, Action: "answer"},
			Pos: agent.Position{Seq: 1}, KeyGroup: 3, Completed: true,
			Calls: []agent.CallResult{{Name: "chat:offline", ArgsDigest: "01", Result: json.RawMessage(`null`)}},
			Sent:  []agent.Event{agent.OutputEvent(42)},
		},
		{
			ID:  agent.RunID{Key: []byte("user-2"), Seq: 7, EventType: agent.TypeInput, Action: "answer"},
			Pos: agent.Position{Seq: 7}, KeyGroup: 64,
		},
	}
}

// writeGolden makes the golden operations on a store in dir: the states
// put, one replaced, a discard and a prune.
func writeGolden(t *testing.T, dir string) {
	t.Helper()
	s, err := Open(dir, all, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sts := goldenStates()
	for _, st := range sts {
		if err := s.Put(st); err != nil {
			t.Fatal(err)
		}
	}
	repl := *sts[2]
	repl.Completed = true
	if err := s.Put(&repl); err != nil {
		t.Fatal(err)
	}
	if err := s.DiscardFrom([]byte("user-2"), agent.Position{Seq: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune([]agent.KeySeq{{Key: []byte("user-1"), Seq: 0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenLogLoads: a log of the first format version opens, with the
// states its operations left.
func TestGoldenLogLoads(t *testing.T) {
	if os.Getenv("WAL_WRITE_GOLDEN") != "" {
		dir := t.TempDir()
		writeGolden(t, dir)
		b, err := os.ReadFile(filepath.Join(dir, filepath.Base(goldenLog)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(goldenLog), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenLog, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(goldenLog)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(goldenLog)), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir, all)
	defer s.Close()
	sts := goldenStates()
	repl := *sts[2]
	repl.Completed = true
	want := []*agent.ActionState{nil, sts[1], &repl, sts[3], nil} // 0 pruned, 4 discarded
	for i, st := range sts {
		got := get(t, s, st)
		if want[i] == nil {
			if got != nil {
				t.Fatalf("state %d came back: %+v", i, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, roundTrip(t, want[i])) {
			t.Fatalf("state %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
	if _, _, states, _ := s.Stats(); states != 3 {
		t.Fatalf("%d states, want 3", states)
	}
}

// TestGoldenLogBytes: the store writes the golden log's bytes for the
// golden operations (the format has not changed).
func TestGoldenLogBytes(t *testing.T) {
	want, err := os.ReadFile(goldenLog)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeGolden(t, dir)
	got, err := os.ReadFile(filepath.Join(dir, filepath.Base(goldenLog)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("log differs from %s:\n got %q\nwant %q", goldenLog, got, want)
	}
}

// roundTrip is st as a store returns it: through its JSON encoding.
func roundTrip(t *testing.T, st *agent.ActionState) *agent.ActionState {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var c agent.ActionState
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}
