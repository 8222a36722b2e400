package weir_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// order is the record type of the examples: who bought, how much, and when
// (event time, Unix ms).
type order struct {
	Customer string
	Cents    int
	TS       int64
}

// orderTime tells weir each order's event time; the watermark trails the
// largest timestamp seen by one second, so orders up to a second out of
// order are still on time.
func orderTime() watermark.Strategy[order] {
	return watermark.ForBoundedOutOfOrderness[order](time.Second).
		WithTimestamp(func(o order, _ int64) (int64, bool) { return o.TS, true })
}

var orders = []order{
	{"ann", 1200, 1_000}, {"bob", 0, 2_000}, {"ann", 800, 3_000},
	{"cid", 5000, 4_000}, {"bob", 300, 5_000}, {"ann", 1000, 6_000},
}

// A bounded job: drop empty orders, convert cents to euros, keep a running
// total per customer in keyed state, and emit each customer's total once
// event time passes the end of the day (an event-time timer). At the end of
// bounded input the watermark jumps to the end of time, so every timer fires
// and Execute returns.
func Example() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "orders", orders, orderTime())
	paid := weir.Filter(src, "paid", func(o order) bool { return o.Cents > 0 })
	euros := weir.Map(paid, "euros", func(o order) order { o.Cents /= 100; return o })

	const endOfDay = 86_400_000
	totals := weir.Process(weir.KeyBy(euros, func(o order) string { return o.Customer }), "daily-total",
		func() weir.KeyedProcessFunction[string, order, string] {
			// One function per subtask; the state handle reads and writes
			// the value of the key of the record being processed.
			var total *state.ValueState[string, int]
			return weir.ProcessFuncs[string, order, string]{
				OpenFn: func(ctx *weir.KeyedContext[string, string]) error {
					total = state.MustValue[string, int](ctx.State(), "total")
					return nil
				},
				ElementFn: func(o order, ctx *weir.KeyedContext[string, string]) error {
					sum, _ := total.Value()
					total.Update(sum + o.Cents)
					ctx.RegisterEventTimeTimer(endOfDay) // one timer per key: registering again is a no-op
					return nil
				},
				TimerFn: func(ts int64, ctx *weir.KeyedContext[string, string]) error {
					sum, _ := total.Value()
					ctx.Collect(fmt.Sprintf("%s: %d EUR", ctx.Key(), sum))
					total.Clear()
					return nil
				},
			}
		})
	out := weir.Collect(totals)

	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	// Two subtasks emit in their own order: sort for a stable printout.
	lines := out.Values()
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// ann: 30 EUR
	// bob: 3 EUR
	// cid: 50 EUR
}

// The same orders counted per customer in tumbling event-time windows of
// five seconds, with package window.
func Example_window() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "orders", orders, orderTime())
	perWindow := window.AggregateKeyed(weir.KeyBy(src, func(o order) string { return o.Customer }),
		"orders-per-5s", window.Tumbling(5*time.Second), window.Count[order]())
	out := weir.Collect(perWindow)
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
	// [0, 5000) ann 2
	// [0, 5000) bob 1
	// [0, 5000) cid 1
	// [5000, 10000) ann 1
	// [5000, 10000) bob 1
}

// Checkpoints: with a checkpoint directory and an interval, a job writes
// checkpoints while it runs and, when its bounded input ends, a final one.
// A new run restored from the latest carries on from its state: here the
// running total per customer continues over the next day's orders.
// A restore matches operators by UID, so stateful ones get one; the next
// day's source is a new operator, and AllowNonRestoredState lets the
// restore leave the first day's source position behind.
func Example_checkpoints() {
	dir, err := os.MkdirTemp("", "weir-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	run := func(day string, in []order, restoreFrom string) {
		env := weir.NewEnvironment(weir.Config{Checkpoint: runtime.CheckpointConfig{
			Dir: dir, Interval: time.Minute, RestoreFrom: restoreFrom, AllowNonRestoredState: true}})
		src := weir.FromSlice(env, "orders-"+day, in, orderTime()).UID("orders-" + day)
		totals := weir.Process(weir.KeyBy(src, func(o order) string { return o.Customer }), "running-total",
			func() weir.KeyedProcessFunction[string, order, string] {
				var total *state.ValueState[string, int]
				return weir.ProcessFuncs[string, order, string]{
					OpenFn: func(ctx *weir.KeyedContext[string, string]) error {
						total = state.MustValue[string, int](ctx.State(), "total")
						return nil
					},
					ElementFn: func(o order, ctx *weir.KeyedContext[string, string]) error {
						sum, _ := total.Value()
						total.Update(sum + o.Cents)
						ctx.Collect(fmt.Sprintf("%s %s: %d cents", day, ctx.Key(), sum+o.Cents))
						return nil
					},
				}
			}).UID("running-total")
		out := weir.Collect(totals)
		if err := env.Execute(context.Background()); err != nil {
			panic(err)
		}
		fmt.Println(strings.Join(out.Values(), "\n"))
	}

	run("mon", orders, "")
	latest, _, err := checkpoint.Latest(dir) // the final checkpoint of Monday's run
	if err != nil {
		panic(err)
	}
	run("tue", []order{{"bob", 700, 90_000_000}, {"ann", 500, 91_000_000}}, latest)
	// Output:
	// mon ann: 1200 cents
	// mon bob: 0 cents
	// mon ann: 2000 cents
	// mon cid: 5000 cents
	// mon bob: 300 cents
	// mon ann: 3000 cents
	// tue bob: 1000 cents
	// tue ann: 3500 cents
}

