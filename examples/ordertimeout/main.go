// Command ordertimeout alerts on orders not paid within 15 minutes of event
// time: keyed state and an event-time timer per order, deleted when the
// payment arrives.
//
//	go run ./examples/ordertimeout
package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
)

// Event is an order event.
type Event struct {
	Order string
	Type  string // "created" or "paid"
	Time  int64  // Unix ms
}

const timeout = 15 * 60 * 1000

type alerts struct {
	timerAt *state.ValueState[string, int64]
}

func (a *alerts) Open(ctx *weir.KeyedContext[string, string]) error {
	var err error
	a.timerAt, err = state.Value[string, int64](ctx.State(), "timer-at")
	return err
}

func (a *alerts) ProcessElement(e Event, ctx *weir.KeyedContext[string, string]) error {
	switch e.Type {
	case "created":
		at := e.Time + timeout
		ctx.RegisterEventTimeTimer(at)
		a.timerAt.Update(at)
	case "paid":
		if at, ok := a.timerAt.Value(); ok {
			ctx.DeleteEventTimeTimer(at)
			a.timerAt.Clear()
		}
	}
	return nil
}

func (a *alerts) OnTimer(ts int64, ctx *weir.KeyedContext[string, string]) error {
	ctx.Collect(fmt.Sprintf("order %s not paid by %s", ctx.Key(), time.UnixMilli(ts).UTC().Format("15:04")))
	a.timerAt.Clear()
	return nil
}

func main() {
	at := func(hhmm string) int64 {
		t, _ := time.Parse("15:04", hhmm)
		return t.UnixMilli()
	}
	events := []Event{
		{"o1", "created", at("12:00")},
		{"o2", "created", at("12:01")},
		{"o1", "paid", at("12:05")},
		{"o3", "created", at("12:10")},
		{"o3", "paid", at("12:20")},
		{"o4", "created", at("12:30")},
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	// One source subtask keeps each order's events in order (with several,
	// "paid" could overtake "created" of the same order: see package
	// ordering for sorting by event time).
	src := weir.FromSlice(env, "orders", events, watermark.ForBoundedOutOfOrderness[Event](time.Minute).
		WithTimestamp(func(e Event, _ int64) (int64, bool) { return e.Time, true })).Parallelism(1)
	out := weir.Collect(weir.Process(weir.KeyBy(src, func(e Event) string { return e.Order }), "timeouts",
		func() weir.KeyedProcessFunction[string, Event, string] { return &alerts{} }))
	if err := env.Execute(context.Background()); err != nil {
		log.Fatal(err)
	}
	lines := out.Values()
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}
