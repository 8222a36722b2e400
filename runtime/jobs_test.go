package runtime_test

// End-to-end tests of the runtime through the typed API: unions, side
// outputs, dead letters, failures, cancellation, configuration errors,
// back-pressure and chaining.

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

func tsStrategy() watermark.Strategy[event] {
	return watermark.ForMonotonous[event]().WithTimestamp(func(e event, _ int64) (int64, bool) { return e.TS, true })
}

func events(prefix string, n int, keys int) []event {
	out := make([]event, n)
	for i := range out {
		out[i] = event{Key: fmt.Sprintf("%s%d", prefix, i%keys), TS: int64(i), N: i}
	}
	return out
}

// TestUnionDeliversEveryRecordOnce: a union of three sources of different
// parallelism delivers every record of each exactly once, and its consumer
// ends at Max only after all of them ended.
func TestUnionDeliversEveryRecordOnce(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	a := weir.FromSlice(env, "a", events("a", 500, 5), tsStrategy())
	b := weir.FromSlice(env, "b", events("b", 300, 3), tsStrategy()).Parallelism(3)
	c := weir.FromSlice(env, "c", events("c", 200, 2), tsStrategy()).Parallelism(1)
	u := weir.Map(weir.Union(a, b, c), "tag", func(e event) string { return fmt.Sprintf("%s#%d", e.Key[:1], e.N) })
	out := weirtest.Observe(u)
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	out.CheckFinal(t)
	got := out.Values()
	if len(got) != 1000 {
		t.Fatalf("%d records, want 1000", len(got))
	}
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("%s twice", v)
		}
		seen[v] = true
	}
	for p, n := range map[string]int{"a": 500, "b": 300, "c": 200} {
		for i := range n {
			if !seen[fmt.Sprintf("%s#%d", p, i)] {
				t.Fatalf("%s#%d missing", p, i)
			}
		}
	}
}

// TestSideOutputs: a keyed process function sends some records to a side
// output; the main and the side streams each get theirs, and both get the
// watermarks (the side output's consumer ends at Max and sees no late
// record).
func TestSideOutputs(t *testing.T) {
	odd := weir.NewOutputTag[int]("odd")
	big := weir.NewOutputTag[string]("big")
	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
	src := weir.FromSlice(env, "src", events("k", 1000, 7), tsStrategy())
	main := weir.Process(weir.KeyBy(src, func(e event) string { return e.Key }), "split",
		func() weir.KeyedProcessFunction[string, event, int] {
			return weir.ProcessFuncs[string, event, int]{ElementFn: func(e event, ctx *weir.KeyedContext[string, int]) error {
				if e.N%2 == 1 {
					weir.SideOutputTo(ctx, odd, e.N)
				} else {
					ctx.Collect(e.N)
				}
				if e.N >= 990 {
					weir.SideOutputTo(ctx, big, fmt.Sprint(e.N))
				}
				return nil
			}}
		})
	mainObs := weirtest.Observe(main)
	oddObs := weirtest.ObserveWith(weir.SideOutput(main, odd), weirtest.Options{Name: "odd"})
	bigObs := weirtest.ObserveWith(weir.SideOutput(main, big), weirtest.Options{Name: "big"})
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, o := range []interface{ CheckFinal(weirtest.TB) }{mainObs, oddObs, bigObs} {
		o.CheckFinal(t)
	}
	even, odds := mainObs.Values(), oddObs.Values()
	slices.Sort(even)
	slices.Sort(odds)
	if len(even) != 500 || len(odds) != 500 {
		t.Fatalf("%d main, %d side records", len(even), len(odds))
	}
	for i := range 500 {
		if even[i] != 2*i || odds[i] != 2*i+1 {
			t.Fatalf("main %d, side %d at %d", even[i], odds[i], i)
		}
	}
	if n := bigObs.Len(); n != 10 {
		t.Fatalf("%d records on the second side output, want 10", n)
	}
}

