package weir_test

import (
	"slices"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// TestCoFlatMapForwardsAtEqualParallelism: with both inputs and the
// operator at the same parallelism, subtask i of CoFlatMap gets exactly the
// records of subtask i of each input, in order (Flink's connect); with a
// rebalance, each subtask would get a round-robin share of both.
func TestCoFlatMapForwardsAtEqualParallelism(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, AutoWatermarkInterval: noTicks})
	script := func(tag string) [][]weirtest.Step[string] {
		var per [][]weirtest.Step[string]
		for sub := range 2 {
			var steps []weirtest.Step[string]
			for i := range 6 {
				steps = append(steps, weirtest.Rec(0, tag+string(rune('0'+sub))+string(rune('a'+i)), int64(i)))
			}
			per = append(per, steps)
		}
		return per
	}
	a := weir.FromSource(env, "a", weirtest.Script(script("a")), watermark.NoWatermarks[string]())
	b := weir.FromSource(env, "b", weirtest.Script(script("b")), watermark.NoWatermarks[string]())
	emit := func(v string, out func(string)) { out(v) }
	obs := weirtest.Observe(weir.CoFlatMap(a, b, "co", emit, emit))
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for sub := range 2 {
		var fromA, fromB []string
		for _, e := range obs.Events(sub) {
			if e.Kind != weirtest.RecordEvent {
				continue
			}
			v := e.Value
			if v[1] != byte('0'+sub) {
				t.Fatalf("subtask %d got %q, a record of upstream subtask %c", sub, v, v[1])
			}
			if v[0] == 'a' {
				fromA = append(fromA, v)
			} else {
				fromB = append(fromB, v)
			}
		}
		if len(fromA) != 6 || len(fromB) != 6 || !slices.IsSorted(fromA) || !slices.IsSorted(fromB) {
			t.Fatalf("subtask %d: from a %v, from b %v: want each input's 6 records in order", sub, fromA, fromB)
		}
	}
}
