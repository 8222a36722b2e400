package window

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// TestStartOfIsFloorMod checks startOf against t - floorMod(t - offset,
// size) computed without overflow, over the whole int64 range (where the
// start is an int64).
func TestStartOfIsFloorMod(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// Sizes come from a time.Duration in ms (at most ~9.2e12), far below
		// the MaxInt64/2 up to which offset%size can be subtracted safely.
		size := rapid.OneOf(rapid.Int64Range(1, 10), rapid.Int64Range(1, math.MaxInt64/2)).Draw(rt, "size")
		offset := int64(0)
		if rapid.Bool().Draw(rt, "offset?") {
			offset = rapid.Int64Range(-(size-1), size-1).Draw(rt, "offset")
		}
		ts := rapid.OneOf(rapid.Int64(), rapid.Int64Range(-100, 100),
			rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, math.MinInt64 + 1, math.MaxInt64 - 1})).Draw(rt, "t")
		d := new(big.Int).Sub(big.NewInt(ts), big.NewInt(offset))
		m := new(big.Int).Mod(d, big.NewInt(size)) // Euclidean: 0 <= m < size
		want := new(big.Int).Sub(big.NewInt(ts), m)
		if !want.IsInt64() {
			return // the window starts before math.MinInt64: no such window
		}
		if got := startOf(ts, offset, size); got != want.Int64() {
			rt.Fatalf("startOf(%d, %d, %d) = %d, want %v", ts, offset, size, got, want)
		}
	})
}