// TestDeadLettersForRecordsWithoutTimestamps: records without a timestamp
// (and a strategy that assigns none, or refuses one) go to the source's
// dead-letter output with the reason, are counted, and do not reach the
// main stream.
func TestDeadLettersForRecordsWithoutTimestamps(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{AutoWatermarkInterval: noTicks})
	steps := []weirtest.Step[int]{
		weirtest.Rec(0, 1, 10),
		weirtest.Rec(0, 2, runtime.NoTimestamp),
		weirtest.Rec(0, 3, 30),
		weirtest.Rec(0, 4, runtime.NoTimestamp),
		weirtest.Rec(1, 5, runtime.NoTimestamp),
	}
	src := weir.FromSource(env, "scripted", weirtest.Script([][]weirtest.Step[int]{steps}), watermark.NoWatermarks[int]())
	main := weirtest.Observe(src)
	dead := weirtest.ObserveWith(weir.DeadLetters(src), weirtest.Options{Name: "dead"})

	// A strategy whose timestamp function refuses some records.
	refuse := watermark.NoWatermarks[event]().WithTimestamp(func(e event, _ int64) (int64, bool) { return e.TS, e.TS >= 0 })
	src2 := weir.FromSlice(env, "slice", []event{{Key: "x", TS: 1}, {Key: "y", TS: -1}, {Key: "z", TS: 2}}, refuse)
	main2 := weirtest.ObserveWith(src2, weirtest.Options{Name: "main2"})
	dead2 := weirtest.ObserveWith(weir.DeadLetters(src2), weirtest.Options{Name: "dead2"})

	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := main.Values(); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("main %v", got)
	}
	var vals []any
	for _, d := range dead.Values() {
		if d.Source != "scripted" || d.Reason == "" {
			t.Fatalf("dead letter %+v", d)
		}
		vals = append(vals, d.Value)
	}
	if fmt.Sprint(vals) != "[2 4 5]" {
		t.Fatalf("dead letters %v", vals)
	}
	if n := env.Metrics().Sum("scripted", "deadLetters"); n != 3 {
		t.Fatalf("deadLetters metric %d, want 3", n)
	}
	if got := len(main2.Values()); got != 2 {
		t.Fatalf("main2 has %d records", got)
	}
	if d := dead2.Values(); len(d) != 1 || d[0].Value.(event).Key != "y" || d[0].Source != "slice" {
		t.Fatalf("dead2 %+v", d)
	}
	if n := env.Metrics().Sum("slice", "deadLetters"); n != 1 {
		t.Fatalf("deadLetters metric of slice %d, want 1", n)
	}
	main.CheckFinal(t)
	dead.CheckFinal(t)
}

// TestProcessErrorFailsJobNamingOperator: an error returned by a process
// function ends the job with an error that wraps it and names the operator
// and subtask; Execute returns promptly even though the source is
// unbounded.
func TestProcessErrorFailsJobNamingOperator(t *testing.T) {
	boom := errors.New("boom")
	for _, chaining := range []bool{true, false} {
		t.Run(fmt.Sprintf("chaining=%v", chaining), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Config{Parallelism: 2, DisableChaining: !chaining})
			src := weir.Generate(env, "gen", -1, func(i int64) weir.Record[event] {
				return weir.Record[event]{Value: event{Key: fmt.Sprint(i % 10), TS: i, N: int(i)}, Timestamp: i}
			}, watermark.NoWatermarks[event]())
			p := weir.Process(weir.KeyBy(src, func(e event) string { return e.Key }), "explode",
				func() weir.KeyedProcessFunction[string, event, int] {
					return weir.ProcessFuncs[string, event, int]{ElementFn: func(e event, ctx *weir.KeyedContext[string, int]) error {
						if e.N == 5000 {
							return fmt.Errorf("record %d: %w", e.N, boom)
						}
						return nil
					}}
				})
			// A map chained behind the failing operator.
			m := weir.MapErr(p, "check", func(v int) (int, error) { return v, nil })
			weir.Collect(m)
			err := env.Execute(testCtx(t))
			if !errors.Is(err, boom) {
				t.Fatalf("Execute returned %v, want it to wrap %v", err, boom)
			}
			var oe *runtime.OperatorError
			if !errors.As(err, &oe) || oe.Operator != "explode" || oe.Phase != runtime.PhaseProcess {
				t.Fatalf("error %q is not an *runtime.OperatorError naming operator explode in PhaseProcess", err)
			}
		})
	}
}

