package rawjson

import (
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestCompactSafe: CompactSafe accepts only valid JSON, and accepts what
// json.Marshal writes for plain values.
func TestCompactSafe(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SliceOfN(rapid.SampledFrom([]byte(`{}[],:"\/ubfnrt0123456789aeE+-.lsx <&>`+"\n\x01\xff")), 0, 24).Draw(t, "bytes")
		if CompactSafe(m) && !json.Valid(m) {
			t.Fatalf("CompactSafe(%q) but it is not valid JSON", m)
		}
		v := map[string]any{"s": rapid.StringMatching(`[a-z ]{0,8}`).Draw(t, "s"), "n": rapid.IntRange(-1000, 1000).Draw(t, "n"),
			"l": []any{true, nil, 1.5}}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !CompactSafe(out) {
			t.Fatalf("CompactSafe(%q) is false", out)
		}
	})
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if CompactSafe([]byte(deep)) || !CompactSafe([]byte(deep[1:len(deep)-1])) {
		t.Fatal("nesting limit")
	}
}

// BenchmarkValid compares CompactSafe with json.Valid on a model
// response.
func BenchmarkValid(b *testing.B) {
	m := []byte(`{"message":{"role":"assistant","content":"offline answer to question 42"},"usage":{"prompt_tokens":3,"completion_tokens":6}}`)
	b.Run("CompactSafe", func(b *testing.B) {
		for b.Loop() {
			if !CompactSafe(m) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(m) {
				b.Fatal("refused")
			}
		}
	})
}
