package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/clock"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/watermark"
	"github.com/weirproject/weir/weirtest"
)

// jumpClock is the real clock, moved 10ms forward at each of its first
// 100 readings, so that a processing-time callback registered for the
// next millisecond is due at the next look: what a loaded machine does to
// a subtask that is not scheduled for a while.
type jumpClock struct {
	mu    sync.Mutex
	jumps int
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jumps < 100 {
		c.jumps++
	}
	return time.Now().Add(time.Duration(c.jumps) * 10 * time.Millisecond)
}

func (c *jumpClock) NewTimer(d time.Duration) clock.Timer { return clock.Real.NewTimer(d) }

// splitAtFirstPoll adds its one split in its first Poll, as the Kafka
// source does, emits three records and ends.
type splitAtFirstPoll struct{}

func (splitAtFirstPoll) CreateReader(runtime.SourceContext) (runtime.Reader[int], error) {
	return &firstPollReader{}, nil
}

type firstPollReader struct{ polls int }

func (r *firstPollReader) Poll(out runtime.SourceOutput[int]) (runtime.PollStatus, error) {
	r.polls++
	if r.polls == 1 {
		out.AddSplit(0)
		return runtime.More, nil
	}
	if r.polls <= 4 {
		out.Collect(0, r.polls, int64(10*r.polls))
		return runtime.More, nil
	}
	return runtime.Done, nil
}

func (r *firstPollReader) Ready() <-chan struct{} { return nil }
func (r *firstPollReader) Close() error           { return nil }

// A source subtask is never idle before its reader's first Poll, however
// late that comes: the periodic watermark emission starts after it. Before
// the fix, a tick due before the first Poll found no split and sent the
// idle status (watermark I16), and consumers moved their event time past
// the subtask's first records (the simulator's seed
// 3067126113256805175: a window dropped a Kafka partition's records as
// late).
func TestSourceIsNotIdleBeforeItsFirstPoll(t *testing.T) {
	env := weir.NewEnvironment(weir.Config{Clock: &jumpClock{}, AutoWatermarkInterval: time.Millisecond})
	obs := weirtest.Observe(weir.FromSource(env, "src", runtime.Source[int](splitAtFirstPoll{}),
		watermark.ForBoundedOutOfOrderness[int](0)).UID("src"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	ev := obs.Events(0)
	for _, e := range ev {
		if e.Kind == weirtest.RecordEvent {
			break
		}
		if e.Kind == weirtest.IdleEvent {
			t.Fatalf("the source went idle before its first record: %v", ev)
		}
	}
	if got := len(obs.Values()); got != 3 {
		t.Fatalf("%d records observed, want 3: %v", got, ev)
	}
}
