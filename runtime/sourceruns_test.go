package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"pgregory.net/rapid"
)

// runStep is one thing a scripted reader does in a Poll: a run of records
// on a split, or a split's end, idleness or watermark.
type runStep struct {
	kind  string // "run", "finish", "idle", "active", "wm"
	split int
	recs  []runtime.Record[int]
	ts    int64
}

// runReader plays a script of Polls, handing each run of records over
// with CollectAll (runs) or one Collect per record.
type runReader struct {
	polls [][]runStep
	runs  bool
}

func (r *runReader) Poll(out runtime.SourceOutput[int]) (runtime.PollStatus, error) {
	if len(r.polls) == 0 {
		return runtime.Done, nil
	}
	for _, s := range r.polls[0] {
		switch s.kind {
		case "run":
			if all, ok := out.(runtime.SourceBatchOutput[int]); ok && r.runs {
				// The run is the runtime's during the call (it may
				// write assigned timestamps into it): a copy, since the
				// script is played twice.
				all.CollectAll(s.split, slices.Clone(s.recs))
			} else {
				for _, rec := range s.recs {
					out.Collect(s.split, rec.Value, rec.Timestamp)
				}
			}
		case "finish":
			out.FinishSplit(s.split)
		case "idle", "active":
			out.SetSplitIdle(s.split, s.kind == "idle")
		case "wm":
			out.EmitWatermark(s.split, s.ts)
		}
	}
	r.polls = r.polls[1:]
	return runtime.More, nil
}

func (r *runReader) Ready() <-chan struct{} { return nil }
func (r *runReader) Close() error           { return nil }

// runLog records, in order, what reaches the operator chained to the
// source: records, watermarks and idleness.
type runLog struct {
	mu     sync.Mutex
	events []string
}

func (l *runLog) add(format string, a ...any) {
	l.mu.Lock()
	l.events = append(l.events, fmt.Sprintf(format, a...))
	l.mu.Unlock()
}

type runLogOp struct {
	runtime.Base[struct{}]
	logs []*runLog // by subtask
	log  *runLog
}

func (o *runLogOp) Open(ctx *runtime.Context, out runtime.Output[struct{}]) error {
	o.log = o.logs[ctx.Subtask]
	return o.Base.Open(ctx, out)
}

func (o *runLogOp) ProcessRecord(r runtime.Record[int]) error {
	o.log.add("subtask %d: record %d at %d", o.Ctx.Subtask, r.Value, r.Timestamp)
	return nil
}

func (o *runLogOp) ProcessWatermark(ts int64) error {
	o.log.add("subtask %d: watermark %d", o.Ctx.Subtask, ts)
	return o.Base.ProcessWatermark(ts)
}

func (o *runLogOp) ProcessIdle(idle bool) error {
	o.log.add("subtask %d: idle %v", o.Ctx.Subtask, idle)
	return nil
}

type deadLogOp struct {
	runtime.Base[struct{}]
	log *runLog
}

func (o *deadLogOp) ProcessRecord(r runtime.Record[runtime.DeadLetter]) error {
	o.log.add("dead letter: split %d %v: %s", r.Value.Split, r.Value.Value, r.Value.Reason)
	return nil
}

var runTestStrategies = []struct {
	name string
	s    watermark.Strategy[int]
}{
	{"bounded", watermark.ForBoundedOutOfOrderness[int](2 * time.Millisecond)},
	{"ascending", watermark.ForMonotonous[int]()},
	{"none", watermark.NoWatermarks[int]()},
	{"punctuated", watermark.ForGenerator(func() watermark.Generator[int] {
		return watermark.Punctuated(func(_ int, ts int64) (int64, bool) { return ts - 1, ts%3 == 0 })
	})},
	{"assigned timestamps", watermark.ForMonotonous[int]().WithTimestamp(func(v int, ts int64) (int64, bool) {
		return ts + int64(v%5), v%7 != 3
	})},
}

