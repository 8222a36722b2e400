package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirproject/weir/agent"
	"pgregory.net/rapid"
)

// appendRecordModel is the record framing as written before the encoder:
// header (length, CRC-32C of type and payload, type), then the payload.
func appendRecordModel(dst []byte, typ byte, payload []byte) []byte {
	var hdr [headerLen]byte
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(payload)))
	hdr[8] = typ
	binary.LittleEndian.PutUint32(hdr[4:8], crc32.Update(crc32.Checksum(hdr[8:9], crcTable), crcTable, payload))
	dst = append(dst, hdr[:]...)
	return append(dst, payload...)
}

var encStrings = []string{"", "a", "key", "é", "日本", "\"", "\\", "/", "\n", "\t", "\b", "\f", "\r", "\x00", "\x1f", "\x7f",
	"<", ">", "&", "\u2028", "\u2029", "\ufffd", "\xff", "\xe2\x80", "😀", " "}

func genStr(t *rapid.T, label string) string {
	var sb strings.Builder
	for n := rapid.IntRange(0, 3).Draw(t, label+"-n"); n > 0; n-- {
		sb.WriteString(rapid.SampledFrom(encStrings).Draw(t, label))
	}
	return sb.String()
}

// genRawMsg returns a json.RawMessage: nil, compact, with whitespace or
// characters to HTML-escape, or invalid.
func genRawMsg(t *rapid.T, label string) json.RawMessage {
	s := rapid.SampledFrom([]string{"<nil>", "", `null`, `{"a":1}`, `{ "a" : [1, 2] }`, `"<b>&"`, `"a&b"`, `">"`, "\"\u2028\"", `"\u003c"`,
		`{"k":"a b"}`, `[true,false,null]`, "\"\xff\"", `{"a":`, `nope`, `1.5e3`, "\n 7 \t", `"\"\\"`}).Draw(t, label)
	if s == "<nil>" {
		return nil
	}
	return json.RawMessage(s)
}

func genValueAny(t *rapid.T) any {
	switch rapid.IntRange(0, 6).Draw(t, "value-kind") {
	case 0:
		return nil
	case 1:
		return genStr(t, "value")
	case 2:
		return rapid.Float64Range(-1e30, 1e30).Draw(t, "num")
	case 3:
		return map[string]any{genStr(t, "vk"): genStr(t, "vv"), "n": rapid.Int().Draw(t, "n")}
	case 4:
		return []any{genStr(t, "e"), true, nil}
	case 5:
		return genRawMsg(t, "value-raw")
	default:
		return (*int)(nil)
	}
}

func genWrites(t *rapid.T, label string) agent.MemoryWrites {
	var mw agent.MemoryWrites
	switch rapid.IntRange(0, 2).Draw(t, label+"-set") {
	case 1:
		mw.Set = map[string]json.RawMessage{}
	case 2:
		mw.Set = map[string]json.RawMessage{}
		for n := rapid.IntRange(1, 3).Draw(t, label+"-n"); n > 0; n-- {
			mw.Set[genStr(t, label+"-k")] = genRawMsg(t, label+"-v")
		}
	}
	switch rapid.IntRange(0, 2).Draw(t, label+"-del") {
	case 1:
		mw.Deleted = []string{}
	case 2:
		mw.Deleted = []string{genStr(t, label+"-d"), genStr(t, label+"-d")}
	}
	return mw
}

