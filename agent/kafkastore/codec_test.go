package kafkastore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
)

var codecStrings = []string{"", "a", "key", "é", "日本", "\"", "\\", "\n", "\x00", "<", "&", "\u2028", "\xff", "\xe2\x80", "😀"}

func genString(t *rapid.T, label string) string {
	var sb strings.Builder
	for n := rapid.IntRange(0, 3).Draw(t, label+"-n"); n > 0; n-- {
		sb.WriteString(rapid.SampledFrom(codecStrings).Draw(t, label))
	}
	return sb.String()
}

// genRaw returns a json.RawMessage: nil, empty, valid (compact or not) or
// invalid.
func genRaw(t *rapid.T, label string) json.RawMessage {
	s := rapid.SampledFrom([]string{"<nil>", "", `null`, `{"a":1}`, `{ "a" : [1, 2] }`, `"<b>&"`, "\"\u2028\"",
		`[true,false,null]`, "\"\xff\"", `{"a":`, `nope`, `1.5e3`, "\n 7 \t"}).Draw(t, label)
	if s == "<nil>" {
		return nil
	}
	return json.RawMessage(s)
}

func genAny(t *rapid.T, label string) any {
	switch rapid.IntRange(0, 6).Draw(t, label+"-kind") {
	case 0:
		return nil
	case 1:
		return genString(t, label)
	case 2:
		return rapid.Float64Range(-1e30, 1e30).Draw(t, label+"-num")
	case 3:
		return map[string]any{genString(t, label+"-k"): genString(t, label+"-v"), "n": rapid.Int().Draw(t, label+"-n")}
	case 4:
		return []any{genString(t, label+"-e"), true, nil}
	case 5:
		return genRaw(t, label+"-raw")
	default:
		return struct{ A int }{rapid.Int().Draw(t, label+"-a")}
	}
}

func genMemoryWrites(t *rapid.T, label string) agent.MemoryWrites {
	var mw agent.MemoryWrites
	if rapid.Bool().Draw(t, label+"-set") {
		mw.Set = map[string]json.RawMessage{}
		for n := rapid.IntRange(0, 3).Draw(t, label+"-n"); n > 0; n-- {
			mw.Set[genString(t, label+"-k")] = genRaw(t, label+"-v")
		}
	}
	for n := rapid.IntRange(0, 2).Draw(t, label+"-del"); n > 0; n-- {
		mw.Deleted = append(mw.Deleted, genString(t, label+"-d"))
	}
	return mw
}

func genActionState(t *rapid.T) *agent.ActionState {
	st := &agent.ActionState{
		ID: agent.RunID{Seq: rapid.Int64().Draw(t, "seq"), EventID: rapid.Int64().Draw(t, "event"),
			EventType: genString(t, "type"), Action: genString(t, "action")},
		Pos:       agent.Position{Seq: rapid.Int64().Draw(t, "pseq"), EventID: rapid.Int64().Draw(t, "pev"), Action: rapid.Int().Draw(t, "pact")},
		KeyGroup:  rapid.IntRange(0, 1<<15).Draw(t, "kg"),
		Completed: rapid.Bool().Draw(t, "completed"),
		Short:     genMemoryWrites(t, "short"),
		Sensory:   genMemoryWrites(t, "sensory"),
	}
	if rapid.Bool().Draw(t, "key") {
		st.ID.Key = []byte(genString(t, "key"))
	}
	for i := range st.ID.EventDigest {
		st.ID.EventDigest[i] = rapid.Byte().Draw(t, "digest")
	}
	for n := rapid.IntRange(0, 3).Draw(t, "sent"); n > 0; n-- {
		ev := agent.Event{Type: genString(t, "ev-type"), Value: genAny(t, "value"), ID: rapid.Int64().Draw(t, "ev-id"),
			Parent: rapid.Int64().Draw(t, "ev-parent"), Action: genString(t, "ev-action")}
		if rapid.Bool().Draw(t, "attrs") {
			ev.Attrs = map[string]any{genString(t, "ak"): genAny(t, "attr")}
		}
		st.Sent = append(st.Sent, ev)
	}
	for n := rapid.IntRange(0, 3).Draw(t, "calls"); n > 0; n-- {
		st.Calls = append(st.Calls, agent.CallResult{Name: genString(t, "call"), ArgsDigest: genString(t, "args"),
			Result: genRaw(t, "result"), Error: genString(t, "error"), Failed: rapid.Bool().Draw(t, "failed"),
			Pending: rapid.Bool().Draw(t, "pending")})
	}
	return st
}