// runJob runs the script through a source and an edge to runLogOp
// (chained, a rebalance channel, or a key-by to two subtasks) and returns
// what each subtask of the operator saw, in order, and the dead letters,
// in order.
func runJob(t *rapid.T, polls [][]runStep, s watermark.Strategy[int], edge string, runs bool) (main map[int][]string, dead []string) {
	env := weir.NewEnvironment(weir.Config{Parallelism: 1, Clock: clock.NewManual(time.Unix(0, 0))})
	src := weir.FromSource(env, "script", runtime.SourceFunc[int](func(runtime.SourceContext) (runtime.Reader[int], error) {
		return &runReader{polls: polls, runs: runs}, nil
	}), s)
	logs := []*runLog{{}, {}}
	dl := &runLog{} // the dead letters' operator runs in a task of its own
	newLog := func() runtime.OneInputOperator[int, struct{}] { return &runLogOp{logs: logs} }
	switch edge {
	case "chained":
		weir.Transform(src, "log", newLog)
	case "rebalance":
		weir.Transform(weir.Rebalance(src), "log", newLog)
	case "key-by":
		weir.TransformKeyed(weir.KeyBy(src, func(v int) int { return v % 5 }), "log", newLog).Parallelism(2)
	}
	weir.Transform(weir.DeadLetters(src), "dead", func() runtime.OneInputOperator[runtime.DeadLetter, struct{}] {
		return &deadLogOp{log: dl}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	return map[int][]string{0: logs[0].events, 1: logs[1].events}, dl.events
}

// A reader handing runs of records over with CollectAll makes the job see
// exactly what one Collect per record makes it see, chained to the source
// or behind a channel (rebalance, key-by): the same records in the same
// order, the same watermarks and idleness between them, the same
// dead letters, whatever the watermark strategy (generators that keep only
// the highest timestamp, which take runs at once; punctuated ones and
// assigned timestamps, which go record by record), with records without a
// timestamp, new splits, finished splits, external idleness and watermarks
// in the script.
func TestSourceRunsAreRecordsOneByOne(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := runTestStrategies[rapid.IntRange(0, len(runTestStrategies)-1).Draw(rt, "strategy")]
		next := 0
		polls := rapid.Custom(func(rt *rapid.T) [][]runStep {
			var polls [][]runStep
			for range rapid.IntRange(1, 8).Draw(rt, "polls") {
				var steps []runStep
				for range rapid.IntRange(1, 5).Draw(rt, "steps") {
					split := rapid.IntRange(0, 2).Draw(rt, "split")
					switch k := rapid.IntRange(0, 7).Draw(rt, "kind"); {
					case k <= 3:
						var recs []runtime.Record[int]
						for range rapid.IntRange(1, 20).Draw(rt, "records") {
							ts := rapid.Int64Range(0, 40).Draw(rt, "ts")
							if rapid.IntRange(0, 15).Draw(rt, "untimed") == 0 {
								ts = runtime.NoTimestamp
							}
							next++
							recs = append(recs, runtime.Record[int]{Value: next, Timestamp: ts})
						}
						steps = append(steps, runStep{kind: "run", split: split, recs: recs})
					case k == 4:
						steps = append(steps, runStep{kind: "finish", split: split})
					case k == 5:
						steps = append(steps, runStep{kind: "idle", split: split})
					case k == 6:
						steps = append(steps, runStep{kind: "active", split: split})
					default:
						steps = append(steps, runStep{kind: "wm", split: split, ts: rapid.Int64Range(0, 40).Draw(rt, "wm")})
					}
				}
				polls = append(polls, steps)
			}
			return polls
		}).Draw(rt, "polls")
		edge := rapid.SampledFrom([]string{"chained", "rebalance", "key-by"}).Draw(rt, "edge")
		gotMain, gotDead := runJob(rt, polls, st.s, edge, true)
		wantMain, wantDead := runJob(rt, polls, st.s, edge, false)
		for sub := range 2 {
			if !slices.Equal(gotMain[sub], wantMain[sub]) {
				rt.Fatalf("%s, %s: with runs subtask %d saw\n%v\none by one\n%v", st.name, edge, sub, gotMain[sub], wantMain[sub])
			}
		}
		if !slices.Equal(gotDead, wantDead) {
			rt.Fatalf("%s: dead letters with runs\n%v\none by one\n%v", st.name, gotDead, wantDead)
		}
	})
}
