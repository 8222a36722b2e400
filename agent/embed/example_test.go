package embed_test

import (
	"context"
	"fmt"

	"github.com/weirproject/weir/agent/embed"
)

// The offline model: texts sharing words are near each other.
func ExampleOffline() {
	e := &embed.Offline{Dimensions: 64}
	vs, _ := e.Embed(context.Background(), []string{"red bicycle for sale", "a red bicycle", "tax return deadline"})
	cos := func(a, b []float32) (s float32) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	fmt.Println(len(vs[0]), cos(vs[0], vs[1]) > cos(vs[0], vs[2]))
	// Output: 64 true
}
