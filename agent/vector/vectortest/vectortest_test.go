package vectortest

import (
	"testing"

	"github.com/weirproject/weir/agent/vector"
)

// TestFlat runs the suite on the embedded store.
func TestFlat(t *testing.T) {
	Run(t, func(_ *testing.T, dim int) vector.Store { return vector.NewFlat(dim) })
}
