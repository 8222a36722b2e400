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

type click struct {
	User string
	TS   int64 // Unix ms
}

func clickStrategy() watermark.Strategy[click] {
	return watermark.ForBoundedOutOfOrderness[click](time.Second).
		WithTimestamp(func(c click, _ int64) (int64, bool) { return c.TS, true })
}

// Clicks per user and minute, with the key and window in each result.
func ExampleAggregateKeyed() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	clicks := []click{{"ann", 1_000}, {"bob", 30_000}, {"ann", 59_999}, {"ann", 60_000}, {"bob", 61_000}, {"bob", 62_000}}
	src := weir.FromSlice(env, "clicks", clicks, clickStrategy())
	count := window.AggregateFuncs[click, int, int]{
		AddFn:    func(_ click, n int) int { return n + 1 },
		ResultFn: func(n int) int { return n },
	}
	perMinute := window.AggregateKeyed(weir.KeyBy(src, func(c click) string { return c.User }),
		"clicks-per-minute", window.Tumbling(time.Minute), count)
	out := weir.Collect(perMinute)
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	var lines []string
	for _, r := range out.Values() {
		lines = append(lines, fmt.Sprintf("%v %s %d", r.Window, r.Key, r.Value))
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// [0, 60000) ann 2
	// [0, 60000) bob 1
	// [60000, 120000) ann 1
	// [60000, 120000) bob 2
}

// Sessions of each user: clicks at most 10 seconds apart belong to one
// session; the function sees all of a session's clicks.
func ExampleProcess() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	clicks := []click{{"ann", 0}, {"ann", 8_000}, {"ann", 18_000}, {"ann", 40_000}, {"bob", 5_000}}
	src := weir.FromSlice(env, "clicks", clicks, clickStrategy())
	sessions := window.Process(weir.KeyBy(src, func(c click) string { return c.User }), "sessions",
		window.Session(10*time.Second), func(user string, w window.Window, cs []click, emit func(string)) error {
			emit(fmt.Sprintf("%s: %d clicks in %v", user, len(cs), w))
			return nil
		})
	out := weir.Collect(sessions)
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	lines := out.Values()
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// ann: 1 clicks in [40000, 50000)
	// ann: 3 clicks in [0, 28000)
	// bob: 1 clicks in [5000, 15000)
}

// Clicks per session with the built-in Count (sessions merge their counts).
func ExampleCount() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	clicks := []click{{"ann", 0}, {"bob", 5_000}, {"ann", 8_000}, {"ann", 18_000}, {"ann", 40_000}}
	src := weir.FromSlice(env, "clicks", clicks, clickStrategy())
	sessions := window.AggregateKeyed(weir.KeyBy(src, func(c click) string { return c.User }),
		"clicks-per-session", window.Session(10*time.Second), window.Count[click]())
	out := weir.Collect(sessions)
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	var lines []string
	for _, r := range out.Values() {
		lines = append(lines, fmt.Sprintf("%v %s %d", r.Window, r.Key, r.Value))
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// [0, 28000) ann 3
	// [40000, 50000) ann 1
	// [5000, 15000) bob 1
}
