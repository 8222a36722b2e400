package window_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/weirtest"
	"github.com/weirproject/weir/window"
)

func TestWindowCodec(t *testing.T) {
	c := window.WindowCodec{}
	for _, w := range []window.Window{{}, {Start: -5000, End: 0}, {Start: 1 << 62, End: 1<<63 - 1}, {Start: -1 << 63, End: 7}} {
		b, err := c.Append([]byte("x"), w)
		if err != nil || string(b[:1]) != "x" {
			t.Fatalf("Append(%v): %q, %v", w, b, err)
		}
		got, err := c.Decode(b[1:])
		if err != nil || got != w {
			t.Fatalf("Decode(Append(%v)) = %v, %v", w, got, err)
		}
		if _, err := c.Decode(append(b[1:], 0)); !errors.Is(err, state.ErrCorruptSnapshot) {
			t.Fatalf("trailing byte: %v", err)
		}
		if _, err := c.Decode(b[1 : len(b)-1]); !errors.Is(err, state.ErrCorruptSnapshot) {
			t.Fatalf("truncated: %v", err)
		}
	}
}

// TestCheckpointRestore: window contents, timers and session sets survive
// a checkpoint and a restore. After the restore the watermark starts over
// from the minimum, so, as in Flink, a record joining a restored window
// that fired already makes it fire again when the watermark passes its end
// (within the allowed lateness); restored sessions keep merging.
func TestCheckpointRestore(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("restore-parallelism-%d", par), func(t *testing.T) { testCheckpointRestore(t, par) })
	}
}

func testCheckpointRestore(t *testing.T, restorePar int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sumAgg := window.AggregateFuncs[ev, int64, int64]{
		AddFn:    func(e ev, acc int64) int64 { return acc + e.N },
		ResultFn: func(acc int64) int64 { return acc },
		MergeFn:  func(a, b int64) int64 { return a + b },
	}
	build := func(par int, cp runtime.CheckpointConfig, f *feed[ev]) (*weir.Environment, *logSink[window.Result[string, ev]], *logSink[window.Result[string, int64]]) {
		env := weir.NewEnvironment(weir.Config{Parallelism: par, AutoWatermarkInterval: -1, Checkpoint: cp})
		ks := weir.KeyBy(weir.FromSource(env, "feed", runtime.Source[ev](f), eagerBounded(0)).Parallelism(1), evKey)
		tumbling := sinkTo(window.ReduceKeyed(ks, "tumbling", window.Tumbling(10*time.Second), sumEv, window.AllowedLateness(5*time.Second)))
		sessions := sinkTo(window.AggregateKeyed(ks, "sessions", window.Session(3*time.Second), sumAgg))
		return env, tumbling, sessions
	}
	results := func(tl *logSink[window.Result[string, ev]], sl *logSink[window.Result[string, int64]]) (tum, ses []string) {
		for _, r := range tl.records() {
			tum = append(tum, fmt.Sprintf("%s%v=%d", r.Value.Key, r.Value.Window, r.Value.Value.N))
		}
		for _, r := range sl.records() {
			ses = append(ses, fmt.Sprintf("%s%v=%d", r.Value.Key, r.Value.Window, r.Value.Value))
		}
		return tum, ses
	}

	// Phase 1: records, then a checkpoint once all are in.
	f1 := newFeed[ev]()
	env1, tum1, ses1 := build(1, runtime.CheckpointConfig{Dir: t.TempDir()}, f1)
	job, err := env1.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f1.push(rec("a", 1000, 1), rec("a", 2000, 1), rec("b", 5000, 1), rec("s", 11_000, 1),
		rec("a", 12_000, 1), rec("a", 9500, 1), rec("s", 13_000, 1))
	weirtest.Eventually(t, "watermark 12999", func() bool {
		return slices.ContainsFunc(ses1.entries(), func(e entry[window.Result[string, int64]]) bool { return e.IsWM && e.Watermark == 12_999 })
	})
	_, path, err := job.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job.Cancel()
	if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	tum, ses := results(tum1, ses1)
	if want := []string{"a[0, 10000)=2", "b[0, 10000)=1", "a[0, 10000)=3"}; !slices.Equal(tum, want) {
		t.Fatalf("phase 1 tumbling %v, want %v", tum, want)
	}
	if want := []string{"a[1000, 5000)=2", "b[5000, 8000)=1"}; !slices.Equal(ses, want) {
		t.Fatalf("phase 1 sessions %v, want %v", ses, want)
	}

	// Phase 2: restore and go on.
	f2 := newFeed[ev]()
	env2, tum2, ses2 := build(restorePar, runtime.CheckpointConfig{RestoreFrom: path}, f2)
	f2.push(rec("a", 9000, 1), rec("s", 15_000, 1), rec("a", 14_000, 1))
	f2.close()
	run(t, env2)
	tum, ses = results(tum2, ses2)
	// [0,10000) of a fires again with the record from phase 2 (watermark
	// 14999), and is then cleaned up with b's; [10000,20000) fires at the
	// end with records from both phases. (With two subtasks only the
	// order per key is defined.)
	slices.Sort(tum)
	slices.Sort(ses)
	if want := []string{"a[0, 10000)=4", "a[10000, 20000)=2", "s[10000, 20000)=3"}; !slices.Equal(tum, want) {
		t.Fatalf("phase 2 tumbling %v, want %v", tum, want)
	}
	// a's restored session [9500,15000) absorbs [9000,12000); s's
	// [11000,16000) absorbs [15000,18000).
	if want := []string{"a[14000, 17000)=1", "a[9000, 15000)=3", "s[11000, 18000)=3"}; !slices.Equal(ses, want) {
		t.Fatalf("phase 2 sessions %v, want %v", ses, want)
	}
}
