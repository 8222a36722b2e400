package weir_test

// End-to-end tests of event-time semantics through real jobs: the
// watermark is the minimum over active inputs and idle inputs leave it
// (package weir's I2), timers fire in order before the watermark moves on
// (I3), and the bounded-out-of-orderness boundary. Scripted sources (package
// weirtest) hold subtasks back at gates, so every assertion is made at a
// point where the job is quiescent (everything the paused sources emitted
// has been processed, which the tests learn from marker records reaching an
// observer), never after a sleep.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/internal/jobtest"
	"github.com/weirproject/weir/internal/testenv"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// hms returns h:m:s on the day of the examples, in ms.
func hms(h, m, s int) int64 { return int64(((h*60+m)*60 + s) * 1000) }

const noTicks = jobtest.NoTicks

func testCtx(t *testing.T) context.Context { return testenv.Context(t, 30*time.Second) }

var start = jobtest.Start

func must(t *testing.T, err error) { t.Helper(); jobtest.Must(t, err) }

func hasRecord[T comparable](v T) func(weir.Record[T]) bool {
	return func(r weir.Record[T]) bool { return r.Value == v }
}

// controls returns the watermarks and statuses of events, as strings.
func controls[T any](evs []weirtest.Event[T]) []string {
	var out []string
	for _, e := range evs {
		if e.Kind != weirtest.RecordEvent {
			out = append(out, e.String())
		}
	}
	return out
}

func wmStr(ts ...int64) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = weirtest.Event[int]{Kind: weirtest.WatermarkEvent, TS: t}.String()
	}
	return out
}