func genState(t *rapid.T) *agent.ActionState {
	st := &agent.ActionState{
		ID: agent.RunID{Seq: rapid.Int64().Draw(t, "seq"), EventID: rapid.Int64().Draw(t, "event"),
			EventType: genStr(t, "type"), Action: genStr(t, "action")},
		Pos:       agent.Position{Seq: rapid.Int64().Draw(t, "pseq"), EventID: rapid.Int64().Draw(t, "pev"), Action: rapid.Int().Draw(t, "pact")},
		KeyGroup:  rapid.IntRange(-1, 1<<15).Draw(t, "kg"),
		Completed: rapid.Bool().Draw(t, "completed"),
		Short:     genWrites(t, "short"),
		Sensory:   genWrites(t, "sensory"),
	}
	switch rapid.IntRange(0, 2).Draw(t, "key-kind") {
	case 1:
		st.ID.Key = []byte{}
	case 2:
		st.ID.Key = []byte(genStr(t, "key"))
	}
	for i := range st.ID.EventDigest {
		st.ID.EventDigest[i] = rapid.Byte().Draw(t, "digest")
	}
	if rapid.Bool().Draw(t, "sent-empty") {
		st.Sent = []agent.Event{}
	}
	for n := rapid.IntRange(0, 3).Draw(t, "sent"); n > 0; n-- {
		ev := agent.Event{Type: genStr(t, "ev-type"), Value: genValueAny(t), ID: rapid.Int64().Draw(t, "ev-id"),
			Parent: rapid.Int64().Draw(t, "ev-parent"), Action: genStr(t, "ev-action")}
		switch rapid.IntRange(0, 2).Draw(t, "attrs") {
		case 1:
			ev.Attrs = map[string]any{}
		case 2:
			ev.Attrs = map[string]any{genStr(t, "ak"): genValueAny(t), "b": 1}
		}
		st.Sent = append(st.Sent, ev)
	}
	for n := rapid.IntRange(0, 3).Draw(t, "calls"); n > 0; n-- {
		st.Calls = append(st.Calls, agent.CallResult{Name: genStr(t, "call"), ArgsDigest: genStr(t, "args"),
			Result: genRawMsg(t, "result"), Error: genStr(t, "error"), Failed: rapid.Bool().Draw(t, "failed"),
			Pending: rapid.Bool().Draw(t, "pending")})
	}
	return st
}

// TestRecordMatchesJSON: a put record is the framing of json.Marshal of
// the state, byte for byte, and fails where json.Marshal fails.
func TestRecordMatchesJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := genState(t)
		payload, werr := json.Marshal(st)
		e := getEncoder()
		defer putEncoder(e)
		gerr := e.record(recPut, func(b []byte) ([]byte, error) { return e.appendState(b, st) })
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ: json %v, encoder %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		if want := appendRecordModel(nil, recPut, payload); !bytes.Equal(e.buf, want) {
			t.Fatalf("record differs:\n got %q\nwant %q", e.buf, want)
		}
	})
}

// BenchmarkEncodeState compares json.Marshal (the encoding before) with
// the encoder on the states of the agent experiment: the call recorded,
// then the completed action.
func BenchmarkEncodeState(b *testing.B) {
	call := agent.CallResult{Name: "chat:offline", ArgsDigest: "0123456789abcdef0123456789abcdef",
		Result: json.RawMessage(`{"message":{"role":"assistant","content":"offline answer to question 42"},"usage":{"prompt_tokens":3,"completion_tokens":6}}`)}
	id := agent.RunID{Key: []byte("key-4242"), Seq: 3, EventType: agent.TypeInput, EventDigest: [32]byte{1, 2, 3}, Action: "answer"}
	states := map[string]*agent.ActionState{
		"call": {ID: id, Pos: agent.Position{Seq: 3}, KeyGroup: 17, Calls: []agent.CallResult{call}},
		"completed": {ID: id, Pos: agent.Position{Seq: 3}, KeyGroup: 17, Completed: true, Calls: []agent.CallResult{call},
			Sent: []agent.Event{{Type: agent.TypeOutput, Value: "offline answer to question 42", ID: 1, Action: "answer"}}},
	}
	for _, name := range []string{"call", "completed"} {
		st := states[name]
		b.Run(name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := json.Marshal(st)
				if err != nil {
					b.Fatal(err)
				}
				appendRecordModel(nil, recPut, p)
			}
		})
		b.Run(name+"/encoder", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e := getEncoder()
				if err := e.record(recPut, func(b []byte) ([]byte, error) { return e.appendState(b, st) }); err != nil {
					b.Fatal(err)
				}
				putEncoder(e)
			}
		})
	}
}