// TestStateCodecMatchesJSON: the binary encoding fails where json.Marshal
// of the state fails, and otherwise decodes to the state a JSON round
// trip gives; the JSON of earlier versions decodes too.
func TestStateCodecMatchesJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := genActionState(t)
		js, jerr := json.Marshal(st)
		b, err := appendState(nil, st)
		if (jerr != nil) != (err != nil) {
			t.Fatalf("errors differ: json %v, binary %v", jerr, err)
		}
		if err != nil {
			return
		}
		got, err := decodeState(b)
		if err != nil {
			t.Fatal(err)
		}
		if !storetest.Equal(got, st) {
			gj, _ := json.Marshal(got)
			t.Fatalf("decoded state differs:\n got %s\nwant %s", gj, js)
		}
		if fromJSON, err := decodeState(js); err != nil || !storetest.Equal(fromJSON, st) {
			t.Fatalf("the JSON form decodes to %+v, %v", fromJSON, err)
		}
		// Every strict prefix is refused, never a panic.
		for i := range b {
			if _, err := decodeState(b[:i]); err == nil {
				t.Fatalf("the first %d of %d bytes decode", i, len(b))
			}
		}
	})
}

// FuzzDecodeState: arbitrary bytes decode or fail, never panic.
func FuzzDecodeState(f *testing.F) {
	b, _ := appendState(nil, storetest.State("k", 1, 2, 3, 4, true))
	f.Add(b)
	f.Add([]byte(`{"id":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		decodeState(raw)
	})
}

// experimentState is the completed state of the agent experiment's
// action: one model call, one output.
func experimentState() *agent.ActionState {
	return &agent.ActionState{
		ID:  agent.RunID{Key: []byte("key-4242"), Seq: 3, EventType: agent.TypeInput, EventDigest: [32]byte{1, 2, 3}, Action: "answer"},
		Pos: agent.Position{Seq: 3}, KeyGroup: 17, Completed: true,
		Calls: []agent.CallResult{{Name: "chat:offline", ArgsDigest: "0123456789abcdef0123456789abcdef",
			Result: json.RawMessage(`{"message":{"role":"assistant","content":"offline answer to question 42"},"usage":{"prompt_tokens":3,"completion_tokens":6}}`)}},
		Sent: []agent.Event{{Type: agent.TypeOutput, Value: "offline answer to question 42", ID: 1, Action: "answer"}},
	}
}

// BenchmarkStateCodec compares the binary encoding with JSON (the format
// before it), encoding and decoding the agent experiment's completed
// state.
func BenchmarkStateCodec(b *testing.B) {
	st := experimentState()
	js, _ := json.Marshal(st)
	bin, _ := appendState(nil, st)
	b.Run("encode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/binary", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			if _, err := appendState(buf[:0], st); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, raw := range map[string][]byte{"json": js, "binary": bin} {
		b.Run("decode/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeState(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRestoreReadsJSONStates: a topic holding states as the JSON that
// earlier versions wrote (with their headers) restores; a later Put of the
// same run, in the binary encoding, replaces the state.
func TestRestoreReadsJSONStates(t *testing.T) {
	br := startBroker(t, t.TempDir())
	opts := options(br, newTopic(), 1)
	s := open(t, opts, all)
	m := markerOf(t, s)
	old := storetest.State("k1", 1, 0, 0, 7, true)
	js, err := json.Marshal(old)
	must(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	must(t, err)
	defer cl.Close()
	r := s.record(old.ID.Encode(), old.KeyGroup, js)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: posHeader, Value: appendPos(nil, old.Pos)})
	must(t, cl.ProduceSync(context.Background(), r).FirstErr())

	restored := open(t, opts, all)
	must(t, restored.Restore([][]byte{m}))
	got, err := restored.Get(old.ID)
	must(t, err)
	if !storetest.Equal(got, old) {
		t.Fatalf("restored %+v, want %+v", got, old)
	}
	if pos, ok := restored.Latest(old.ID.Key); !ok || pos != old.Pos {
		t.Fatalf("Latest = %v, %v", pos, ok)
	}
	updated := storetest.State("k1", 1, 0, 0, 7, true)
	updated.Calls = append(updated.Calls, agent.CallResult{Name: "second", ArgsDigest: "x", Result: json.RawMessage(`2`)})
	must(t, restored.Put(updated))
	again := open(t, opts, all)
	must(t, again.Restore([][]byte{m}))
	if got, err := again.Get(old.ID); err != nil || !storetest.Equal(got, updated) {
		t.Fatalf("after a binary Put: %+v, %v", got, err)
	}
	if _, _, n := again.Stats(); n != 1 {
		t.Fatalf("%d states, want 1", n)
	}
}
