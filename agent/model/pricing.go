package model

import (
	"fmt"
	"math"
	"sort"
)

// Price is what a model's tokens cost, in one currency (the same for a
// whole Pricing) per million tokens: prompt (Input) and completion
// (Output) tokens, as the providers' price lists give them.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// Pricing is a price table: model name to Price. A reply is priced by the
// model that answered (Response.Model, as the server names it, such as
// gpt-4o-mini-2024-07-18), else by the name the caller gives (Cost's
// fallback, for an agent its name in Agent.Models). The zero value (nil)
// prices nothing.
type Pricing map[string]Price

// Validate reports prices that are negative or not finite.
func (p Pricing) Validate() error {
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pr := p[n]
		for _, v := range []struct {
			what string
			v    float64
		}{{"Input", pr.Input}, {"Output", pr.Output}} {
			if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
				return fmt.Errorf("model: Pricing[%q].%s %v: want a price per million tokens of 0 or more", n, v.what, v.v)
			}
		}
	}
	return nil
}

// Of returns the price of a reply of the model named answered (else
// fallback) and whether the table has one.
func (p Pricing) Of(answered, fallback string) (Price, bool) {
	if pr, ok := p[answered]; ok && answered != "" {
		return pr, true
	}
	pr, ok := p[fallback]
	return pr, ok && fallback != ""
}

// Cost is what usage u costs at pr, in the table's currency.
func (pr Price) Cost(u Usage) float64 {
	return (float64(u.PromptTokens)*pr.Input + float64(u.CompletionTokens)*pr.Output) / 1e6
}

// Micros is Cost in millionths of the currency, rounded: an integer for
// counters (a token at a price per million is that many micros).
func (pr Price) Micros(u Usage) int64 {
	return int64(math.Round(float64(u.PromptTokens)*pr.Input + float64(u.CompletionTokens)*pr.Output))
}
