package model

import (
	"math"
	"strings"
	"testing"
)

func TestPricing(t *testing.T) {
	p := Pricing{"gpt-4o-mini": {Input: 0.15, Output: 0.60}, "model": {Input: 3, Output: 15}}
	u := Usage{PromptTokens: 2_000_000, CompletionTokens: 500_000}
	pr, ok := p.Of("gpt-4o-mini", "model")
	if !ok || math.Abs(pr.Cost(u)-0.6) > 1e-9 || pr.Micros(u) != 600_000 {
		t.Fatalf("gpt-4o-mini: %v %v cost %v micros %d, want 0.6 and 600000", pr, ok, pr.Cost(u), pr.Micros(u))
	}
	// A reply whose model has no price falls back to the caller's name.
	if pr, ok := p.Of("claude-x", "model"); !ok || pr.Input != 3 {
		t.Fatalf("fallback: %v %v", pr, ok)
	}
	if _, ok := p.Of("claude-x", "other"); ok {
		t.Fatal("an unknown model has a price")
	}
	if _, ok := Pricing(nil).Of("", ""); ok {
		t.Fatal("a nil table has a price")
	}
	if err := (Pricing{"m": {Input: -1}}).Validate(); err == nil || !strings.Contains(err.Error(), `Pricing["m"].Input -1`) {
		t.Fatalf("Validate: %v", err)
	}
	if err := (Pricing{"m": {Output: math.NaN()}}).Validate(); err == nil {
		t.Fatal("NaN accepted")
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}