// TestMapErrorNamesChainedOperator: an error of a function chained behind
// its source names that function's operator, not the source.
func TestMapErrorNamesChainedOperator(t *testing.T) {
	bad := errors.New("bad value")
	env := weir.NewEnvironment(weir.Config{})
	src := weir.FromSlice(env, "src", events("k", 100, 3), tsStrategy())
	m := weir.MapErr(src, "parse", func(e event) (int, error) {
		if e.N == 50 {
			return 0, bad
		}
		return e.N, nil
	})
	weir.Collect(m)
	err := env.Execute(testCtx(t))
	var oe *runtime.OperatorError
	if !errors.Is(err, bad) || !errors.As(err, &oe) || oe.Operator != "parse" || oe.Subtask != 0 || oe.Parallelism != 1 {
		t.Fatalf("Execute returned %v, want an *runtime.OperatorError of parse, subtask 0 of 1", err)
	}
	if !strings.Contains(err.Error(), `operator "parse" (subtask 0 of 1)`) {
		t.Fatalf("error %q does not name the operator and subtask", err)
	}
}

// TestPanickingMapReturnsError: a panic in a user function fails the job
// with an error (the process does not crash) that says it panicked.
func TestPanickingMapReturnsError(t *testing.T) {
	for _, chaining := range []bool{true, false} {
		t.Run(fmt.Sprintf("chaining=%v", chaining), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Config{DisableChaining: !chaining})
			src := weir.FromSlice(env, "src", events("k", 100, 3), tsStrategy())
			m := weir.Map(src, "divide", func(e event) int { return 100 / (e.N - 42) })
			weir.Collect(m)
			err := env.Execute(testCtx(t))
			var oe *runtime.OperatorError
			var pe *runtime.PanicError
			var re goruntime.Error
			if !errors.As(err, &oe) || oe.Phase != runtime.PhasePanic || !errors.As(err, &pe) || !errors.As(err, &re) ||
				!strings.Contains(re.Error(), "divide by zero") {
				t.Fatalf("Execute returned %v, want an *runtime.OperatorError of PhasePanic whose *runtime.PanicError holds the runtime.Error", err)
			}
			if !strings.Contains(err.Error(), "panicked") || len(pe.Stack) == 0 {
				t.Fatalf("error %q does not say it panicked, or has no stack", err)
			}
		})
	}
}

// TestPanicNamesOperator: the error of a panic names the operator whose
// function panicked (I6), also when it is chained behind another operator
// in the same goroutine.
func TestPanicNamesOperator(t *testing.T) {
	for _, chaining := range []bool{true, false} {
		t.Run(fmt.Sprintf("chaining=%v", chaining), func(t *testing.T) {
			env := weir.NewEnvironment(weir.Config{DisableChaining: !chaining})
			src := weir.FromSlice(env, "src", events("k", 100, 3), tsStrategy())
			m := weir.Map(src, "divide", func(e event) int { return 100 / (e.N - 42) })
			weir.Collect(m)
			err := env.Execute(testCtx(t))
			var oe *runtime.OperatorError
			if !errors.As(err, &oe) || oe.Operator != "divide" {
				t.Fatalf("Execute returned %v; want an *runtime.OperatorError naming operator \"divide\"", err)
			}
		})
	}
}

