package window_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

type reading struct {
	Sensor string
	TS     int64 // Unix ms
	Value  float64
}

func readingStrategy() watermark.Strategy[reading] {
	return watermark.ForBoundedOutOfOrderness[reading](time.Second).
		WithTimestamp(func(r reading, _ int64) (int64, bool) { return r.TS, true })
}

// Count windows: the sum of every 3 readings of a sensor (Flink's
// countWindow(3)). The last incomplete window (s1's 7th reading) is not
// emitted.
func ExampleCountTumbling() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	var rs []reading
	for i := range 7 {
		rs = append(rs, reading{"s1", int64(i) * 1000, float64(i + 1)})
	}
	src := weir.FromSlice(env, "readings", rs, readingStrategy())
	sums := window.Reduce(weir.KeyBy(src, func(r reading) string { return r.Sensor }), "sum-of-3",
		window.CountTumbling(3), func(a, b reading) reading { a.Value += b.Value; return a })
	out := weir.Collect(sums)
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	for _, r := range out.Values() {
		fmt.Println(r.Sensor, r.Value)
	}
	// Output:
	// s1 6
	// s1 15
}

// Sliding count windows: every 2 readings, the average of the last 3
// (Flink's countWindow(3, 2)): CountTrigger(2) with CountEvictor(3).
func ExampleCountSliding() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	var rs []reading
	for i := range 6 {
		rs = append(rs, reading{"s1", int64(i) * 1000, float64(10 * (i + 1))})
	}
	src := weir.FromSlice(env, "readings", rs, readingStrategy())
	avg := window.Aggregate(weir.KeyBy(src, func(r reading) string { return r.Sensor }), "moving-average",
		window.CountSliding(3, 2), window.AggregateFuncs[reading, [2]float64, float64]{
			AddFn:    func(r reading, acc [2]float64) [2]float64 { return [2]float64{acc[0] + r.Value, acc[1] + 1} },
			ResultFn: func(acc [2]float64) float64 { return acc[0] / acc[1] },
		})
	out := weir.Collect(avg)
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(out.Values())
	// Output:
	// [15 30 50]
}

type view struct {
	User, Page string
	TS         int64 // Unix ms
}

// buyTrigger is a custom trigger: a window fires (and starts over) at each
// "buy" view, and otherwise as EventTimeTrigger does, at its end. It
// reads the record with window.Element.
type buyTrigger struct{ window.Trigger }

func (b buyTrigger) OnElement(ts int64, w window.Window, ctx *window.TriggerContext) window.TriggerResult {
	if window.Element[view](ctx).Page == "buy" {
		return window.FireAndPurge
	}
	return b.Trigger.OnElement(ts, w, ctx)
}

// A custom trigger: the pages a user viewed per hour, reported at every
// purchase and at the end of the hour.
func ExampleWithTrigger() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	views := []view{{"ann", "home", 1_000}, {"ann", "shoes", 2_000}, {"ann", "buy", 3_000},
		{"ann", "hats", 4_000}, {"bob", "home", 5_000}}
	src := weir.FromSlice(env, "views", views, watermark.ForBoundedOutOfOrderness[view](time.Second).
		WithTimestamp(func(v view, _ int64) (int64, bool) { return v.TS, true }))
	paths := window.Process(weir.KeyBy(src, func(v view) string { return v.User }), "paths",
		window.Tumbling(time.Hour), func(user string, _ window.Window, vs []view, emit func(string)) error {
			var pages []string
			for _, v := range vs {
				pages = append(pages, v.Page)
			}
			emit(user + ": " + strings.Join(pages, " > "))
			return nil
		}, window.WithTrigger(buyTrigger{window.EventTimeTrigger()}))
	out := weir.Collect(paths)
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	lines := out.Values()
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// ann: hats
	// ann: home > shoes > buy
	// bob: home
}

// An evictor: per sensor and minute, the maximum over the readings of the
// minute's last 10 seconds only (TimeEvictor keeps the records within 10s
// of the latest one).
func ExampleWithEvictor() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	rs := []reading{{"s1", 5_000, 90}, {"s1", 48_000, 20}, {"s1", 55_000, 30}, {"s1", 59_000, 25}}
	src := weir.FromSlice(env, "readings", rs, readingStrategy())
	peak := window.Reduce(weir.KeyBy(src, func(r reading) string { return r.Sensor }), "late-peak",
		window.Tumbling(time.Minute), func(a, b reading) reading {
			if b.Value > a.Value {
				return b
			}
			return a
		}, window.WithEvictor(window.TimeEvictor(10*time.Second)))
	out := weir.Collect(peak)
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	for _, r := range out.Values() {
		fmt.Println(r.Sensor, r.Value, r.TS)
	}
	// Output:
	// s1 30 55000
}
