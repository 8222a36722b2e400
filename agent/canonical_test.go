package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/weirproject/weir/agent/model"
	"pgregory.net/rapid"
)

// canonicalJSONModel is the reference canonical JSON (the implementation
// before the scanner): marshal, decode into generic values keeping
// numbers as written, marshal again. canonicalJSON must give its bytes.
func canonicalJSONModel(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var g any
	if err := d.Decode(&g); err != nil {
		return nil, err
	}
	return json.Marshal(g)
}

// Structs whose fields are not in key order, with keys that need escaping.
type canonUnsorted struct {
	Zeta  any     `json:"zeta"`
	Alpha any     `json:"alpha,omitempty"`
	Mid   string  `json:"mid"`
	HTML  float64 `json:"<b>&"`
	Dup   int     `json:"alpha2"`
	canonEmbedded
}

type canonEmbedded struct {
	Beta  []any           `json:"beta"`
	Raw   json.RawMessage `json:"raw,omitempty"`
	Bytes []byte          `json:"bytes,omitempty"`
}

// canonStrings are pieces of strings and keys: plain, escaped on encoding,
// HTML, line separators, non-ASCII, invalid UTF-8.
var canonStrings = []string{"", "a", "b", "z", "A", "key", "é", "日本", "\"", "\\", "/", "\n", "\t", "\b", "\f", "\r",
	"\x00", "\x1f", "\x7f", "<", ">", "&", "\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "😀", " ", "aa", "a\x00"}

func genString(t *rapid.T, label string) string {
	n := rapid.IntRange(0, 4).Draw(t, label+"-n")
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteString(rapid.SampledFrom(canonStrings).Draw(t, label))
	}
	return sb.String()
}

// rawStrings are JSON string tokens as a json.RawMessage may write them:
// escapes encoding/json would not write, upper-case hex, surrogates.
var rawStrings = []string{`"a"`, `"\/"`, `"\u0041"`, `"\u00e9"`, `"\u00E9"`, `"\u003C"`, `"\u003c"`, `"\u0026"`,
	`"\u2028"`, `"\u2029"`, `"\u001f"`, `"\u001F"`, `"\u0008"`, `"\b"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`,
	`"\ufffd"`, `"\n\t"`, `"日本"`, `"\""`, `"\\"`, `"b"`, `"a\u0000"`, `"\u0000"`, "\"\u2028\"", `""`, `"z"`,
	"\"\xff\"", "\"a\xc3\"", "\"<&>\"", "\"\x7f\""}

// genRaw returns JSON text (valid) with whitespace, duplicate and unsorted
// keys, and strings written in every way.
func genRaw(t *rapid.T, depth int) string {
	kind := rapid.IntRange(0, 5).Draw(t, "raw-kind")
	if depth <= 0 && kind >= 4 {
		kind = 0
	}
	ws := rapid.SampledFrom([]string{"", " ", "\n\t "}).Draw(t, "ws")
	switch kind {
	case 0:
		return rapid.SampledFrom(rawStrings).Draw(t, "raw-string")
	case 1:
		return rapid.SampledFrom([]string{"0", "-0", "1.50", "1e400", "-1E-7", "12345678901234567890123", "0.1e+2", "true", "false", "null"}).Draw(t, "raw-scalar")
	case 2, 3:
		return ws + rapid.SampledFrom(rawStrings).Draw(t, "raw-string") + ws
	case 4:
		n := rapid.IntRange(0, 4).Draw(t, "raw-len")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = ws + genRaw(t, depth-1) + ws
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		n := rapid.IntRange(0, 5).Draw(t, "raw-len")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = ws + rapid.SampledFrom(rawStrings).Draw(t, "raw-key") + ws + ":" + ws + genRaw(t, depth-1)
		}
		return "{" + ws + strings.Join(parts, ",") + "}"
	}
}