// A keyed function sends what it cannot use to a side output instead of
// failing the job; SideOutput makes that output a stream of its own.
func ExampleSideOutput() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "orders", orders, orderTime())
	empty := weir.NewOutputTag[order]("empty-orders")
	checked := weir.Process(weir.KeyBy(src, func(o order) string { return o.Customer }), "check",
		func() weir.KeyedProcessFunction[string, order, order] {
			return weir.ProcessFuncs[string, order, order]{
				ElementFn: func(o order, ctx *weir.KeyedContext[string, order]) error {
					if o.Cents == 0 {
						weir.SideOutputTo(ctx, empty, o)
						return nil
					}
					ctx.Collect(o)
					return nil
				},
			}
		})
	good := weir.Collect(checked)
	bad := weir.Collect(weir.SideOutput(checked, empty))
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("main:", len(good.Values()), "orders")
	fmt.Println("side:", bad.Values())
	// Output:
	// main: 5 orders
	// side: [{bob 0 2000}]
}

// A record the source cannot place in event time (here the strategy refuses
// negative timestamps) goes to the source's dead-letter output with the
// reason, not to the main stream; the job goes on.
func ExampleDeadLetters() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	strict := watermark.ForBoundedOutOfOrderness[order](time.Second).
		WithTimestamp(func(o order, _ int64) (int64, bool) { return o.TS, o.TS >= 0 })
	in := []order{{"ann", 100, 1_000}, {"bob", 200, -1}, {"cid", 300, 2_000}}
	src := weir.FromSlice(env, "orders", in, strict)
	main := weir.Collect(src)
	dead := weir.Collect(weir.DeadLetters(src))
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("main:", main.Values())
	for _, d := range dead.Values() {
		fmt.Printf("dead: from %s: %v\n", d.Source, d.Value)
	}
	// Output:
	// main: [{ann 100 1000} {cid 300 2000}]
	// dead: from orders: {bob 200 -1}
}

// ledger is a TwoPhaseCommitter that stages each transaction's lines and
// makes them visible only on Commit: with checkpointing on, a transaction is
// pre-committed with each checkpoint and committed once the checkpoint is
// complete, so output becomes visible exactly once. A real sink writes to a
// transactional destination (Kafka, a database, object storage).
type ledger struct {
	staged    map[int][]string // transaction -> lines not yet visible
	next      int
	committed *[]string // the visible output
}

func (l *ledger) Begin() (int, error) {
	l.next++
	l.staged[l.next] = nil
	return l.next, nil
}

func (l *ledger) Write(txn int, r weir.Record[order]) error {
	l.staged[txn] = append(l.staged[txn], fmt.Sprintf("txn %d: %s %d", txn, r.Value.Customer, r.Value.Cents))
	return nil
}

func (l *ledger) PreCommit(int) error { return nil } // the lines are staged already

// Commit may be called again for the same transaction after a restore; a
// transaction already committed is no longer staged, so this is idempotent.
func (l *ledger) Commit(txn int) error {
	*l.committed = append(*l.committed, l.staged[txn]...)
	delete(l.staged, txn)
	return nil
}

// Recover aborts what a failed run left open (nothing on a fresh start).
func (l *ledger) Recover(open int, ok bool) error {
	if ok {
		delete(l.staged, open)
	}
	return nil
}

// An exactly-once sink through TwoPhaseCommit. Without checkpointing, as
// here, the one transaction is pre-committed and committed at the end of
// bounded input.
func ExampleTwoPhaseCommit() {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1})
	src := weir.FromSlice(env, "orders", orders[:3], orderTime())
	var visible []string
	weir.TwoPhaseCommit(src, "ledger", func(*runtime.Context) (weir.TwoPhaseCommitter[order, int], error) {
		return &ledger{staged: map[int][]string{}, committed: &visible}, nil
	})
	if err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(strings.Join(visible, "\n"))
	// Output:
	// txn 1: ann 1200
	// txn 1: bob 0
	// txn 1: ann 800
}