// TestSourceWatermarkIsMinOfPartitions (I2, and runtime I3 at a source): one
// source with parallelism 2; subtask 0 reads partitions 0 and 2, subtask 1
// partitions 1 and 3, with partition watermarks 12:05:30, 12:04:00,
// 12:05:00 and 12:05:45 (minus L). Subtask 0's watermark is 12:04:00 - L,
// subtask 1's 12:05:00 - L, and the downstream operator (parallelism 1,
// fed by a rebalance, and a keyed one fed by key-by) sees 12:04:00 - L and
// nothing above it, whatever subtask 1 does, until partition 2 advances.
func TestSourceWatermarkIsMinOfPartitions(t *testing.T) {
	const L = 5000
	ctx := testCtx(t)
	g0, g0b := weirtest.NewGate(), weirtest.NewGate()
	g1, g1b := weirtest.NewGate(), weirtest.NewGate()
	type S = string
	sub0 := []weirtest.Step[S]{
		weirtest.Rec(0, "p0", hms(12, 5, 30)),
		weirtest.Rec(2, "p2", hms(12, 4, 0)),
		weirtest.WM[S](0, hms(12, 5, 30)-L),
		weirtest.WM[S](2, hms(12, 4, 0)-L),
		weirtest.PauseOn[S](g0),
		// Partition 2 advances past partition 0.
		weirtest.Rec(2, "p2-later", hms(12, 6, 0)),
		weirtest.WM[S](2, hms(12, 6, 0)-L),
		weirtest.Rec(0, "s0-marker", hms(12, 9, 0)),
		weirtest.PauseOn[S](g0b),
	}
	sub1 := []weirtest.Step[S]{
		weirtest.Rec(1, "p1", hms(12, 5, 0)),
		weirtest.Rec(3, "p3", hms(12, 5, 45)),
		weirtest.WM[S](1, hms(12, 5, 0)-L),
		weirtest.WM[S](3, hms(12, 5, 45)-L),
		weirtest.Rec(1, "s1-marker", hms(12, 9, 0)),
		weirtest.PauseOn[S](g1),
		// Subtask 1 advances far: the downstream must not follow.
		weirtest.WM[S](1, hms(12, 7, 0)-L),
		weirtest.WM[S](3, hms(12, 8, 0)-L),
		weirtest.Rec(1, "s1-marker2", hms(12, 9, 30)),
		weirtest.PauseOn[S](g1b),
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, AutoWatermarkInterval: noTicks})
	src := weir.FromSource(env, "kafka", weirtest.Script([][]weirtest.Step[S]{sub0, sub1}), watermark.NoWatermarks[S]())
	perSubtask := weirtest.ObserveWith(src, weirtest.Options{Name: "source-out"})
	down := weirtest.ObserveWith(weir.Rebalance(src), weirtest.Options{Name: "downstream", Parallelism: 1})
	keyed := weir.Process(weir.KeyBy(src, func(s S) string { return s[:2] }), "keyed",
		func() weir.KeyedProcessFunction[string, S, S] {
			return weir.ProcessFuncs[string, S, S]{ElementFn: func(v S, ctx *weir.KeyedContext[string, S]) error {
				ctx.Collect(v)
				return nil
			}}
		}).Parallelism(1)
	keyedObs := weirtest.ObserveWith(keyed, weirtest.Options{Name: "keyed-out", Parallelism: 1})
	wait := start(t, ctx, env)

	must(t, g0.WaitArrived(ctx, 1))
	must(t, g1.WaitArrived(ctx, 1))
	// The markers follow every element of subtask 1 on its channels; the
	// downstream watermark needs subtask 0's last watermark.
	for _, o := range []*weirtest.Observation[S]{down, keyedObs} {
		must(t, o.WaitRecord(ctx, hasRecord("s1-marker")))
		must(t, o.WaitWatermark(ctx, 0, hms(12, 4, 0)-L))
		if got, want := o.Watermarks(0), []int64{hms(12, 4, 0) - L}; !slices.Equal(got, want) {
			t.Fatalf("%s: watermarks %v, want %v", o.Name(), got, want)
		}
	}
	if got, want := perSubtask.Watermarks(0), []int64{hms(12, 4, 0) - L}; !slices.Equal(got, want) {
		t.Fatalf("source subtask 0: watermarks %v, want min(12:05:30, 12:04:00) - L = %v", got, want)
	}
	if got, want := perSubtask.Watermarks(1), []int64{hms(12, 5, 0) - L}; !slices.Equal(got, want) {
		t.Fatalf("source subtask 1: watermarks %v, want min(12:05:00, 12:05:45) - L = %v", got, want)
	}
	for sub, want := range []int64{hms(12, 4, 0) - L, hms(12, 5, 0) - L} {
		var got int64
		for _, m := range env.Metrics().Snapshot() {
			if m.Operator == "kafka" && m.Subtask == sub && m.Name == "watermark" {
				got = m.Value
			}
		}
		if got != want {
			t.Fatalf("watermark gauge of source subtask %d: %d, want %d", sub, got, want)
		}
	}

	// Subtask 1 races ahead: nothing changes downstream.
	g1.Release()
	for _, o := range []*weirtest.Observation[S]{down, keyedObs} {
		must(t, o.WaitRecord(ctx, hasRecord("s1-marker2")))
		if got, want := o.Watermarks(0), []int64{hms(12, 4, 0) - L}; !slices.Equal(got, want) {
			t.Fatalf("%s: after subtask 1 advanced: watermarks %v, want %v", o.Name(), got, want)
		}
	}

	// Partition 2 advances: subtask 0 moves to min(12:05:30, 12:06:00) - L,
	// and the downstream with it.
	g0.Release()
	for _, o := range []*weirtest.Observation[S]{down, keyedObs} {
		must(t, o.WaitRecord(ctx, hasRecord("s0-marker")))
		if got, want := o.Watermarks(0), []int64{hms(12, 4, 0) - L, hms(12, 5, 30) - L}; !slices.Equal(got, want) {
			t.Fatalf("%s: after partition 2 advanced: watermarks %v, want %v", o.Name(), got, want)
		}
	}
	g0b.Release()
	g1b.Release()
	wait()
	for _, o := range []*weirtest.Observation[S]{perSubtask, down, keyedObs} {
		o.CheckFinal(t)
		if v := o.StatusViolations(); len(v) > 0 {
			t.Error(v)
		}
	}
	if n := down.Len(); n != 8 {
		t.Fatalf("downstream saw %d records, want 8", n)
	}
}

// twoInputOp builds an operator with two inputs over a and b that passes
// every record through.
type twoInputOp struct {
	name  string
	build func(a, b weir.Stream[string]) weir.Stream[string]
}

var twoInputOps = []twoInputOp{
	{"KeyedCoProcess", func(a, b weir.Stream[string]) weir.Stream[string] {
		key := func(s string) string { return s[:1] }
		return weir.KeyedCoProcess(weir.KeyBy(a, key), weir.KeyBy(b, key), "join",
			func() weir.KeyedCoProcessFunction[string, string, string, string] { return passCo{} })
	}},
	{"CoFlatMap", func(a, b weir.Stream[string]) weir.Stream[string] {
		emit := func(v string, out func(string)) { out(v) }
		return weir.CoFlatMap(a, b, "join", emit, emit)
	}},
}