// genValue returns a random JSON-serialisable value; restorable limits it
// to values whose numbers survive a decode into float64 and back.
func genValue(t *rapid.T, depth int, restorable bool) any {
	max := 13
	if depth <= 0 {
		max = 7
	}
	if restorable && max == 13 {
		max = 12 // no raw messages: their numbers are written freely
	}
	switch rapid.IntRange(0, max).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		if restorable {
			return rapid.Int64Range(-1<<53, 1<<53).Draw(t, "int")
		}
		return rapid.Int64().Draw(t, "int")
	case 3:
		f := rapid.Float64().Draw(t, "float")
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0.5
		}
		return f
	case 4:
		if restorable {
			return rapid.Uint32().Draw(t, "uint")
		}
		return rapid.Uint64().Draw(t, "uint")
	case 5:
		return genString(t, "string")
	case 6:
		if restorable {
			return float64(rapid.Int32().Draw(t, "f32"))
		}
		return json.Number(rapid.SampledFrom([]string{"0", "-0", "1e400", "12345678901234567890123", "1.000"}).Draw(t, "number"))
	case 7:
		if restorable {
			return genString(t, "string")
		}
		return []byte(genString(t, "bytes"))
	case 8, 9:
		n := rapid.IntRange(0, 5).Draw(t, "map-len")
		m := make(map[string]any, n)
		for i := 0; i < n; i++ {
			m[genString(t, "key")] = genValue(t, depth-1, restorable)
		}
		return m
	case 10:
		n := rapid.IntRange(0, 4).Draw(t, "slice-len")
		s := make([]any, n)
		for i := range s {
			s[i] = genValue(t, depth-1, restorable)
		}
		return s
	case 11:
		s := canonUnsorted{Zeta: genValue(t, depth-1, restorable), Alpha: genValue(t, depth-1, restorable),
			Mid: genString(t, "mid"), HTML: float64(rapid.Int16().Draw(t, "html")), Dup: rapid.IntRange(-3, 3).Draw(t, "dup")}
		if rapid.Bool().Draw(t, "beta") {
			s.Beta = []any{genValue(t, depth-1, restorable)}
		}
		if !restorable && rapid.Bool().Draw(t, "raw") {
			s.Raw = json.RawMessage(genRaw(t, 2))
		}
		if !restorable {
			s.Bytes = []byte(genString(t, "b"))
		}
		if rapid.Bool().Draw(t, "ptr") {
			return &s
		}
		return s
	case 12:
		m := map[int]any{}
		for i := rapid.IntRange(0, 3).Draw(t, "imap-len"); i > 0; i-- {
			m[rapid.IntRange(-20, 20).Draw(t, "ikey")] = genValue(t, depth-1, restorable)
		}
		return m
	default:
		return json.RawMessage(genRaw(t, 3))
	}
}

// TestCanonicalJSONMatchesModel: the scanner gives the reference bytes
// (and fails where it fails) for every value.
func TestCanonicalJSONMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(t, 4, false)
		want, werr := canonicalJSONModel(v)
		got, gerr := canonicalJSON(v)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ: model %v, scanner %v", werr, gerr)
		}
		if !bytes.Equal(got, want) {
			in, _ := json.Marshal(v)
			t.Fatalf("input  %s\nmodel  %s\ngot    %s", in, want, got)
		}
	})
}

// TestCanonicalDigestSurvivesRestore: a value digests like its JSON
// decoding (what a restore hands back), as event and as call arguments.
func TestCanonicalDigestSurvivesRestore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(t, 4, true)
		attrs := map[string]any{genString(t, "attr"): genValue(t, 2, true)}
		live := Event{Type: "t", Value: v, Attrs: attrs}
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
			t.Fatalf("event digest changed across a JSON round trip: %x vs %x (%v %v)\n%s", d1, d2, err1, err2, b)
		}
		c1, _ := canonicalJSON(v)
		c2, _ := canonicalJSON(restored.Value)
		if !bytes.Equal(c1, c2) {
			t.Fatalf("canonical JSON changed across a JSON round trip:\n%s\n%s", c1, c2)
		}
	})
}