// waitGoroutines waits (bounded) until the number of goroutines is back to
// at most n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := goruntime.NumGoroutine()
		if got <= n {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:goruntime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want at most %d:\n%s", got, n, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCancelUnboundedSource: cancelling the context of a job with an
// unbounded source (fast, or back-pressured by a slow sink) makes Execute
// return context.Canceled promptly, and no goroutine is left behind.
func TestCancelUnboundedSource(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow sink=%v", slow), func(t *testing.T) {
			before := goruntime.NumGoroutine()
			env := weir.NewEnvironment(weir.Config{Parallelism: 2, BufferSize: 16, BuffersPerChannel: 2})
			src := weir.Generate(env, "gen", -1, func(i int64) weir.Record[int64] {
				return weir.Record[int64]{Value: i, Timestamp: i}
			}, watermark.ForMonotonous[int64]())
			var n atomic.Int64
			started := make(chan struct{})
			var once sync.Once
			weir.ToSink(weir.Rebalance(src), "sink", func(*runtime.Context) (weir.SinkWriter[int64], error) {
				return weir.SinkFunc[int64](func(weir.Record[int64]) error {
					if n.Add(1) == 1000 {
						once.Do(func() { close(started) })
					}
					if slow {
						time.Sleep(100 * time.Microsecond)
					}
					return nil
				}), nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- env.Execute(ctx) }()
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the sink saw fewer than 1000 records")
			}
			cancel()
			select {
			case err := <-errc:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Execute returned %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Execute did not return after cancel")
			}
			waitGoroutines(t, before)
		})
	}
}

// TestDeadlineExceededIsReported: a job whose context times out returns
// context.DeadlineExceeded.
func TestDeadlineExceededIsReported(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{})
	src := weir.Generate(env, "gen", -1, func(i int64) weir.Record[int64] {
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.NoWatermarks[int64]())
	weir.ToSink(src, "sink", func(*runtime.Context) (weir.SinkWriter[int64], error) {
		return weir.SinkFunc[int64](func(weir.Record[int64]) error { return nil }), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := env.Execute(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Execute returned %v, want context.DeadlineExceeded", err)
	}
}

// TestConfigurationErrors: a forward edge between different parallelisms,
// an input that is not connected, and a parallelism above the max
// parallelism are refused by Execute with an error that says what and
// where.
func TestConfigurationErrors(t *testing.T) {
	t.Run("parallelism mismatch", func(t *testing.T) {
		env := weir.NewEnvironment(weir.Config{})
		src := weir.FromSlice(env, "src", events("k", 10, 2), tsStrategy())
		weir.Collect(weir.Map(src, "widen", func(e event) event { return e }).Parallelism(3))
		err := env.Execute(testCtx(t))
		if err == nil || !strings.Contains(err.Error(), `forward edge "src" -> "widen" joins parallelism 1 to 3`) {
			t.Fatalf("Execute returned %v", err)
		}
	})
	t.Run("disconnected input", func(t *testing.T) {
		env := weir.NewEnvironment(weir.Config{})
		src := weir.FromSlice(env, "src", events("k", 10, 2), tsStrategy())
		weir.Collect(src)
		runtime.AddOneInput(env.Graph(), "orphan", func() runtime.OneInputOperator[int, int] { return &passOp[int]{} })
		err := env.Execute(testCtx(t))
		if err == nil || !strings.Contains(err.Error(), `input 1 of operator "orphan" is not connected`) {
			t.Fatalf("Execute returned %v", err)
		}
	})
	t.Run("parallelism above max parallelism", func(t *testing.T) {
		env := weir.NewEnvironment(weir.Config{MaxParallelism: 2})
		src := weir.FromSlice(env, "src", events("k", 10, 2), tsStrategy())
		weir.Collect(weir.Map(weir.Rebalance(src), "wide", func(e event) event { return e }).Parallelism(3))
		err := env.Execute(testCtx(t))
		if err == nil || !strings.Contains(err.Error(), `"wide"`) {
			t.Fatalf("Execute returned %v", err)
		}
	})
	t.Run("empty job", func(t *testing.T) {
		env := weir.NewEnvironment(weir.Config{})
		if err := env.Execute(testCtx(t)); !errors.Is(err, runtime.ErrEmptyJob) {
			t.Fatalf("Execute returned %v", err)
		}
	})
}

type passOp[T any] struct{ runtime.Base[T] }

func (o *passOp[T]) ProcessRecord(r runtime.Record[T]) error { o.Out.Collect(r); return nil }
func (o *passOp[T]) EndInput() error                         { return nil }

// TestBackPressureSlowSinkLosesNothing: a fast source and a slow sink
// (sleeping 1 ms every 100 records): the job completes with every record
// exactly once, with default buffers and with the smallest ones (4 records,
// one buffer per channel).
func TestBackPressureSlowSinkLosesNothing(t *testing.T) {
	const n = 20000
	cfgs := map[string]weir.Config{
		"default buffers": {Parallelism: 2},
		"tiny buffers":    {Parallelism: 2, BufferSize: 4, BuffersPerChannel: 1},
		"tiny unchained":  {Parallelism: 3, BufferSize: 4, BuffersPerChannel: 1, DisableChaining: true},
	}
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			env := weir.NewEnvironment(cfg)
			src := weir.Generate(env, "gen", n, func(i int64) weir.Record[int64] {
				return weir.Record[int64]{Value: i, Timestamp: i}
			}, watermark.ForMonotonous[int64]())
			mapped := weir.Map(src, "id", func(v int64) int64 { return v })
			var mu sync.Mutex
			seen := make([]int, n)
			weir.ToSink(weir.Rebalance(mapped), "slow", func(*runtime.Context) (weir.SinkWriter[int64], error) {
				count := 0
				return weir.SinkFunc[int64](func(r weir.Record[int64]) error {
					count++
					if count%100 == 0 {
						time.Sleep(time.Millisecond)
					}
					mu.Lock()
					seen[r.Value]++
					mu.Unlock()
					return nil
				}), nil
			})
			if err := env.Execute(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("record %d seen %d times", i, c)
				}
			}
		})
	}
}

