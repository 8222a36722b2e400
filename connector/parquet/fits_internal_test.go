package parquet

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// fits (the sink's check in Write) accepts exactly the values convert
// (the writer's conversion) accepts, for every column type, optional or
// not, and values of every kind a JSON-like record holds.
func TestFitsAgreesWithConvert(t *testing.T) {
	values := rapid.OneOf(
		rapid.Just[any](nil),
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.SampledFrom([]string{"2026-12-04T10:00:00Z", "2026-12-04T10:00:00.123+01:00", "yesterday", "12", "1.5"}), func(s string) any { return s }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.SampledFrom([]float64{0, -1, 1e18, 9.3e18, -9.3e18, math.Inf(1), math.NaN(), 0.5}), func(f float64) any { return f }),
		rapid.Map(rapid.Int64(), func(i int64) any { return i }),
		rapid.Map(rapid.Int(), func(i int) any { return i }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.SampledFrom([]string{"12", "1.5", "x", "9223372036854775808", "-3"}), func(s string) any { return json.Number(s) }),
		rapid.Just[any](time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)),
		rapid.Just[any](map[string]any{"a": 1.0}),
		rapid.Just[any]([]any{1.0}),
	)
	rapid.Check(t, func(t *rapid.T) {
		f := Field{Name: "c", Type: rapid.SampledFrom(FieldTypes).Draw(t, "type"), Optional: rapid.Bool().Draw(t, "optional")}
		v := values.Draw(t, "value")
		_, err := convert(f, v)
		if got := fits(f, v); got != (err == nil) {
			t.Fatalf("fits(%+v, %T %v) = %v, convert's error: %v", f, v, v, got, err)
		}
	})
}
