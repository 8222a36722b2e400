package asyncio_test

import (
	"context"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/asyncio"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// A watermark arriving behind a running call is held back, and the gauges
// say so (how many, since when) until the call returns.
func TestHeldWatermarkGauges(t *testing.T) {
	release := make(chan struct{})
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "numbers", []int64{1, 2, 3}, watermark.ForMonotonous[int64]().
		WithTimestamp(func(v int64, _ int64) (int64, bool) { return v, true }))
	out := weir.Collect(asyncio.Ordered(src, "lookup", func(ctx context.Context, v int64) ([]int64, error) {
		if v == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []int64{v}, nil
	}, asyncio.Options{}))
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := job.Metrics()
	gauge := func(name string) int64 {
		for _, x := range m.Snapshot() {
			if x.Operator == "lookup" && x.Name == name {
				return x.Value
			}
		}
		return -2
	}
	weirtest.Eventually(t, "a held watermark", func() bool { return gauge(asyncio.MetricHeldWatermarks) >= 1 })
	if since := gauge(asyncio.MetricOldestHeldSince); since <= 0 {
		t.Errorf("%s = %d while a watermark is held, want its queueing time", asyncio.MetricOldestHeldSince, since)
	}
	close(release)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(out.Values()) != 3 {
		t.Errorf("%d records out, want 3", len(out.Values()))
	}
	if h, since := gauge(asyncio.MetricHeldWatermarks), gauge(asyncio.MetricOldestHeldSince); h != 0 || since != -1 {
		t.Errorf("after the end: held %d since %d, want 0 and -1", h, since)
	}
}