// runCountingJob runs a deterministic keyed pipeline and returns, per key,
// the sequence of running counts and the final watermarks per subtask.
func runCountingJob(t *testing.T, cfg weir.Config) (map[string][]int, []int64) {
	env := weir.NewEnvironment(cfg)
	var in []event
	for i := range 3000 {
		in = append(in, event{Key: fmt.Sprintf("k%d", i%11), TS: int64(i / 3), N: i})
	}
	s := weir.FromSlice(env, "src", in, watermark.ForBoundedOutOfOrderness[event](0).WithTimestamp(func(e event, _ int64) (int64, bool) { return e.TS, true }))
	s = weir.Filter(s, "drop7", func(e event) bool { return e.N%7 != 0 })
	s = weir.Map(s, "double", func(e event) event { e.N *= 2; return e })
	counts := weir.Process(weir.KeyBy(s, func(e event) string { return e.Key }), "count",
		func() weir.KeyedProcessFunction[string, event, string] {
			var cnt *state.ValueState[string, int]
			return weir.ProcessFuncs[string, event, string]{
				OpenFn: func(ctx *weir.KeyedContext[string, string]) error {
					cnt = state.MustValue[string, int](ctx.State(), "count")
					return nil
				},
				ElementFn: func(e event, ctx *weir.KeyedContext[string, string]) error {
					c, _ := cnt.Value()
					cnt.Update(c + 1)
					ctx.Collect(fmt.Sprintf("%s=%d", e.Key, c+1))
					return nil
				},
			}
		})
	out := weirtest.Observe(weir.Map(counts, "fmt", strings.ToUpper))
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	out.CheckFinal(t)
	per := map[string][]int{}
	for _, v := range out.Values() {
		var k string
		var c int
		fmt.Sscanf(strings.Replace(v, "=", " ", 1), "%s %d", &k, &c)
		per[k] = append(per[k], c)
	}
	var finals []int64
	for i := range out.Subtasks() {
		finals = append(finals, out.Watermark(i))
	}
	return per, finals
}

