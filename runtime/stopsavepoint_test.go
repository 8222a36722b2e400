package runtime_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// stopSink is an at-least-once sink that keeps every value it is given.
type stopSink struct {
	mu   sync.Mutex
	vals []int64
	n    atomic.Int64
}

func (s *stopSink) writer(*runtime.Context) (weir.SinkWriter[int64], error) {
	return weir.SinkFunc[int64](func(r weir.Record[int64]) error {
		s.mu.Lock()
		s.vals = append(s.vals, r.Value)
		s.mu.Unlock()
		s.n.Add(1)
		return nil
	}), nil
}

// stopJob: n numbers (generated, so that a restore resumes at the next one),
// through a chained map and a rebalance (a second task), into sink, at
// parallelism 2, with the source's watermarks and the channel flushes on
// processing-time callbacks.
func stopJob(n int64, sink *stopSink, restore string) *weir.Environment {
	return stopJobWith(n, sink, runtime.CheckpointConfig{RestoreFrom: restore})
}

func stopJobWith(n int64, sink *stopSink, cc runtime.CheckpointConfig) *weir.Environment {
	env := weir.NewEnvironment(weir.Config{Parallelism: 2, AutoWatermarkInterval: time.Millisecond,
		BufferTimeout: time.Millisecond, Checkpoint: cc})
	src := weir.Generate(env, "numbers", n, func(i int64) weir.Record[int64] {
		if i%4096 == 0 {
			time.Sleep(200 * time.Microsecond) // a source that takes its time: the stop comes long before the end
		}
		return weir.Record[int64]{Value: i, Timestamp: i}
	}, watermark.ForMonotonous[int64]()).UID("numbers")
	m := weir.Map(src, "same", func(v int64) int64 { return v }).UID("same")
	// Every 997th record registers a processing-time timer of its key, due
	// a millisecond later, whose firing emits a marker -(key<<42 | ts): at
	// any moment some are pending, and a savepoint holds them.
	marks := weir.Process(weir.KeyBy(m, func(v int64) int64 { return v % 50 }), "marks",
		func() weir.KeyedProcessFunction[int64, int64, int64] {
			return weir.ProcessFuncs[int64, int64, int64]{
				ElementFn: func(v int64, ctx *weir.KeyedContext[int64, int64]) error {
					if v%997 == 0 {
						ctx.RegisterProcessingTimeTimer(ctx.CurrentProcessingTime() + 1)
					}
					return nil
				},
				TimerFn: func(ts int64, ctx *weir.KeyedContext[int64, int64]) error {
					ctx.Collect(-(ctx.Key()<<42 | ts))
					return nil
				},
			}
		}).UID("marks")
	weir.ToSink(weir.Union(weir.Rebalance(m), marks), "keep", sink.writer).UID("keep")
	return env
}

// TestStopWithSavepointThenResumeWritesEachRecordOnce: a job stopped with
// Job.StopWithSavepoint (or StopWithCheckpoint, a group member's hand-over)
// and resumed from that snapshot gives an at-least-once sink every record
// exactly once: nothing the sources read after the snapshot's barrier
// reaches the outputs of the stopped run (the resumed run reads it), and no
// processing-time timer the snapshot holds fires in the stopped run (the
// resumed run fires it). With a savepoint taken by TriggerSavepoint and a
// cancel, the records read between the two are written by both runs.
func TestStopWithSavepointThenResumeWritesEachRecordOnce(t *testing.T) {
	const n = 1_000_000
	for round := range 4 {
		withCheckpoint := round%2 == 1
		sp := filepath.Join(t.TempDir(), "sp")
		chk := filepath.Join(t.TempDir(), "chk")
		first := &stopSink{}
		job, stop := weirtest.Start(t, stopJobWith(n, first, runtime.CheckpointConfig{Dir: chk}))
		weirtest.Eventually(t, "records in the sink", func() bool { return first.n.Load() > int64(10_000*(round+1)) })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		restore, err := sp, error(nil)
		if withCheckpoint {
			_, restore, err = job.StopWithCheckpoint(ctx)
		} else {
			_, err = job.StopWithSavepoint(ctx, sp)
		}
		cancel()
		if err != nil {
			t.Fatalf("round %d (checkpoint %v): stop: %v", round, withCheckpoint, err)
		}
		// The job is idle until cancelled: whatever the sink holds now and
		// after the cancel is what the snapshot covers.
		stop()

		second := &stopSink{}
		if err := stopJob(n, second, restore).Execute(testCtx(t)); err != nil {
			t.Fatalf("round %d: resumed run: %v", round, err)
		}
		seen := make([]uint8, n)
		markers := map[int64]int{}
		for _, vals := range [][]int64{first.vals, second.vals} {
			for _, v := range vals {
				if v < 0 {
					markers[v]++ // a timer's: at most once (one pending at the end of the resumed run does not fire)
					continue
				}
				seen[v]++
			}
		}
		for m, c := range markers {
			if c != 1 {
				t.Fatalf("round %d: the timer of key %d at %d fired %d times", round, -m>>42, -m&(1<<42-1), c)
			}
		}
		if len(markers) == 0 {
			t.Fatalf("round %d: no timer fired", round)
		}
		for v, c := range seen {
			if c != 1 {
				t.Fatalf("round %d (checkpoint %v): record %d written %d times (first run %d records, resumed run %d)", round, withCheckpoint, v, c, len(first.vals), len(second.vals))
			}
		}
		if len(first.vals) == 0 || len(first.vals) >= n {
			t.Fatalf("round %d: the stopped run wrote %d of %d records", round, len(first.vals), n)
		}
	}
}

// TestStopWithSavepointOfAnEndedJob: a stop asked of a job that has ended
// returns ErrJobStopped at once, as TriggerSavepoint does.
func TestStopWithSavepointOfAnEndedJob(t *testing.T) {
	sink := &stopSink{}
	env := stopJob(10, sink, "")
	job, err := env.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := job.StopWithSavepoint(testCtx(t), filepath.Join(t.TempDir(), "sp")); !errors.Is(err, runtime.ErrJobStopped) {
		t.Fatalf("stop of an ended job: %v, want ErrJobStopped", err)
	}
}

// TestStopWithSavepointAbortedReadsOn: when the stop's savepoint does not
// complete (here it times out at once), the job goes on as if no stop had
// been asked: the sources read to the end, the timers fire, and the sink
// gets every record once.
func TestStopWithSavepointAbortedReadsOn(t *testing.T) {
	const n = 300_000
	sink := &stopSink{}
	job, err := stopJobWith(n, sink, runtime.CheckpointConfig{Timeout: time.Nanosecond}).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	weirtest.Eventually(t, "records in the sink", func() bool { return sink.n.Load() > 10_000 })
	if _, err := job.StopWithSavepoint(testCtx(t), filepath.Join(t.TempDir(), "sp")); !errors.Is(err, runtime.ErrCheckpointAborted) {
		t.Fatalf("stop with a savepoint that times out: %v, want ErrCheckpointAborted", err)
	}
	select {
	case <-job.Done():
	case <-testCtx(t).Done():
		job.Cancel()
		t.Fatal("the job did not end after the aborted stop: its sources stay stopped")
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("the job after the aborted stop: %v", err)
	}
	seen := make([]uint8, n)
	markers := 0
	for _, v := range sink.vals {
		if v < 0 {
			markers++
			continue
		}
		seen[v]++
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("record %d written %d times", v, c)
		}
	}
	if markers == 0 {
		t.Fatal("no timer fired")
	}
}
