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
	"github.com/weirproject/weir/weirtest"
	"github.com/weirproject/weir/window"
)

// TestTriggerStateSurvivesRestore: a checkpoint taken while triggers hold
// state mid-window (CountTrigger's count, ContinuousEventTimeTrigger's
// next firing time and timers, CountSliding's kept records with their
// timestamps) restores, at parallelism 1 and 2, so that the output before
// the checkpoint plus the output after the restore equals the output of
// the same records without a failure.
func TestTriggerStateSurvivesRestore(t *testing.T) {
	var all []runtime.Record[ev]
	for i := range int64(40) {
		all = append(all, rec(string(rune('a'+i%3)), 1000+i*700, i+1))
	}
	const cut = 17 // records before the checkpoint: mid-window for every operator
	type sinks struct{ count, cont, slide *logSink[string] }
	build := func(par int, cp runtime.CheckpointConfig, f *feed[ev]) (*weir.Environment, sinks) {
		env := weir.NewEnvironment(weir.Config{Parallelism: par, AutoWatermarkInterval: -1, Checkpoint: cp})
		ks := weir.KeyBy(weir.FromSource(env, "feed", runtime.Source[ev](f), eagerBounded(0)).Parallelism(1), evKey)
		return env, sinks{
			count: sinkTo(window.Process(ks, "count", window.Global(), listFn, window.WithTrigger(window.CountTrigger(4)))),
			cont: sinkTo(window.Process(ks, "continuous", window.Tumbling(10*time.Second), listFn,
				window.WithTrigger(window.PurgingTrigger(window.ContinuousEventTimeTrigger(3*time.Second))))),
			slide: sinkTo(window.Process(ks, "sliding", window.CountSliding(3, 2), listFn,
				window.WithEvictor(window.TimeEvictor(5*time.Second)))),
		}
	}
	outputs := func(s sinks) []string {
		var out []string
		for name, l := range map[string]*logSink[string]{"count": s.count, "continuous": s.cont, "sliding": s.slide} {
			for _, r := range l.records() {
				out = append(out, fmt.Sprintf("%s %s@%d", name, r.Value, r.Timestamp))
			}
		}
		return out
	}

	// Without a failure.
	f0 := newFeed[ev]()
	env0, s0 := build(1, runtime.CheckpointConfig{}, f0)
	f0.push(all...)
	f0.close()
	run(t, env0)
	want := outputs(s0)
	slices.Sort(want)
	if len(want) < 10 {
		t.Fatalf("only %d firings without a failure: %v", len(want), want)
	}

	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("restore-parallelism-%d", par), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f1 := newFeed[ev]()
			env1, s1 := build(1, runtime.CheckpointConfig{Dir: t.TempDir()}, f1)
			job, err := env1.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			f1.push(all[:cut]...)
			lastWM := all[cut-1].Timestamp - 1
			weirtest.Eventually(t, "phase 1 records processed", func() bool {
				return slices.ContainsFunc(s1.count.entries(), func(e entry[string]) bool { return e.IsWM && e.Watermark == lastWM })
			})
			_, path, err := job.TriggerCheckpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			job.Cancel()
			if err := job.Wait(); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			got := outputs(s1)

			f2 := newFeed[ev]()
			env2, s2 := build(par, runtime.CheckpointConfig{RestoreFrom: path}, f2)
			f2.push(all[cut:]...)
			f2.close()
			run(t, env2)
			got = append(got, outputs(s2)...)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("with a restore:\n got %q\nwant %q", got, want)
			}
		})
	}
}