// BenchmarkPutExperimentStates is Put from 32 concurrent writers of the
// agent experiment's completed states (distinct runs), with and without
// fsync.
func BenchmarkPutExperimentStates(b *testing.B) {
	call := agent.CallResult{Name: "chat:offline", ArgsDigest: "0123456789abcdef0123456789abcdef",
		Result: json.RawMessage(`{"message":{"role":"assistant","content":"offline answer to question 42"},"usage":{"prompt_tokens":3,"completion_tokens":6}}`)}
	for _, noSync := range []bool{true, false} {
		b.Run(fmt.Sprintf("nosync=%v", noSync), func(b *testing.B) {
			s, err := Open(b.TempDir(), all, Options{NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					key := []byte(fmt.Sprintf("key-%d", i%10000))
					st := &agent.ActionState{ID: agent.RunID{Key: key, Seq: i, EventType: agent.TypeInput, EventDigest: [32]byte{byte(i)}, Action: "answer"},
						Pos: agent.Position{Seq: i}, KeyGroup: int(i % 128), Completed: true, Calls: []agent.CallResult{call},
						Sent: []agent.Event{{Type: agent.TypeOutput, Value: "offline answer to question 42", ID: 1, Action: "answer"}}}
					if err := s.Put(st); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestCompactSafe: compactSafe accepts only what json.Marshal copies as
// it is (valid, compact, nothing to escape), and accepts what json.Marshal
// writes.
func TestCompactSafe(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m []byte
		if rapid.Bool().Draw(t, "structured") {
			m = []byte(genRawJSON(t, 3))
		} else {
			m = rapid.SliceOfN(rapid.SampledFrom([]byte(`{}[],:"\/ubfnrt0123456789aeE+-.lsx <&>`+"\n\x01\xe2\x80\xa8\xff")), 0, 24).Draw(t, "bytes")
		}
		if compactSafe(m) {
			got, err := json.Marshal(json.RawMessage(m))
			if err != nil || !bytes.Equal(got, m) {
				t.Fatalf("compactSafe(%q) but json.Marshal gives %q (%v)", m, got, err)
			}
		}
		if json.Valid(m) {
			out, err := json.Marshal(json.RawMessage(m))
			if err != nil {
				t.Fatal(err)
			}
			if !compactSafe(out) {
				t.Fatalf("json.Marshal output %q not accepted", out)
			}
		}
	})
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if compactSafe([]byte(deep)) || !compactSafe([]byte(deep[1:len(deep)-1])) {
		t.Fatal("nesting limit differs from encoding/json's")
	}
}

// genRawJSON returns JSON text with whitespace, escapes and numbers in
// every form, and sometimes a defect.
func genRawJSON(t *rapid.T, depth int) string {
	ws := rapid.SampledFrom([]string{"", "", " ", "\n"}).Draw(t, "ws")
	k := rapid.IntRange(0, 6).Draw(t, "kind")
	if depth <= 0 && k >= 5 {
		k = 0
	}
	switch k {
	case 0:
		return rapid.SampledFrom([]string{`"a"`, `"\/"`, `"\u00e9"`, `"\u00E9"`, `"\uzzzz"`, `"\x"`, `"<"`, `"a&b"`, `"\u003c"`, "\"\u2028\"", "\"\xff\"", `"`, `"\""`, "\"\x01\""}).Draw(t, "str")
	case 1, 2:
		return rapid.SampledFrom([]string{"0", "-0", "01", "1.", "1.5", ".5", "1e5", "1E+5", "1e", "-", "12345678901234567890", "-1.0e-7"}).Draw(t, "num")
	case 3:
		return rapid.SampledFrom([]string{"true", "false", "null", "nul", "tru"}).Draw(t, "lit")
	case 4:
		return ws
	case 5:
		n := rapid.IntRange(0, 3).Draw(t, "n")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = ws + genRawJSON(t, depth-1) + ws
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		n := rapid.IntRange(0, 3).Draw(t, "n")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = genRawJSON(t, 0) + ws + ":" + genRawJSON(t, depth-1)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
}

// TestStoreMatchesModel: after any sequence of puts, discards, prunes and
// reopens, Get and Latest answer like a map of the states put and not
// removed.
func TestStoreMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "wal-model-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		s, err := Open(dir, all, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { s.Close() }()
		keys := []string{"a", "b", "c"}
		type run struct {
			key      string
			seq, ev  int64
			action   string
			pos      agent.Position
			complete bool
		}
		model := map[string]run{} // by id string
		mk := func(r run) *agent.ActionState {
			return &agent.ActionState{ID: agent.RunID{Key: []byte(r.key), Seq: r.seq, EventID: r.ev, EventType: "input", Action: r.action},
				Pos: r.pos, KeyGroup: 1, Completed: r.complete}
		}
		for step := rapid.IntRange(1, 40).Draw(t, "steps"); step > 0; step-- {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				k := rapid.SampledFrom(keys).Draw(t, "key")
				pos := agent.Position{Seq: rapid.Int64Range(0, 4).Draw(t, "pseq"), EventID: rapid.Int64Range(0, 2).Draw(t, "pev"), Action: rapid.IntRange(0, 2).Draw(t, "pact")}
				if err := s.DiscardFrom([]byte(k), pos); err != nil {
					t.Fatal(err)
				}
				for id, r := range model {
					if r.key == k && !r.pos.Less(pos) {
						delete(model, id)
					}
				}
			case 1:
				k := rapid.SampledFrom(keys).Draw(t, "key")
				seq := rapid.Int64Range(0, 4).Draw(t, "upto")
				if err := s.Prune([]agent.KeySeq{{Key: []byte(k), Seq: seq}}); err != nil {
					t.Fatal(err)
				}
				for id, r := range model {
					if r.key == k && r.pos.Seq <= seq {
						delete(model, id)
					}
				}
			case 2:
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if s, err = Open(dir, all, Options{NoSync: true}); err != nil {
					t.Fatal(err)
				}
			default:
				// The position may differ between puts of one run.
				r := run{key: rapid.SampledFrom(keys).Draw(t, "key"), seq: rapid.Int64Range(0, 4).Draw(t, "seq"),
					ev: rapid.Int64Range(0, 2).Draw(t, "ev"), action: rapid.SampledFrom([]string{"x", "y"}).Draw(t, "action"),
					complete: rapid.Bool().Draw(t, "complete")}
				r.pos = agent.Position{Seq: r.seq, EventID: r.ev, Action: rapid.IntRange(0, 2).Draw(t, "pact")}
				if err := s.Put(mk(r)); err != nil {
					t.Fatal(err)
				}
				model[mk(r).ID.String()] = r
			}
			for _, k := range keys {
				var want agent.Position
				ok := false
				for _, r := range model {
					if r.key == k && (!ok || want.Less(r.pos)) {
						want, ok = r.pos, true
					}
				}
				if got, gok := s.Latest([]byte(k)); gok != ok || got != want {
					t.Fatalf("Latest(%s) = %v %v, want %v %v", k, got, gok, want, ok)
				}
			}
			for _, r := range model {
				got, err := s.Get(mk(r).ID)
				if err != nil || got == nil || got.Pos != r.pos || got.Completed != r.complete {
					t.Fatalf("Get %+v = %+v (%v)", r, got, err)
				}
			}
			if _, _, n, _ := s.Stats(); n != len(model) {
				t.Fatalf("%d states, model %d", n, len(model))
			}
		}
	})
}