type passCo struct{}

func (passCo) Open(*weir.KeyedContext[string, string]) error { return nil }
func (passCo) ProcessElement1(v string, c *weir.KeyedContext[string, string]) error {
	c.Collect(v)
	return nil
}
func (passCo) ProcessElement2(v string, c *weir.KeyedContext[string, string]) error {
	c.Collect(v)
	return nil
}
func (passCo) OnTimer(int64, *weir.KeyedContext[string, string]) error { return nil }

// TestTwoInputOperatorTakesMinimum (I2 across two inputs): an operator with two
// inputs at 12:05:00 and 12:03:00 is at 12:03:00; when the slow one moves
// to 12:06:00 the operator moves to 12:05:00 (now held by the other), and
// so on.
func TestTwoInputOperatorTakesMinimum(t *testing.T) {
	for _, op := range twoInputOps {
		t.Run(op.name, func(t *testing.T) {
			ctx := testCtx(t)
			ga, gb1, gb2 := weirtest.NewGate(), weirtest.NewGate(), weirtest.NewGate()
			type S = string
			a := []weirtest.Step[S]{
				weirtest.Rec(0, "a1", hms(12, 5, 0)),
				weirtest.WM[S](0, hms(12, 5, 0)),
				weirtest.PauseOn[S](ga),
				weirtest.WM[S](0, hms(12, 8, 0)),
				weirtest.Rec(0, "a-marker", hms(12, 9, 0)),
			}
			b := []weirtest.Step[S]{
				weirtest.Rec(0, "b1", hms(12, 3, 0)),
				weirtest.WM[S](0, hms(12, 3, 0)),
				weirtest.Rec(0, "b-marker", hms(12, 9, 0)),
				weirtest.PauseOn[S](gb1),
				weirtest.WM[S](0, hms(12, 6, 0)),
				weirtest.Rec(0, "b-marker2", hms(12, 9, 0)),
				weirtest.PauseOn[S](gb2),
			}
			env := weir.NewEnvironment(weir.Config{AutoWatermarkInterval: noTicks})
			sa := weir.FromSource(env, "S0", weirtest.Script([][]weirtest.Step[S]{a}), watermark.NoWatermarks[S]())
			sb := weir.FromSource(env, "S1", weirtest.Script([][]weirtest.Step[S]{b}), watermark.NoWatermarks[S]())
			out := weirtest.Observe(op.build(sa, sb))
			wait := start(t, ctx, env)

			must(t, out.WaitRecord(ctx, hasRecord("b-marker")))
			must(t, out.WaitWatermark(ctx, 0, hms(12, 3, 0)))
			if got, want := out.Watermarks(0), []int64{hms(12, 3, 0)}; !slices.Equal(got, want) {
				t.Fatalf("watermarks %v, want min(12:05, 12:03) = %v", got, want)
			}
			gb1.Release()
			must(t, out.WaitRecord(ctx, hasRecord("b-marker2")))
			if got, want := out.Watermarks(0), []int64{hms(12, 3, 0), hms(12, 5, 0)}; !slices.Equal(got, want) {
				t.Fatalf("watermarks %v, want %v (min(12:05, 12:06))", got, want)
			}
			ga.Release()
			must(t, out.WaitRecord(ctx, hasRecord("a-marker")))
			must(t, out.WaitWatermark(ctx, 0, hms(12, 6, 0)))
			// Input a has ended (Max): the operator follows b alone.
			if got, want := out.Watermarks(0), []int64{hms(12, 3, 0), hms(12, 5, 0), hms(12, 6, 0)}; !slices.Equal(got, want) {
				t.Fatalf("watermarks %v, want %v", got, want)
			}
			gb2.Release()
			wait()
			out.CheckFinal(t)
			if n := out.Len(); n != 5 {
				t.Fatalf("%d records, want 5", n)
			}
		})
	}
}