// TestDisableChainingGivesSameResults: with and without chaining, and with
// different buffer sizes, the job computes the same thing: per key, the
// same sequence of running counts (the order within a key is kept).
func TestDisableChainingGivesSameResults(t *testing.T) {
	base, finals := runCountingJob(t, weir.Config{Parallelism: 3})
	for k, cs := range base {
		for i, c := range cs {
			if c != i+1 {
				t.Fatalf("key %s: counts %v", k, cs)
			}
		}
	}
	for _, cfg := range []weir.Config{
		{Parallelism: 3, DisableChaining: true},
		{Parallelism: 3, DisableChaining: true, BufferSize: 1, BuffersPerChannel: 1},
		{Parallelism: 3, BufferSize: 7, BufferTimeout: -1},
	} {
		got, gotFinals := runCountingJob(t, cfg)
		if fmt.Sprint(got) != fmt.Sprint(base) {
			t.Fatalf("%+v: results differ from the chained job", cfg)
		}
		if !slices.Equal(gotFinals, finals) {
			t.Fatalf("%+v: final watermarks %v, want %v", cfg, gotFinals, finals)
		}
	}
}

// TestSourceEndsActiveBeforeMax: a source subtask whose splits are all idle
// or finished is idle; when it ends, its final watermark (Max) must follow
// an active status, as every combiner output does (watermark I7: no
// watermark while idle), so that an operator sees the same sequence whether
// it is chained to the source or behind a network channel (whose combiner
// re-activates the channel on the watermark).
func TestSourceEndsActiveBeforeMax(t *testing.T) {
	scripts := map[string][]weirtest.Step[int]{
		"finished split": {weirtest.Rec(0, 1, 5), weirtest.FinishStep[int](0)},
		"idle split":     {weirtest.Rec(0, 1, 5), weirtest.WM[int](0, 7), weirtest.IdleStep[int](0)},
	}
	for name, steps := range scripts {
		for _, chaining := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/chaining=%v", name, chaining), func(t *testing.T) {
				env := weir.NewEnvironment(weir.Config{AutoWatermarkInterval: noTicks, DisableChaining: !chaining})
				src := weir.FromSource(env, "src", weirtest.Script([][]weirtest.Step[int]{steps}), watermark.NoWatermarks[int]())
				out := weirtest.Observe(weir.Map(src, "id", func(v int) int { return v }))
				if err := env.Execute(testCtx(t)); err != nil {
					t.Fatal(err)
				}
				out.CheckFinal(t)
				if v := out.StatusViolations(); len(v) > 0 {
					t.Fatalf("%v\n%s", v, out.Dump())
				}
			})
		}
	}
}

// TestSplitIDReusedAfterFinish: a reader may finish a split and later
// start a new split with the same id (watermark.Splits.Remove: "the id may
// be added again later, as a new split"), for example a partition that is
// revoked and assigned again. Its records must flow like any other.
func TestSplitIDReusedAfterFinish(t *testing.T) {
	steps := []weirtest.Step[int]{
		weirtest.Rec(0, 1, 5),
		weirtest.WM[int](0, 5),
		weirtest.FinishStep[int](0),
		weirtest.Rec(0, 2, 6), // split 0 again: a new split
		weirtest.WM[int](0, 6),
	}
	env := weir.NewEnvironment(weir.Config{AutoWatermarkInterval: noTicks})
	src := weir.FromSource(env, "src", weirtest.Script([][]weirtest.Step[int]{steps}), watermark.NoWatermarks[int]())
	out := weirtest.Observe(src)
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	out.CheckFinal(t)
	if got := out.Values(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("values %v, want [1 2]\n%s", got, out.Dump())
	}
}

