package embed

import (
	"context"
	"fmt"
	"math"
)

// Model embeds texts. Embed returns one vector per text, in order, each of
// the model's dimension; the caller owns the returned slices. It must be
// safe for concurrent use. Errors from servers are *model.APIError.
type Model interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Func adapts a function to Model.
type Func func(ctx context.Context, texts []string) ([][]float32, error)

// Embed calls f.
func (f Func) Embed(ctx context.Context, texts []string) ([][]float32, error) { return f(ctx, texts) }

// One embeds a single text with m.
func One(ctx context.Context, m Model, text string) ([]float32, error) {
	vs, err := m.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	if len(vs) != 1 {
		return nil, fmt.Errorf("embed: model returned %d vectors for 1 text", len(vs))
	}
	return vs[0], nil
}

// Normalize scales v to unit length in place and returns it; the zero
// vector is returned unchanged.
func Normalize(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
	return v
}