// TestIdleSourceRejoin (watermark I4-I6, the rejoin rule): an idle source
// stops holding the minimum; when it comes back active with its watermark
// behind the output, it does not pull the output back, and the output does
// not wait for it either: it rejoins the minimum once its watermark has
// caught up, and then holds the minimum again. When every input is idle the
// operator goes idle; the first input back makes it active.
func TestIdleSourceRejoin(t *testing.T) {
	ctx := testCtx(t)
	type S = string
	gA := make([]*weirtest.Gate, 6)
	gB := make([]*weirtest.Gate, 4)
	for i := range gA {
		gA[i] = weirtest.NewGate()
	}
	for i := range gB {
		gB[i] = weirtest.NewGate()
	}
	a := []weirtest.Step[S]{
		weirtest.WM[S](0, 100),
		weirtest.PauseOn[S](gA[1]),
		weirtest.IdleStep[S](0), // A leaves the minimum
		weirtest.PauseOn[S](gA[2]),
		weirtest.ActiveStep[S](0), // back, at 100, behind the output (200)
		weirtest.WM[S](0, 150),    // still behind
		weirtest.Rec(0, "a-back", 1000),
		weirtest.PauseOn[S](gA[3]),
		weirtest.WM[S](0, 300), // caught up: rejoins
		weirtest.Rec(0, "a-300", 1001),
		weirtest.PauseOn[S](gA[4]),
		weirtest.IdleStep[S](0),
		weirtest.PauseOn[S](gA[5]),
		weirtest.ActiveStep[S](0),
		weirtest.Rec(0, "a-again", 2000),
	}
	b := []weirtest.Step[S]{
		weirtest.WM[S](0, 200),
		weirtest.Rec(0, "b1", 201),
		weirtest.PauseOn[S](gB[1]),
		weirtest.WM[S](0, 400),
		weirtest.Rec(0, "b-400", 1002),
		weirtest.PauseOn[S](gB[2]),
		weirtest.IdleStep[S](0),
		weirtest.PauseOn[S](gB[3]),
	}
	env := weir.NewEnvironment(weir.Config{AutoWatermarkInterval: noTicks})
	sa := weir.FromSource(env, "A", weirtest.Script([][]weirtest.Step[S]{a}), watermark.NoWatermarks[S]())
	sb := weir.FromSource(env, "B", weirtest.Script([][]weirtest.Step[S]{b}), watermark.NoWatermarks[S]())
	// The operator under test: a map over the union of A and B.
	op := weir.Map(weir.Union(sa, sb), "op", strings.Clone)
	out := weirtest.Observe(op)
	wait := start(t, ctx, env)
	expect := func(stage string, want ...string) {
		t.Helper()
		if got := controls(out.Events(0)); !slices.Equal(got, want) {
			t.Fatalf("%s: operator output %v, want %v\n%s", stage, got, want, out.Dump())
		}
	}

	must(t, out.WaitRecord(ctx, hasRecord("b1")))
	must(t, out.WaitWatermark(ctx, 0, 100))
	expect("min(A=100, B=200)", wmStr(100)...)

	gA[1].Release()
	must(t, out.WaitWatermark(ctx, 0, 200))
	expect("A idle: B alone", wmStr(100, 200)...)

	gA[2].Release()
	must(t, out.WaitRecord(ctx, hasRecord("a-back")))
	expect("A back at 150 < 200: no step back", wmStr(100, 200)...)

	gA[3].Release()
	must(t, out.WaitRecord(ctx, hasRecord("a-300")))
	expect("A at 300: rejoined, B (200) holds", wmStr(100, 200)...)

	gB[1].Release()
	must(t, out.WaitRecord(ctx, hasRecord("b-400")))
	expect("B at 400: A (300) holds the minimum again", wmStr(100, 200, 300)...)

	gA[4].Release()
	must(t, out.WaitWatermark(ctx, 0, 400))
	expect("A idle: B alone", wmStr(100, 200, 300, 400)...)

	gB[2].Release()
	must(t, out.WaitUntil(ctx, func() bool { return len(controls(out.Events(0))) == 5 }))
	expect("both idle", append(wmStr(100, 200, 300, 400), "idle")...)

	gA[5].Release()
	must(t, out.WaitRecord(ctx, hasRecord("a-again")))
	gB[3].Release()
	wait()
	expect("A back, then both end", append(wmStr(100, 200, 300, 400), "idle", "active", "W(Max)")...)
	out.CheckFinal(t)
	if v := out.StatusViolations(); len(v) > 0 {
		t.Fatal(v)
	}
}