// TestCanonicalJSONEdges: the nesting limit of the round trip, literal
// inputs, and that EventDigest is the model's digest.
func TestCanonicalJSONEdges(t *testing.T) {
	for _, depth := range []int{maxCanonicalDepth - 1, maxCanonicalDepth, maxCanonicalDepth + 1} {
		var v any = 1
		for i := 0; i < depth; i++ {
			v = []any{v}
		}
		want, werr := canonicalJSONModel(v)
		got, gerr := canonicalJSON(v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("depth %d: model err %v, got err %v", depth, werr, gerr)
		}
	}
	for _, raw := range []string{`{"b":1,"a":2,"b":3}`, `{"a":{"d":[],"c":{}},"A":null}`, `{"\u0061":1,"a":2}`, `{"a":1,"\u0061":2}`,
		`{"\n":1,"\t":2,"\u003c":3,"<":4}`, `{"é":1,"\u00e9":2,"z":3}`, ` [ 1 , {"y" : "\/" , "x" : 2} ] `} {
		want, _ := canonicalJSONModel(json.RawMessage(raw))
		got, err := canonicalJSON(json.RawMessage(raw))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: got %s (%v), want %s", raw, got, err, want)
		}
	}
	if _, err := canonicalJSON(map[string]any{"ch": make(chan int)}); err == nil {
		t.Fatal("no error for a channel")
	}
	ev := Event{Type: "t", Value: canonUnsorted{Zeta: "z", Mid: "<m>"}, Attrs: map[string]any{"b": 1, "a": []int{2}}}
	c, err := canonicalJSONModel(struct {
		Value any            `json:"value"`
		Attrs map[string]any `json:"attrs"`
	}{ev.Value, ev.Attrs})
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(append(appendLP(nil, []byte(ev.Type)), c...))
	if got, err := EventDigest(ev); err != nil || got != want {
		t.Fatalf("EventDigest %x (%v), model %x", got, err, want)
	}
}

// BenchmarkCanonicalJSON compares the scanner with the model on the
// values it digests most: a chat request (a durable call's arguments) and
// an input event.
func BenchmarkCanonicalJSON(b *testing.B) {
	type input struct {
		Key  string `json:"key"`
		Text string `json:"text"`
	}
	values := map[string]any{
		"request": model.Request{Messages: []model.Message{model.User("question 42")}},
		"event": struct {
			Value any            `json:"value"`
			Attrs map[string]any `json:"attrs"`
		}{input{Key: "k42", Text: "question 42"}, nil},
		"map": map[string]any{"z": 1, "a": []any{"x", map[string]any{"q": true, "b": nil}}, "m": "text with \"quotes\"\n"},
	}
	for _, name := range []string{"request", "event", "map"} {
		v := values[name]
		b.Run(name+"/model", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := canonicalJSONModel(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/scanner", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := canonicalSum(nil, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventDigest is EventDigest of an input event as the operator
// sees it (a struct value, no attributes), against the model's digest.
func BenchmarkEventDigest(b *testing.B) {
	type input struct {
		Key  string `json:"key"`
		Text string `json:"text"`
	}
	ev := Event{Type: TypeInput, Value: input{Key: "k42", Text: "question 42"}}
	b.Run("model", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := canonicalJSONModel(struct {
				Value any            `json:"value"`
				Attrs map[string]any `json:"attrs"`
			}{ev.Value, ev.Attrs})
			if err != nil {
				b.Fatal(err)
			}
			sha256.Sum256(append(appendLP(nil, []byte(ev.Type)), c...))
		}
	})
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EventDigest(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRunIDEncodeAppends: appendEncode appends Encode's bytes, Encode
// allocates once, and the idempotency key is the hash of the encoding,
// position and name.
func TestRunIDEncodeAppends(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := RunID{Key: rapid.SliceOf(rapid.Byte()).Draw(t, "key"), Seq: rapid.Int64().Draw(t, "seq"), EventID: rapid.Int64().Draw(t, "ev"),
			EventType: rapid.String().Draw(t, "type"), Action: rapid.String().Draw(t, "action")}
		id.EventDigest[0] = rapid.Byte().Draw(t, "digest")
		enc := id.Encode()
		if got := id.appendEncode([]byte("x")); !bytes.Equal(got[1:], enc) {
			t.Fatalf("appendEncode %x, Encode %x", got[1:], enc)
		}
		if n := testing.AllocsPerRun(10, func() { id.Encode() }); n != 1 {
			t.Fatalf("Encode allocates %v times", n)
		}
		pos, name := rapid.IntRange(0, 1000).Draw(t, "pos"), rapid.String().Draw(t, "name")
		b := binary.AppendUvarint(bytes.Clone(enc), uint64(pos))
		h := sha256.Sum256(appendLP(b, []byte(name)))
		if got := idempotencyKey(id, pos, name); got != hex.EncodeToString(h[:16]) {
			t.Fatalf("idempotency key %s", got)
		}
	})
}
