package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/window"
)

// idleEv is a record whose WM field drives the source's generator: > 0
// emits that watermark, < 0 marks the source idle (after the record).
type idleEv struct {
	Key string
	TS  int64
	WM  int64
}

func idleStrategy() watermark.Strategy[idleEv] {
	return watermark.ForGenerator(func() watermark.Generator[idleEv] {
		return watermark.GeneratorFuncs[idleEv]{Event: func(e idleEv, _ int64, o watermark.Output) {
			switch {
			case e.WM > 0:
				o.EmitWatermark(e.WM)
			case e.WM < 0:
				o.MarkIdle()
			}
		}}
	}).WithTimestamp(func(e idleEv, _ int64) (int64, bool) { return e.TS, true })
}

// seqRecorder records what reaches the end of a job, in arrival order:
// records as "key@ts", watermarks as "wm ts", status changes as "idle b".
type seqRecorder[T any] struct {
	runtime.Base[struct{}]
	mu   *sync.Mutex
	seq  *[]string
	name func(T) string
}

func (x *seqRecorder[T]) add(s string) {
	x.mu.Lock()
	*x.seq = append(*x.seq, s)
	x.mu.Unlock()
}

func (x *seqRecorder[T]) ProcessRecord(r runtime.Record[T]) error {
	x.add(fmt.Sprintf("%s@%d", x.name(r.Value), r.Timestamp))
	return nil
}
func (x *seqRecorder[T]) ProcessWatermark(ts int64) error {
	x.add(fmt.Sprintf("wm %d", ts))
	return nil
}
func (x *seqRecorder[T]) ProcessIdle(idle bool) error {
	x.add(fmt.Sprintf("idle %v", idle))
	return nil
}
func (x *seqRecorder[T]) EndInput() error { return nil }

func recordSeq[T any](s weir.Stream[T], name func(T) string) func() []string {
	var mu sync.Mutex
	var seq []string
	weir.Transform(s, "record", func() runtime.OneInputOperator[T, struct{}] {
		return &seqRecorder[T]{mu: &mu, seq: &seq, name: name}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seq)
	}
}

// TestKeyedTimersHoldIdle (runtime I8): a keyed process function's input
// goes idle while an event-time timer is pending; its output stays active
// (no "idle true" downstream) until the timer has fired, and goes idle
// when its input is idle with no timer pending.
func TestKeyedTimersHoldIdle(t *testing.T) {
	in := []idleEv{
		{Key: "a", TS: 10},          // timer at 20
		{Key: "a", TS: 12, WM: -1},  // idle with the timer at 20 (and 22) pending: stays active
		{Key: "b", TS: 30, WM: 25},  // active again: fires 20 and 22; timer at 40 pending
		{Key: "b", TS: 35, WM: 50},  // fires 40 and 45: nothing pending
		{Key: "b", TS: 60, WM: -1},  // a timer at 70: idle withheld
		{Key: "c", TS: 80, WM: 100}, // fires 70 and 90
		{Key: "c", TS: 101, WM: -1}, // behind nothing; timer at 111: withheld
	}
	// The last record's WM marks idle before its timer could... the record
	// registers first (a source emits a record before its generator sees it).
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "in", in, idleStrategy())
	ks := weir.KeyBy(src, func(e idleEv) string { return e.Key })
	fired := weir.Process(ks, "timers", func() weir.KeyedProcessFunction[string, idleEv, string] {
		return weir.ProcessFuncs[string, idleEv, string]{
			ElementFn: func(e idleEv, c *weir.KeyedContext[string, string]) error {
				c.RegisterEventTimeTimer(e.TS + 10)
				return nil
			},
			TimerFn: func(ts int64, c *weir.KeyedContext[string, string]) error {
				c.Collect(c.Key())
				return nil
			},
		}
	})
	seq := recordSeq(fired, func(s string) string { return s })
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a@20", "a@22", "wm 25", "b@40", "b@45", "wm 50", "b@70", "c@90", "wm 100",
		"c@111", "wm 9223372036854775807"}
	if got := seq(); !slices.Equal(got, want) {
		t.Errorf("downstream saw\n%q\nwant\n%q", got, want)
	}
}

// TestKeyedIdleWithNothingPending: with no timer pending the idle status
// passes at once, and active follows it (H1). The source's last split
// finishing does not make it idle before its final watermark.
func TestKeyedIdleWithNothingPending(t *testing.T) {
	in := []idleEv{
		{Key: "a", TS: 10, WM: 5},
		{Key: "a", TS: 12, WM: -1},
		{Key: "a", TS: 30, WM: 40},
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "in", in, idleStrategy())
	ks := weir.KeyBy(src, func(e idleEv) string { return e.Key })
	out := weir.Process(ks, "no-timers", func() weir.KeyedProcessFunction[string, idleEv, string] {
		return weir.ProcessFuncs[string, idleEv, string]{
			ElementFn: func(e idleEv, c *weir.KeyedContext[string, string]) error {
				c.Collect(c.Key())
				return nil
			},
		}
	})
	seq := recordSeq(out, func(s string) string { return s })
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	// a@30 comes before "idle false": a source emits a record before its
	// generator sees it, and here the generator's watermark activates.
	want := []string{"a@10", "wm 5", "a@12", "idle true", "a@30", "idle false", "wm 40", "wm 9223372036854775807"}
	if got := seq(); !slices.Equal(got, want) {
		t.Errorf("downstream saw\n%q\nwant\n%q", got, want)
	}
}

// TestWindowHoldsIdle (runtime I8): a window operator whose input goes
// idle with a window open does not go idle; the window's result, emitted
// when the input is active again, is ahead of every watermark downstream
// saw.
func TestWindowHoldsIdle(t *testing.T) {
	in := []idleEv{
		{Key: "a", TS: 10, WM: 5},
		{Key: "a", TS: 20, WM: -1},   // idle with window [0,100) open: stays active
		{Key: "a", TS: 150, WM: 120}, // fires [0,100); [100,200) open
		{Key: "a", TS: 250, WM: 300}, // fires the rest: nothing open
		{Key: "a", TS: 301, WM: -1},  // window [300,400) open: withheld
	}
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, AutoWatermarkInterval: -1})
	src := weir.FromSlice(env, "in", in, idleStrategy())
	ks := weir.KeyBy(src, func(e idleEv) string { return e.Key })
	sums := window.Reduce(ks, "win", window.Tumbling(100*time.Millisecond), func(a, b idleEv) idleEv {
		a.TS += b.TS
		return a
	})
	seq := recordSeq(sums, func(e idleEv) string { return fmt.Sprintf("%s%d", e.Key, e.TS) })
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"wm 5", "a30@99", "wm 120", "a150@199", "a250@299", "wm 300", "a301@399", "wm 9223372036854775807"}
	if got := seq(); !slices.Equal(got, want) {
		t.Errorf("downstream saw\n%q\nwant\n%q", got, want)
	}
}
