package runtime_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// TestCountsPublishedWhenAJobIsStopped: the record counters that tasks
// keep to themselves between publications (a source's records read, a
// chained or channel input's records in) are published when the task ends
// by a stop, not only at the end of its input or at a buffer time-out:
// after a cancelled run the metrics equal what the operators saw. A stopped
// `weir run` prints its summary from them.
func TestCountsPublishedWhenAJobIsStopped(t *testing.T) {
	// No periodic flush within the test (an hour's buffer time-out): only the
	// end of the tasks publishes.
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: noTicks, BufferTimeout: time.Hour})
	var mapped, seen atomic.Int64
	src := weir.Generate(env, "numbers", -1, func(i int64) weir.Record[int64] {
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.ForMonotonous[int64]())
	doubled := weir.Map(src, "double", func(v int64) int64 { mapped.Add(1); return 2 * v })
	after := weir.Map(weir.Rebalance(doubled), "after", func(v int64) int64 { seen.Add(1); return v })
	weir.ToSink(after, "drop", func(*runtime.Context) (weir.SinkWriter[int64], error) {
		return weir.SinkFunc[int64](func(weir.Record[int64]) error { return nil }), nil
	})
	job, stop := weirtest.Start(t, env)
	weirtest.Eventually(t, "records past the exchange", func() bool { return seen.Load() > 50_000 })
	stop()
	m := job.Metrics()
	if got, want := m.Sum("double", "recordsIn"), mapped.Load(); got != want {
		t.Errorf("double: recordsIn %d, the function saw %d", got, want)
	}
	if got, want := m.Sum("numbers", "recordsRead"), mapped.Load(); got != want {
		t.Errorf("numbers: recordsRead %d, the chained function saw %d", got, want)
	}
	if got, want := m.Sum("after", "recordsIn"), seen.Load(); got != want {
		t.Errorf("after: recordsIn %d, the function saw %d", got, want)
	}
}
