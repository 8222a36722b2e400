// Command windows counts page views per page in one-minute tumbling windows
// and in sessions, with late views sent to a side output.
//
//	go run ./examples/windows
package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// View is one page view.
type View struct {
	Page string
	Time int64 // Unix ms
}

func main() {
	s := func(sec int64) int64 { return sec * 1000 }
	views := []View{
		{"/home", s(5)}, {"/docs", s(20)}, {"/home", s(50)}, {"/home", s(61)},
		{"/docs", s(70)}, {"/home", s(200)},
		{"/docs", s(10)}, // 3 minutes late: its window has closed
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	// Every view moves event time to 5 s before it (a punctuated watermark),
	// so the last view, 3 minutes behind, arrives after its window closed.
	strategy := watermark.ForGenerator(func() watermark.Generator[View] {
		return watermark.Punctuated(func(_ View, ts int64) (int64, bool) { return ts - 5000, true })
	}).WithTimestamp(func(v View, _ int64) (int64, bool) { return v.Time, true })
	src := weir.FromSlice(env, "views", views, strategy)
	byPage := weir.KeyBy(src, func(v View) string { return v.Page })
	late := weir.NewOutputTag[View]("late-views")
	count := window.AggregateFuncs[View, int, int]{
		AddFn:    func(_ View, n int) int { return n + 1 },
		ResultFn: func(n int) int { return n },
		MergeFn:  func(a, b int) int { return a + b },
	}
	perMinute := window.AggregateKeyed(byPage, "views-per-minute", window.Tumbling(time.Minute), count, window.LateOutput(late))
	sessions := window.AggregateKeyed(byPage, "sessions", window.Session(30*time.Second), count)
	minutes := weir.Collect(perMinute)
	sess := weir.Collect(sessions)
	lateViews := weir.Collect(weir.SideOutput(perMinute, late))
	if err := env.Execute(context.Background()); err != nil {
		log.Fatal(err)
	}
	print := func(title string, rs []window.Result[string, int]) {
		var lines []string
		for _, r := range rs {
			lines = append(lines, fmt.Sprintf("  %-6s %v: %d", r.Key, r.Window, r.Value))
		}
		slices.Sort(lines)
		fmt.Println(title)
		for _, l := range lines {
			fmt.Println(l)
		}
	}
	print("views per minute:", minutes.Values())
	print("sessions (30 s gap):", sess.Values())
	fmt.Println("late views:", lateViews.Values())
}