// TestTimersFireInOrderBeforeWatermark (I3): timers of
// user_A at 12:10:00, user_B at 12:10:05 and user_C at 12:10:00 all fire,
// in ascending timestamp order, when the watermark jumps from 12:05 to
// 12:11 in one step, with the operator's current watermark already at
// 12:11, and all before the watermark 12:11 reaches the sink. A timer that
// a firing timer registers and that is already due fires in the same pass;
// one that is not due waits.
func TestTimersFireInOrderBeforeWatermark(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism %d", par), func(t *testing.T) {
			type S = string
			steps := []weirtest.Step[S]{
				weirtest.Rec(0, "user_A", hms(12, 0, 0)),
				weirtest.Rec(0, "user_B", hms(12, 0, 5)),
				weirtest.Rec(0, "user_C", hms(12, 0, 0)),
				weirtest.WM[S](0, hms(12, 5, 0)),
				weirtest.WM[S](0, hms(12, 11, 0)),
			}
			env := weir.NewEnvironment(weir.Config{Parallelism: par, AutoWatermarkInterval: noTicks})
			src := weir.FromSource(env, "orders", weirtest.Script([][]weirtest.Step[S]{steps}), watermark.NoWatermarks[S]()).Parallelism(1)
			timeouts := weir.Process(weir.KeyBy(src, func(s S) string { return s }), "timeout",
				func() weir.KeyedProcessFunction[string, S, S] {
					return weir.ProcessFuncs[string, S, S]{
						ElementFn: func(v S, ctx *weir.KeyedContext[string, S]) error {
							ctx.RegisterEventTimeTimer(ctx.Timestamp() + 10*60*1000)
							return nil
						},
						TimerFn: func(ts int64, ctx *weir.KeyedContext[string, S]) error {
							if wm := ctx.CurrentWatermark(); wm != hms(12, 11, 0) && wm != watermark.Max {
								return fmt.Errorf("timer %d of %s fired at watermark %d", ts, ctx.Key(), wm)
							}
							ctx.Collect(fmt.Sprintf("%s@%d", ctx.Key(), ts))
							if ctx.Key() == "user_C" && ts == hms(12, 10, 0) {
								ctx.RegisterEventTimeTimer(hms(12, 10, 30))    // due: same pass
								ctx.RegisterEventTimeTimer(hms(12, 11, 0) + 1) // not due
							}
							return nil
						},
					}
				})
			out := weirtest.Observe(timeouts)
			if err := env.Execute(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			out.CheckFinal(t)
			var all []string
			for sub := range out.Subtasks() {
				evs := out.Events(sub)
				// Per subtask: the timer records lie between W(12:05) and
				// W(12:11), in ascending timestamp order; the late one
				// after W(12:11), before Max.
				var last int64
				phase := 0 // 0 before W(12:05), 1 before W(12:11), 2 before Max
				for _, e := range evs {
					switch e.Kind {
					case weirtest.WatermarkEvent:
						phase++
					case weirtest.RecordEvent:
						all = append(all, e.Value)
						if e.TS < last {
							t.Fatalf("subtask %d: timers out of order: %v", sub, evs)
						}
						last = e.TS
						want := 1
						if e.TS > hms(12, 11, 0) {
							want = 2
						}
						if phase != want {
							t.Fatalf("subtask %d: %v arrived in phase %d, want %d: %v", sub, e, phase, want, evs)
						}
					}
				}
				if got := out.Watermarks(sub); !slices.Equal(got, []int64{hms(12, 5, 0), hms(12, 11, 0), watermark.Max}) {
					t.Fatalf("subtask %d: watermarks %v", sub, got)
				}
			}
			slices.Sort(all)
			want := []string{
				fmt.Sprintf("user_A@%d", hms(12, 10, 0)),
				fmt.Sprintf("user_B@%d", hms(12, 10, 5)),
				fmt.Sprintf("user_C@%d", hms(12, 10, 0)),
				fmt.Sprintf("user_C@%d", hms(12, 10, 30)),
				fmt.Sprintf("user_C@%d", hms(12, 11, 0)+1),
			}
			if !slices.Equal(all, want) {
				t.Fatalf("fired %v, want %v", all, want)
			}
			if par == 1 {
				// One subtask holds every key: the global order is by
				// timestamp (A and C tie at 12:10:00).
				var order []string
				for _, e := range out.Events(0) {
					if e.Kind == weirtest.RecordEvent {
						order = append(order, e.Value[:6])
					}
				}
				// A and C tie at 12:10:00; then B at 12:10:05, C's timer
				// registered while firing at 12:10:30, C's late one.
				if !(slices.Equal(order, []string{"user_A", "user_C", "user_B", "user_C", "user_C"}) ||
					slices.Equal(order, []string{"user_C", "user_A", "user_B", "user_C", "user_C"})) {
					t.Fatalf("firing order %v", order)
				}
			}
		})
	}
}