// TestDeadLettersAreNotLate: the dead-letter output carries the source's
// watermarks, so its records must not be behind them, or an event-time
// consumer of the dead letters (a windowed count, say) drops them. Dead
// letters are stamped with processing time; here event time is ahead of
// it (a manual clock at the epoch, as in tests; or future-dated input).
func TestDeadLettersAreNotLate(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(0))
	env := weir.NewEnvironment(weir.Config{Clock: clk, AutoWatermarkInterval: noTicks})
	steps := []weirtest.Step[int]{
		weirtest.Rec(0, 1, 500),
		weirtest.WM[int](0, 1000),
		weirtest.Rec(0, 2, runtime.NoTimestamp),
	}
	src := weir.FromSource(env, "src", weirtest.Script([][]weirtest.Step[int]{steps}), watermark.NoWatermarks[int]())
	weir.Collect(src)
	dead := weirtest.ObserveWith(weir.DeadLetters(src), weirtest.Options{Name: "dead"})
	if err := env.Execute(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if dead.Len() != 1 {
		t.Fatalf("%d dead letters, want 1", dead.Len())
	}
	dead.CheckFinal(t)
}

// TestProcessingTimeTimersOnManualClock: processing-time timers of a keyed
// function fire when the clock reaches them, with that time, also while
// the subtask's periodic flush re-arms its own wake-ups (the flush tick at
// +100 ms re-registers itself at +200 ms while the timer at +150 ms is
// pending).
func TestProcessingTimeTimersOnManualClock(t *testing.T) {
	ctx := testCtx(t)
	t0 := time.UnixMilli(1_000_000)
	clk := clock.NewManual(t0)
	g := weirtest.NewGate()
	steps := []weirtest.Step[string]{weirtest.Rec(0, "k", 1), weirtest.PauseOn[string](g)}
	env := weir.NewEnvironment(weir.Config{Clock: clk, AutoWatermarkInterval: noTicks, BufferTimeout: 100 * time.Millisecond,
		Parallelism: 2})
	src := weir.FromSource(env, "src", weirtest.Script([][]weirtest.Step[string]{steps}), watermark.NoWatermarks[string]()).Parallelism(1)
	p := weir.Process(weir.KeyBy(src, func(s string) string { return s }), "proc",
		func() weir.KeyedProcessFunction[string, string, int64] {
			return weir.ProcessFuncs[string, string, int64]{
				ElementFn: func(v string, ctx *weir.KeyedContext[string, int64]) error {
					ctx.RegisterProcessingTimeTimer(ctx.CurrentProcessingTime() + 150)
					ctx.Collect(-ctx.CurrentProcessingTime())
					return nil
				},
				TimerFn: func(ts int64, ctx *weir.KeyedContext[string, int64]) error {
					if ctx.TimeDomain() != weir.ProcessingTime || ts != t0.UnixMilli()+150 {
						return fmt.Errorf("timer %d in domain %v", ts, ctx.TimeDomain())
					}
					ctx.Collect(ctx.CurrentProcessingTime())
					return nil
				},
			}
		})
	// Through a rebalance, so the keyed subtasks have outputs to flush.
	out := weirtest.ObserveWith(weir.Rebalance(p), weirtest.Options{Parallelism: 1})
	wait := start(t, ctx, env)
	must(t, out.WaitRecords(ctx, 1)) // the record was processed at the start time
	if got := out.Values(); got[0] != -t0.UnixMilli() {
		t.Fatalf("processed at %d, want %d", -got[0], t0.UnixMilli())
	}
	for _, ms := range []int64{50, 100, 120} {
		clk.Set(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	clk.Set(t0.Add(150 * time.Millisecond))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := out.WaitRecords(wctx, 2)
	cancel()
	if err != nil {
		t.Fatalf("the timer due at +150 ms did not fire at +150 ms: %v", err)
	}
	if got := out.Values()[1]; got != t0.UnixMilli()+150 {
		t.Fatalf("timer ran at %d, want %d", got, t0.UnixMilli()+150)
	}
	g.Release()
	wait()
}

// TestProcessingTimeTimersBehindTheHead: several processing-time timers
// registered in ascending order (only the first changes the head of the
// queue) all fire, each when the clock reaches it. The timer service
// reports a new head only on registration; after a firing pass the operator
// must schedule its next wake-up from the queue's new head.
func TestProcessingTimeTimersBehindTheHead(t *testing.T) {
	for _, op := range []string{"Process", "KeyedCoProcess"} {
		t.Run(op, func(t *testing.T) {
			ctx := testCtx(t)
			t0 := time.UnixMilli(1_000_000)
			clk := clock.NewManual(t0)
			g := weirtest.NewGate()
			steps := []weirtest.Step[string]{weirtest.Rec(0, "k", 1), weirtest.PauseOn[string](g)}
			env := weir.NewEnvironment(weir.Config{Clock: clk, AutoWatermarkInterval: noTicks, BufferTimeout: -1})
			src := weir.FromSource(env, "src", weirtest.Script([][]weirtest.Step[string]{steps}), watermark.NoWatermarks[string]())
			element := func(ctx *weir.KeyedContext[string, int64]) {
				now := ctx.CurrentProcessingTime()
				ctx.RegisterProcessingTimeTimer(now + 100)
				ctx.RegisterProcessingTimeTimer(now + 150)
				ctx.RegisterProcessingTimeTimer(now + 300)
				ctx.Collect(-1) // processed
			}
			onTimer := func(ts int64, ctx *weir.KeyedContext[string, int64]) error {
				ctx.Collect(ctx.CurrentProcessingTime() - t0.UnixMilli())
				return nil
			}
			key := func(s string) string { return s }
			var p weir.Stream[int64]
			if op == "Process" {
				p = weir.Process(weir.KeyBy(src, key), "proc", func() weir.KeyedProcessFunction[string, string, int64] {
					return weir.ProcessFuncs[string, string, int64]{
						ElementFn: func(v string, ctx *weir.KeyedContext[string, int64]) error { element(ctx); return nil },
						TimerFn:   onTimer,
					}
				})
			} else {
				none := weir.FromSource(env, "none", weirtest.Script([][]weirtest.Step[string]{{weirtest.PauseOn[string](g)}}), watermark.NoWatermarks[string]())
				p = weir.KeyedCoProcess(weir.KeyBy(src, key), weir.KeyBy(none, key), "proc",
					func() weir.KeyedCoProcessFunction[string, string, string, int64] {
						return coFuncs{element: element, onTimer: onTimer}
					})
			}
			out := weirtest.Observe(p)
			wait := start(t, ctx, env)
			must(t, out.WaitRecords(ctx, 1))
			for i, ms := range []int64{100, 150, 300} {
				clk.Set(t0.Add(time.Duration(ms) * time.Millisecond))
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := out.WaitRecords(wctx, i+2)
				cancel()
				if err != nil {
					g.Release()
					wait()
					t.Fatalf("the timer at +%d ms did not fire: fired at %v", ms, out.Values())
				}
			}
			g.Release()
			wait()
			if got := out.Values(); !slices.Equal(got, []int64{-1, 100, 150, 300}) {
				t.Fatalf("timers fired at %v", got)
			}
		})
	}
}

type coFuncs struct {
	element func(*weir.KeyedContext[string, int64])
	onTimer func(int64, *weir.KeyedContext[string, int64]) error
}

func (c coFuncs) Open(*weir.KeyedContext[string, int64]) error { return nil }
func (c coFuncs) ProcessElement1(v string, ctx *weir.KeyedContext[string, int64]) error {
	c.element(ctx)
	return nil
}
func (c coFuncs) ProcessElement2(string, *weir.KeyedContext[string, int64]) error { return nil }
func (c coFuncs) OnTimer(ts int64, ctx *weir.KeyedContext[string, int64]) error {
	return c.onTimer(ts, ctx)
}
