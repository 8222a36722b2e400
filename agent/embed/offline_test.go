package embed

import (
	"context"
	"math"
	"testing"

	"pgregory.net/rapid"
)

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestOfflineSharesWords(t *testing.T) {
	o := &Offline{}
	vs, err := o.Embed(context.Background(), []string{
		"Kafka brokers store partitions on disk",
		"How do Kafka brokers store partitions?",
		"Pebble compacts its LSM tree",
		"the and of",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs[0]) != DefaultOfflineDimensions {
		t.Fatalf("dimension %d, want %d", len(vs[0]), DefaultOfflineDimensions)
	}
	if near, far := dot(vs[0], vs[1]), dot(vs[1], vs[2]); near <= far || near < 0.5 {
		t.Fatalf("cosine of texts sharing words %.3f, of unrelated ones %.3f", near, far)
	}
	if n := dot(vs[3], vs[3]); n != 0 {
		t.Fatalf("a text of function words only has norm² %v, want the zero vector", n)
	}
	other, _ := (&Offline{Seed: 1}).Embed(context.Background(), []string{"Kafka brokers store partitions on disk"})
	if dot(other[0], vs[0]) > 0.999 {
		t.Fatalf("another seed gives the same vector")
	}
}

// I4: the vector depends only on the text, dimension and seed;
// it has unit length or is zero; case and punctuation do not matter.
func TestOfflineProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := &Offline{Dimensions: rapid.IntRange(1, 64).Draw(t, "dim"), Seed: rapid.Int64().Draw(t, "seed")}
		text := rapid.StringMatching(`[A-Za-z0-9 ,.!?]{0,60}`).Draw(t, "text")
		a, b := o.Vector(text), o.Vector(text)
		n := dot(a, a)
		if n != 0 && math.Abs(n-1) > 1e-5 {
			t.Fatalf("norm² %v", n)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("not deterministic")
			}
		}
		c := (&Offline{Dimensions: o.Dimensions, Seed: o.Seed}).Vector("  " + text + "!")
		for i := range a {
			if math.Abs(float64(a[i]-c[i])) > 1e-6 {
				t.Fatalf("punctuation changed the vector")
			}
		}
	})
	if _, err := (&Offline{Dimensions: -1}).Embed(context.Background(), []string{"x"}); err == nil {
		t.Fatal("negative dimension accepted")
	}
}