// TestBoundedOutOfOrdernessBoundary (the periodic watermark maxTs - B - 1 ms)
// through a job: with a
// bound of 5 s the periodic watermark is maxTs - 5 s - 1 ms, so a window
// ending at 12:05:00 (its timer at 12:04:59.999) fires once a record of
// 12:05:05.000 has been seen, not for one of 12:05:04.999; and a record of
// exactly maxTs - B (12:05:00.000) is still on time after that. Periodic
// emission runs on a manual clock that the test advances.
func TestBoundedOutOfOrdernessBoundary(t *testing.T) {
	ctx := testCtx(t)
	const interval = 200 * time.Millisecond
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	type S = string
	g1, g2 := weirtest.NewGate(), weirtest.NewGate()
	steps := []weirtest.Step[S]{
		weirtest.Rec(0, "r0", hms(12, 4, 0)), // opens the window [12:00, 12:05)
		weirtest.Rec(0, "r1", hms(12, 5, 4)+999),
		weirtest.PauseOn[S](g1),
		weirtest.Rec(0, "r2", hms(12, 5, 5)),
		weirtest.PauseOn[S](g2),
		weirtest.Rec(0, "r3", hms(12, 5, 0)), // exactly maxTs - B: on time
	}
	env := weir.NewEnvironment(weir.Config{Clock: clk, AutoWatermarkInterval: interval})
	src := weir.FromSource(env, "events", weirtest.Script([][]weirtest.Step[S]{steps}),
		watermark.ForBoundedOutOfOrderness[S](5*time.Second))
	srcObs := weirtest.ObserveWith(src, weirtest.Options{Name: "source-out"})
	windowEnd := hms(12, 5, 0)
	fired := weir.Process(weir.KeyBy(src, func(S) int { return 0 }), "window",
		func() weir.KeyedProcessFunction[int, S, S] {
			return weir.ProcessFuncs[int, S, S]{
				ElementFn: func(v S, ctx *weir.KeyedContext[int, S]) error {
					if ctx.Timestamp() < windowEnd {
						ctx.RegisterEventTimeTimer(windowEnd - 1) // window [12:00, 12:05)
					}
					if v == "r3" {
						if ctx.Timestamp() <= ctx.CurrentWatermark() {
							ctx.Collect("late:" + v)
						} else {
							ctx.Collect("on-time:" + v)
						}
					}
					return nil
				},
				TimerFn: func(ts int64, ctx *weir.KeyedContext[int, S]) error {
					ctx.Collect("fired")
					return nil
				},
			}
		})
	out := weirtest.Observe(fired)
	wait := start(t, ctx, env)

	// tickUntil advances the clock one interval at a time until cond holds
	// (the source registers its periodic emit when it starts, which the
	// test does not observe, so one interval may not be enough).
	tickUntil := func(cond func() bool) {
		t.Helper()
		for i := 0; !cond(); i++ {
			if i == 200 {
				t.Fatalf("condition not reached after %d intervals\n%s%s", i, srcObs.Dump(), out.Dump())
			}
			clk.Advance(interval)
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_ = out.WaitUntil(wctx, cond)
			cancel()
		}
	}
	must(t, g1.WaitArrived(ctx, 1))
	must(t, srcObs.WaitRecords(ctx, 2))
	tickUntil(func() bool { return out.Watermark(0) >= windowEnd-2 })
	if got, want := out.Watermarks(0), []int64{windowEnd - 2}; !slices.Equal(got, want) {
		t.Fatalf("after 12:05:04.999: watermarks %v, want [12:05:04.999 - 5s - 1ms = %d]", got, want[0])
	}
	if slices.Contains(out.Values(), "fired") {
		t.Fatal("the window fired at watermark 12:04:59.998")
	}

	g1.Release()
	must(t, srcObs.WaitRecords(ctx, 3))
	must(t, g2.WaitArrived(ctx, 1))
	tickUntil(func() bool { return out.Watermark(0) >= windowEnd-1 })
	evs := out.Events(0)
	if got, want := fmt.Sprint(evs), fmt.Sprintf("[W(%d) fired@%d W(%d)]", windowEnd-2, windowEnd-1, windowEnd-1); got != want {
		t.Fatalf("after 12:05:05.000: sink saw %s, want %s", got, want)
	}

	g2.Release()
	wait()
	out.CheckFinal(t)
	srcObs.CheckFinal(t)
	if got := out.Values(); !slices.Equal(got, []string{"fired", "on-time:r3"}) {
		t.Fatalf("values %v", got)
	}
}
