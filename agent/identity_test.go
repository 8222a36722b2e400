package agent

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// TestRunIDUnambiguous: fields that concatenate to the same bytes give
// different encodings and hashes.
func TestRunIDUnambiguous(t *testing.T) {
	base := RunID{Key: []byte("ab"), Seq: 1, EventID: 2, EventType: "c", Action: "d"}
	variants := []RunID{
		{Key: []byte("a"), Seq: 1, EventID: 2, EventType: "bc", Action: "d"},
		{Key: []byte("ab"), Seq: 1, EventID: 2, EventType: "", Action: "cd"},
		{Key: []byte("ab"), Seq: 2, EventID: 1, EventType: "c", Action: "d"},
		{Key: []byte("ab"), Seq: 1, EventID: 2, EventType: "c", Action: "d", EventDigest: [32]byte{1}},
	}
	seen := map[string]bool{string(base.Encode()): true}
	for _, v := range variants {
		if seen[string(v.Encode())] {
			t.Fatalf("%+v encodes like another id", v)
		}
		seen[string(v.Encode())] = true
		if v.String() == base.String() || v.Equal(base) {
			t.Fatalf("%+v hashes like %+v", v, base)
		}
	}
	if !base.Equal(RunID{Key: []byte("ab"), Seq: 1, EventID: 2, EventType: "c", Action: "d"}) {
		t.Fatal("Equal is false for equal ids")
	}
}

// TestRunIDGolden pins the encoding and hash: they must never change, or
// action states recorded by an older version would not be found.
func TestRunIDGolden(t *testing.T) {
	d, err := EventDigest(Event{Type: TypeInput, Value: map[string]any{"key": "A", "text": "hi", "n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := RunID{Key: []byte("A"), Seq: 7, EventID: 0, EventType: TypeInput, EventDigest: d, Action: "chat"}
	if got, want := hex.EncodeToString(d[:]), "236bb3a310941f0a3c8af9ddab695de5615b6a07d85d4cd220ad051c1c113ea8"; got != want {
		t.Fatalf("event digest %s, want %s", got, want)
	}
	if got, want := id.String(), "3bdd291816e21acd9d1357259317ecff"; got != want {
		t.Fatalf("run id %s, want %s", got, want)
	}
	enc := hex.EncodeToString(id.Encode())
	if !strings.HasPrefix(enc, hex.EncodeToString(append([]byte{byte(len(runIDMagic))}, runIDMagic...))) {
		t.Fatalf("encoding does not start with the version tag: %s", enc)
	}
}

// TestEventDigestSurvivesRestore: an event whose attributes are Go structs
// digests like the same event after a JSON round trip (as after a
// restore), and differently from an event with other content.
func TestEventDigestSurvivesRestore(t *testing.T) {
	type payload struct {
		Zeta  string  `json:"zeta"`
		Alpha float64 `json:"alpha"`
		List  []int   `json:"list"`
	}
	live := Event{Type: "t", Value: payload{Zeta: "z", Alpha: 2, List: []int{3}}, Attrs: map[string]any{"p": payload{Zeta: "z", Alpha: 1.5, List: []int{3, 1}}, "n": 10}}
	b, err := json.Marshal(live)
	if err != nil {
		t.Fatal(err)
	}
	var restored Event
	if err := json.Unmarshal(b, &restored); err != nil {
		t.Fatal(err)
	}
	d1, err1 := EventDigest(live)
	d2, err2 := EventDigest(restored)
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Fatalf("digest changed across a JSON round trip: %x vs %x (%v %v)", d1, d2, err1, err2)
	}
	other := Event{Type: "t", Value: live.Value, Attrs: map[string]any{"p": payload{Zeta: "z", Alpha: 1.5, List: []int{1, 3}}, "n": 10}}
	if d3, _ := EventDigest(other); d3 == d1 {
		t.Fatal("different content, same digest")
	}
	if d4, _ := EventDigest(Event{Type: "u", Value: live.Value, Attrs: live.Attrs}); d4 == d1 {
		t.Fatal("different type, same digest")
	}
	if d5, _ := EventDigest(Event{Type: "t", Value: "x", Attrs: live.Attrs}); d5 == d1 {
		t.Fatal("different value, same digest")
	}
	if _, err := EventDigest(Event{Type: "t", Attrs: map[string]any{"ch": make(chan int)}}); err == nil {
		t.Fatal("no error for an attribute that is not JSON-serialisable")
	}
}

// TestAttrConversions: Attr reads live values and their JSON forms.
func TestAttrConversions(t *testing.T) {
	ev := Event{Type: "x", Attrs: map[string]any{"m": msg{Key: "k", N: 3}, "j": map[string]any{"key": "k", "n": 3.0}}}
	a, err := Attr[msg](ev, "m")
	if err != nil || a.N != 3 {
		t.Fatalf("%v %v", a, err)
	}
	b, err := Attr[msg](ev, "j")
	if err != nil || b != (msg{Key: "k", N: 3}) {
		t.Fatalf("%v %v", b, err)
	}
	if _, err := Attr[msg](ev, "missing"); err == nil || !strings.Contains(err.Error(), "has no attribute") {
		t.Fatalf("missing attribute: %v", err)
	}
	if _, err := Attr[int](ev, "m"); err == nil {
		t.Fatal("struct read as int")
	}
}
